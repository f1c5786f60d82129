"""Generated code (fx's ``GraphModule.code``, ``tapelab.compile``'s graphs) names dtypes through the
package global it is run with, not through ``repr``. Under ``install_aliases`` that global is ``torch``
(bound to tapelab, as PyTorch's code reads); a dtype's repr with no such global made nanoGPT's compiled
training step (``torch.arange(..., dtype=torch.long)``) fail with ``NameError: name 'torch' is not
defined``."""
from __future__ import annotations

import tapelab


def test_a_traced_dtype_constant_runs_under_aliases():
    with tapelab.install_aliases():
        import torch
        gm = torch.fx.symbolic_trace(lambda x: x.to(torch.float64) + 1)
        # printed as the program imported the package (PyTorch's ``torch.float64``), bound to tapelab
        assert "torch.float64" in gm.code and "tapelab" not in gm.code
        out = gm(torch.ones(2))
    assert out.dtype == tapelab.float64 and out.tolist() == [2.0, 2.0]
