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


def dim_or_axis(op: str, dim, axis):
    """``dim``, or its numpy spelling ``axis=``, which PyTorch takes wherever a function has a ``dim``
    (``torch.stack(xs, axis=0)``, ``x.softmax(axis=-1)``, ``x.cumsum(axis=0)``); a ``dim`` left out
    without an ``axis`` is PyTorch's missing-argument TypeError."""
    if axis is not None:
        return axis
    if dim is None:
        raise TypeError(f"{op}() missing 1 required positional arguments: \"dim\"")
    return dim


def norm_dims(dim, ndim: int, op: str) -> tuple | None:
    """Normalise an int / sequence / None ``dim`` argument to a sorted tuple of axes."""
    if dim is None:
        return None
    if isinstance(dim, int):
        return (_wrap_dim(dim, ndim, op),)
    dims = tuple(_wrap_dim(d, ndim, op) for d in dim)
    seen: set = set()
    for d in dims:   # ATen's dim_list_to_bitset names the first wrapped dim seen twice
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return tuple(sorted(dims))
