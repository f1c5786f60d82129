"""Movement ops: reshape, expand, permute and friends. Forwards return views where numpy can."""
from __future__ import annotations

import math

from ..dispatch import apply
from .registry import NONE, Op
from ._util import _wrap_dim, sum_to

__all__ = ["reshape", "permute", "transpose", "expand"]


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def _infer(shape: tuple, numel: int, op: str, have) -> tuple:
    if shape.count(-1) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred, got shape {list(shape)}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel} "
                           f"(input shape {list(have)}, in {op})")
    return shape


_reshape = Op("reshape", lambda xp, x, *, shape: x.reshape(shape),
              lambda g, out, x, *, shape: (g.reshape(x.shape),), saves=NONE, is_view=True)
_permute = Op("permute", lambda xp, x, *, dims: x.transpose(dims),
              lambda g, out, x, *, dims: (g.permute(_inverse(dims)),), saves=NONE, is_view=True)
def _expand_fwd(xp, x, *, shape):
    # numpy's broadcast_to costs ~4 us; a filled copy of a single element is cheaper
    return xp.full(shape, x.reshape(()), x.dtype) if x.size == 1 else xp.broadcast_to(x, shape)


_expand = Op("expand", _expand_fwd,
             lambda g, out, x, *, shape: (sum_to(g, x._data.shape),), saves=NONE, is_view=True)


def _inverse(dims):
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return tuple(inv)


def reshape(input, *shape):
    shape = _infer(_shape_arg(shape), input.numel(), "reshape", input.shape)
    return apply(_reshape, input, shape=shape)


def view(input, *shape):
    shape = _infer(_shape_arg(shape), input.numel(), "view", input.shape)
    return apply(_reshape, input, shape=shape)


def permute(input, *dims):
    dims = _shape_arg(dims)
    if len(dims) != input.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match "
                           f"the length of the desired ordering of dimensions i.e. input.dim() = "
                           f"{input.ndim} is not equal to len(dims) = {len(dims)}")
    dims = tuple(_wrap_dim(d, input.ndim, "permute") for d in dims)
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(f"permute(): duplicate dims are not allowed (got {list(dims)})")
    return apply(_permute, input, dims=dims)


def transpose(input, dim0: int, dim1: int):
    n = input.ndim
    if n == 0:
        return input
    d0, d1 = _wrap_dim(dim0, n, "transpose"), _wrap_dim(dim1, n, "transpose")
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return apply(_permute, input, dims=tuple(dims))


def expand(input, *sizes):
    sizes = _shape_arg(sizes)
    have = input._data.shape
    if len(sizes) < len(have):
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({len(have)})")
    lead = len(sizes) - len(have)
    shape = []
    for i, s in enumerate(sizes):
        cur = have[i - lead] if i >= lead else 1
        if s == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            s = cur
        elif cur != 1 and cur != s:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size "
                               f"({cur}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(have)}")
        shape.append(s)
    shape = tuple(shape)
    if shape == have:
        return input
    return apply(_expand, input, shape=shape)


def unsqueeze(input, dim: int):
    d = _wrap_dim(dim, input.ndim + 1, "unsqueeze")
    shape = list(input.shape)
    shape.insert(d, 1)
    return apply(_reshape, input, shape=tuple(shape))


def squeeze(input, dim=None):
    shape = input._data.shape
    if dim is None:
        dims = {i for i, s in enumerate(shape) if s == 1}
    else:
        dims = {_wrap_dim(d, input.ndim, "squeeze") for d in ((dim,) if isinstance(dim, int) else dim)}
        dims = {d for d in dims if input.ndim and shape[d] == 1}
    if not dims:
        return apply(_reshape, input, shape=shape)
    return apply(_reshape, input, shape=tuple(s for i, s in enumerate(shape) if i not in dims))


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    if input.ndim == 0:
        return input.reshape(1)
    s, e = _wrap_dim(start_dim, input.ndim, "flatten"), _wrap_dim(end_dim, input.ndim, "flatten")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input._data.shape
    return apply(_reshape, input, shape=shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return input if input.ndim < 2 else transpose(input, 0, 1)


def _T(self):
    return self if self.ndim < 2 else apply(_permute, self, dims=tuple(reversed(range(self.ndim))))


def _mT(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self.ndim}-D tensor.")
    return transpose(self, -2, -1)


METHODS = ("reshape", "view", "permute", "transpose", "expand", "unsqueeze", "squeeze", "flatten", "t")
PROPERTIES = {"T": _T, "mT": _mT}
