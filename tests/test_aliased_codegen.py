"""Generated code (fx's ``GraphModule.code``, ``tapelab.compile``'s graphs) names dtypes through the
``tapelab`` global it is run with, not through ``repr``: under ``install_aliases`` a dtype prints as
``torch.int64``, and nanoGPT's compiled training step (``torch.arange(..., dtype=torch.long)``) failed
with ``NameError: name 'torch' is not defined``."""
from __future__ import annotations

import tapelab


def test_a_traced_dtype_constant_runs_under_aliases():
    with tapelab.install_aliases():
        import torch
        gm = torch.fx.symbolic_trace(lambda x: x.to(torch.float64) + 1)
        assert "tapelab.float64" in gm.code and "torch." not in gm.code
        out = gm(torch.ones(2))
    assert out.dtype == tapelab.float64 and out.tolist() == [2.0, 2.0]
