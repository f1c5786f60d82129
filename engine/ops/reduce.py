"""Reductions over dimensions."""
from __future__ import annotations

from ..dispatch import apply
from .registry import NONE, Op
from ._util import Tensor, norm_dims

__all__ = ["sum", "mean"]


def _expand_back(g: Tensor, x: Tensor, dims, keepdim: bool) -> Tensor:
    """Broadcast a reduced gradient back over the reduced dims of ``x``."""
    if dims is None and not keepdim:
        return g.expand(x.shape)
    if not keepdim:
        shape = list(x.shape)
        for d in dims if dims is not None else range(x.ndim):
            shape[d] = 1
        g = g.reshape(shape)
    return g.expand(x.shape)


def _sum_fwd(xp, x, *, dims, keepdim, dtype):
    return x.sum(axis=dims, keepdims=keepdim, dtype=dtype)


_sum = Op("sum", _sum_fwd,
          lambda g, out, x, *, dims, keepdim, dtype: (_expand_back(g, x, dims, keepdim).to(x.dtype),),
          saves=NONE)


def _mean_fwd(xp, x, *, dims, keepdim, dtype):
    return x.mean(axis=dims, keepdims=keepdim, dtype=dtype)


def _mean_vjp(g, out, x, *, dims, keepdim, dtype):
    n = x.numel() // max(out.numel(), 1) if dims is None else _count(x.shape, dims)
    return ((_expand_back(g, x, dims, keepdim) / n).to(x.dtype),)


def _count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


_mean = Op("mean", _mean_fwd, _mean_vjp, saves=NONE, save_output=True)


def _int_acc(x, dtype):
    """PyTorch sums bool and integer tensors in int64 unless told otherwise."""
    if dtype is not None:
        return dtype.np
    return "int64" if x._data.dtype.kind in "biu" else None


def sum(input, dim=None, keepdim: bool = False, *, dtype=None):
    if dim is None and dtype is None and input._data.dtype.kind == "f":
        return apply(_sum, input, dims=None, keepdim=keepdim, dtype=None)
    dims = norm_dims(dim, input.ndim, "sum") if dim is not None and dim != () else None
    return apply(_sum, input, dims=dims, keepdim=keepdim, dtype=_int_acc(input, dtype))


def mean(input, dim=None, keepdim: bool = False, *, dtype=None):
    if input._data.dtype.kind != "f" and dtype is None:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {input.dtype.name.capitalize()}")
    dims = norm_dims(dim, input.ndim, "mean") if dim is not None and dim != () else None
    return apply(_mean, input, dims=dims, keepdim=keepdim, dtype=None if dtype is None else dtype.np)


METHODS = ("sum", "mean")
