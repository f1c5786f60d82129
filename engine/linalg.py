"""``tapelab.linalg``: the subset of ``torch.linalg`` built from existing ops."""
from __future__ import annotations

from .ops.linalg import LinAlgError, QRResult, diagonal, matmul, qr  # noqa: F401  (qr is a registered op there)
from .ops.linalg import linalg_cholesky as cholesky
from .ops.reduce import vector_norm

__all__ = ["vector_norm", "matrix_norm", "norm", "matmul", "vecdot", "diagonal", "qr", "cholesky", "LinAlgError"]


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """Frobenius norm over the two matrix dims (other orders are not supported yet)."""
    if ord != "fro":
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} is not supported by tapelab (only 'fro')")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions "
                           f"(got {A.ndim}-D)")
    return vector_norm(A, 2, dim, keepdim, dtype=dtype)


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None):
    """``torch.linalg.norm``: 2-norm of the flattened input by default, 'fro' on matrices."""
    if isinstance(ord, str):
        return matrix_norm(A, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def vecdot(x, y, *, dim: int = -1):
    """Dot product of vectors along ``dim`` (broadcasting the rest)."""
    return (x * y).sum(dim)
