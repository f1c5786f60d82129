"""Gaps found by running public PyTorch programs (pytorch/examples, karpathy's repositories) with
``import tapelab as torch``; each test states the PyTorch behaviour the program relied on, against
real torch."""
from __future__ import annotations

import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- size= by keyword (pytorch/examples gat)
@BOTH
@pytest.mark.parametrize("name", ["empty", "zeros", "ones", "rand", "randn"])
def test_factories_take_size_by_keyword(m, name):
    fn = getattr(m, name)
    assert tuple(fn(size=(2, 3)).shape) == (2, 3)
    assert tuple(fn(size=[4]).shape) == (4,)
    assert tuple(fn(size=()).shape) == ()
    assert fn(size=(2, 3), dtype=m.float64).dtype == m.float64
    with pytest.raises(TypeError):   # sizes given twice (torch's wording differs per factory)
        fn(2, size=(3,))
    with pytest.raises(TypeError, match="argument 'size' must be tuple of ints, not int"):
        fn(size=3)


def test_size_keyword_feeds_xavier_init():
    """gat's ``nn.init.xavier_normal_(Parameter(torch.empty(size=(in, out))))``: a 2-d weight."""
    w = tapelab.nn.Parameter(tapelab.empty(size=(6, 4)))
    tapelab.nn.init.xavier_normal_(w)
    assert tuple(w.shape) == (6, 4) and w.abs().sum().item() > 0
