"""``tapelab.sparse``: PyTorch's ``torch.sparse`` functions over sparse COO tensors.

The tensors themselves and their ops are declared in ``ops/sparse.py`` (construction with
``tapelab.sparse_coo_tensor`` or ``Tensor.to_sparse``); this module is the public path.
"""
from __future__ import annotations

from ..core.tensor import Tensor
from ..ops.sparse import sparse_mm as mm, sparse_sum as sum  # noqa: A004  (torch.sparse.sum)

__all__ = ["mm", "sum", "addmm"]


def addmm(mat: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` (``torch.sparse.addmm``)."""
    return beta * mat + alpha * mm(mat1, mat2)
