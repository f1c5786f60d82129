"""Helpers shared by op declarations."""
from __future__ import annotations

from ..core.tensor import Tensor, _wrap_dim, sum_to, unbroadcast

__all__ = ["unbroadcast", "sum_to", "norm_dims", "Tensor"]


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
