"""``tapelab.functional``: ``torch.functional``, the module PyTorch's top-level composites live in.

Libraries name functions by this path (opt_einsum_fx matches fx nodes against
``torch.functional.einsum``), so each name here is the very function ``tapelab.<name>`` is (the
public one, with its ``out=``): the package imports this module last.
"""
from __future__ import annotations

from . import (atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_shapes, broadcast_tensors,  # noqa: F401
               cartesian_prod, cdist, chain_matmul, einsum, istft, lu, meshgrid, norm, pca_lowrank, split, stft,
               svd_lowrank, tensordot, unique, unique_consecutive, unravel_index)

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "cartesian_prod",
           "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm", "meshgrid", "pca_lowrank", "split",
           "stft", "svd_lowrank", "tensordot", "unique", "unique_consecutive", "unravel_index"]
