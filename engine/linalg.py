"""``tapelab.linalg``: the subset of ``torch.linalg`` built from existing ops."""
from __future__ import annotations

from collections import namedtuple

from .autograd.grad_mode import is_grad_enabled
from .ops.linalg import diagonal, matmul
from .tensor import Tensor
from .ops.reduce import vector_norm

__all__ = ["vector_norm", "matrix_norm", "norm", "matmul", "vecdot", "diagonal", "qr"]


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


QRResult = namedtuple("QRResult", ["Q", "R"])


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """``torch.linalg.qr`` (forward only: its backward is not implemented yet, so an input that
    requires grad raises instead of silently dropping the gradient)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                           f"(default), 'r', or 'complete'")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.qr: The input tensor A must have at least 2 dimensions (got {A.ndim}-D)")
    if A.requires_grad and is_grad_enabled():
        raise NotImplementedError("linalg.qr: the backward of QR is not implemented in tapelab yet; "
                                  "call it on a detached tensor or under tapelab.no_grad()")
    xp = A.device.xp
    q, r = xp.linalg.qr(A._data, mode="complete" if mode == "complete" else "reduced")
    dev = A.device
    Q = Tensor._wrap(q if mode != "r" else xp.empty((0,), A._data.dtype), False, None, 0, [0], dev)
    return QRResult(Q, Tensor._wrap(r, False, None, 0, [0], dev))
