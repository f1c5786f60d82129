"""Helpers shared by op declarations."""
from __future__ import annotations

from ..core.tensor import Tensor, _wrap_dim, sum_to, unbroadcast

__all__ = ["unbroadcast", "sum_to", "norm_dims", "numpy_names", "Tensor"]


def numpy_names(op: str, dim, keepdim, axis, keepdims) -> tuple:
    """``(dim, keepdim)`` from PyTorch's numpy spellings too: ``axis=`` for ``dim``, ``keepdims=`` for
    ``keepdim`` (``x.sum(axis=0)``, ``x.all(axis=-1)``, ``mean(x, 0, keepdims=True)``)."""
    if axis is not None:
        if dim is not None and dim != ():
            raise TypeError(f"{op}() got multiple values for argument 'dim' (also given as 'axis')")
        dim = axis
    return dim, keepdim if keepdims is None else keepdims


def norm_dims(dim, ndim: int, op: str) -> tuple | None:
    """Normalise an int / sequence / None ``dim`` argument to a sorted tuple of axes."""
    if dim is None:
        return None
    if isinstance(dim, int):
        return (_wrap_dim(dim, ndim, op),)
    dims = tuple(_wrap_dim(d, ndim, op) for d in dim)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{op}: dim {list(dim)} appears multiple times in the list of dims")
    return tuple(sorted(dims))
