"""``tapelab.functional``: ``torch.functional``, the module PyTorch's top-level composites live in.

Libraries name functions by this path (opt_einsum_fx matches fx nodes against
``torch.functional.einsum``), so each name here is the very function ``tapelab.<name>`` is (the
public one, with its ``out=``). They are read from the package face in ``sys.modules`` when asked
for (a module ``__getattr__``), not imported: the face imports this module, and importing the face
from here would close an import circle (as ``fx/_public.py`` reads the face).
"""
from __future__ import annotations

import sys

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "cartesian_prod",
           "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm", "meshgrid", "pca_lowrank", "split",
           "stft", "svd_lowrank", "tensordot", "unique", "unique_consecutive", "unravel_index"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(sys.modules[__name__.rpartition(".")[0]], name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
