"""Helpers shared by op declarations."""
from __future__ import annotations

from ..tensor import Tensor, _wrap_dim

__all__ = ["unbroadcast", "sum_to", "norm_dims", "Tensor"]


def unbroadcast(g: Tensor, x) -> Tensor | None:
    """Sum ``g`` back to the shape of input ``x`` (None when ``x`` is a Python number)."""
    if not isinstance(x, Tensor):
        return None
    return sum_to(g, x._data.shape)


def sum_to(g: Tensor, shape: tuple) -> Tensor:
    """Sum a broadcast gradient ``g`` down to ``shape``."""
    gshape = g._data.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1)
    if axes:
        g = g.sum(axes, keepdim=True)
    return g.reshape(shape) if g._data.shape != shape else g


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
