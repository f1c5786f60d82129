"""Gaps met in session 16 by programs run under real torch and under tapelab, each against PyTorch."""
import pytest
import torch

import tapelab


@pytest.mark.parametrize("other", ["bfloat16", "float16", "int32", "float64", "bool"])
def test_lerp_refuses_another_dtype_with_torchs_words(other):
    """A bfloat16 ``end`` (an EMA update under autocast) raised KeyError naming numpy's dtype."""
    messages = []
    for lib in (torch, tapelab):
        x = lib.ones(3)
        with pytest.raises(RuntimeError) as e:
            lib.lerp(x, x.to(getattr(lib, other)), 0.5)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
