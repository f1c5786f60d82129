"""Indexing: ``x[key]``, ``x[key] = v``, gather/scatter, masked ops, nonzero, one_hot.

``x[key]`` runs in two stages, as PyTorch does: ints, slices, None and Ellipsis make one
``slice`` view (movement.py), then tensor, list and bool-mask indices pick from that view
with the ``index`` primitive. Only ``index``'s backward scatter-adds (``add_at``: a compiled
loop, else ``xp.add.at``), and only when integer indices could repeat a position; bool masks
write with an assignment.
Writes (``__setitem__``, ``index_put_``, ``index_add_``, ``index_fill_``) are one
out-of-place ``index_put`` op applied in place, so gradients reach target and value.
"""
from __future__ import annotations

import warnings

import math
import numbers

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.batching import BatchedTensor
from ..core.overrides import handle_torch_function, has_tensor_like, has_torch_function
from .. import kernels
from ..base import backend as _backend, dtype as _dtype
from ..base.meta import has_data
from ..base.grad_mode import is_grad_enabled
from ..core.creation import full, tensor as _tensor, zeros
from ..core.dispatch import STATE, apply, watched
from ..autograd.views import apply_, nograd_view_error, overlap_error
from .movement import _ALL, _base_requires_grad, _mark, _slice, broadcast_shapes, expand
from ..core.registry import NONE, OTHERS, Op
from ._util import Tensor, _wrap_dim, along_key, sum_to
from ..base.dtype import FLOATING_KINDS

__all__ = ["index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_fill",
           "index_copy", "index_put", "masked_fill", "masked_select", "take", "take_along_dim", "nonzero",
           "argwhere"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_scatter(g, x, index, src, *, dim, reduce):
    src = g.op("Expand", g.scalar(src, x), g.op("Shape", index)) if not isinstance(src, str) else src
    mode = {None: "none", "add": "add", "multiply": "mul"}[reduce]
    return g.op("ScatterElements", x, index, src, axis=dim, reduction=mode)


def _onnx_index(g, x, *idx, template, unique):
    """``x[key]`` with index tensors: one integer index anywhere (Gather), leading integer indices of
    one shape (GatherND), or one bool mask over the leading dims (NonZero, then GatherND)."""
    at = [p for p, t in enumerate(template) if t is not None]
    ints = [i for i in idx if g.dtype(i) != bool]
    if len(idx) == 1 and ints:
        return g.op("Gather", x, idx[0], axis=at[0])
    if len(idx) == 1 and at == [0]:
        return g.op("GatherND", x, g.op("Transpose", g.op("NonZero", idx[0]), perm=[1, 0]))
    if len(ints) == len(idx) and at == list(range(len(idx))) and len({tuple(g.shape(i)) for i in idx}) == 1:
        stacked = g.op("Concat", *[g.op("Unsqueeze", i, g.const([-1], "int64")) for i in idx], axis=-1)
        return g.op("GatherND", x, stacked)
    raise NotImplementedError("this advanced-indexing pattern (several index tensors not leading, of different "
                              "shapes, or a bool mask past dim 0) has no ONNX lowering yet")


def _onnx_masked_fill(g, x, mask, value):
    value = g.cast(value, g.dtype(x)) if isinstance(value, str) else g.scalar(value, x)
    return g.op("Where", g.cast(mask, "bool"), value, x)


def _onnx_one_hot(g, x, *, n):
    return g.op("OneHot", x, g.const(n, "int64"), g.const([0, 1], g.dtype(x)), axis=-1)


def _key(idx, template) -> tuple:
    """The numpy key: ``template`` holds None (a full slice) or a position in ``idx``."""
    return tuple(_ALL if t is None else idx[t] for t in template)


# ---------------------------------------------------------------- scatter-add
# Below this many values ``np.add.at`` beats sorting for the row case without the loops (~9 us vs ~90 us).
_SORT_MIN = 1 << 12


def _loops_take(xp, out, values, *indices) -> bool:
    """Whether kernels/scatter.py's loops run: on, numpy, ``out`` a C-contiguous float32/float64
    array, ``values`` of its dtype, the indices signed integers."""
    return (kernels.enabled() and _backend.is_numpy(xp) and out.dtype.kind == "f" and out.dtype.itemsize >= 4
            and out.flags.c_contiguous and getattr(values, "dtype", None) == out.dtype
            and all(i.dtype.kind == "i" for i in indices))


def _one_index(key: tuple):
    """``(position, index)`` when ``key`` is full slices and one integer index array, else None."""
    arrays = [(p, k) for p, k in enumerate(key) if k is not _ALL]
    if len(arrays) != 1 or getattr(arrays[0][1], "dtype", None) is None or arrays[0][1].dtype.kind not in "iu":
        return None
    return arrays[0]


def add_at(xp, out, key: tuple, values) -> None:
    """``xp.add.at(out, key, values)``: ``out[key] += values`` with a repeated position adding once
    per occurrence. With one integer index among full slices (``x[idx]``'s backward, index_add_,
    embedding's backward) the loop ``scatter.rows`` adds in ufunc.at's order, so the same sums
    bit for bit, 10-40x faster; without the loops a large 2-d one is sorted and summed per rank."""
    one = _one_index(key)
    if one is not None:
        p, idx = one
        shape = out.shape
        a, m, b = math.prod(shape[:p]), shape[p], math.prod(shape[p + 1:])
        if getattr(values, "shape", None) == shape[:p] + idx.shape + shape[p + 1:]:
            flat = idx.reshape(-1)
            if _loops_take(xp, out, values, idx):
                if kernels.loops("scatter").rows(out.reshape(a, m, b), xp.ascontiguousarray(flat),
                                                 values.reshape(a, flat.size, b), 0):
                    return
                raise IndexError(_bad_index(flat, m, p))
            if _backend.is_numpy(xp) and p == 0 and out.ndim == 2 and values.size >= _SORT_MIN \
                    and _segment_sum(xp, out, flat, values.reshape(flat.size, b)):
                return
    xp.add.at(out, key, values)


def scatter_along(xp, out, index, dim: int, src, op: str) -> bool:
    """``xp.<op>.at(out, key, src)`` for gather's ``key`` along ``dim`` (``out[..., index[..., i, ...],
    ...] op= src[..., i, ...]``: scatter_add, scatter(reduce=), scatter_reduce, gather's backward)
    in the loops of kernels/scatter.py when ``index`` matches ``out`` off ``dim`` and they take the
    arrays: the same results as ufunc.at, bit for bit. ``op``: "add", "multiply", "maximum",
    "minimum" or "assign". False (nothing done) when the loops do not apply."""
    shape = out.shape
    if not out.ndim or index.ndim != out.ndim or index.shape != src.shape or not _loops_take(xp, out, src, index):
        return False
    if any(index.shape[k] != shape[k] for k in range(out.ndim) if k != dim):
        return False
    a, b = math.prod(shape[:dim]), math.prod(shape[dim + 1:])
    n = index.shape[dim]
    out3, idx3, src3 = out.reshape(a, shape[dim], b), index.reshape(a, n, b), src.reshape(a, n, b)
    loops = kernels.loops("scatter")
    if a == 1 and b > 1 and idx3.strides[2] == 0:    # an index expanded along the rows (torch_scatter's)
        done = loops.rows(out3, xp.ascontiguousarray(idx3[0, :, 0]), src3, loops.OPS[op])
    else:
        done = loops.along(out3, idx3, src3, loops.OPS[op])
    if not done:
        raise IndexError(_bad_index(index.reshape(-1), shape[dim], dim))
    return True


def _bad_index(flat, m: int, dim: int) -> str:
    bad = flat[(flat < -m) | (flat >= m)]
    return f"index {int(bad[0])} is out of bounds for axis {dim} with size {m}"


def _segment_sum(xp, res, flat, g2) -> bool:
    """``res[flat[i]] += g2[i]`` in index order, as ``add.at`` (bit-identical) but ~6x faster on
    the GPT step's embedding, for numpy without the loops: rows sorted stably by index go to a
    (rank, id, d) buffer after the rows' old values (zeros past a segment's end, and ``x + 0`` is
    exact), summed one rank at a time, so each row adds in add.at's order. False (nothing done)
    when the buffer would be over 4x the gradient (a few very frequent ids) or an index is negative."""
    order = xp.argsort(flat, kind="stable")
    s = flat[order]
    if s[0] < 0:
        return False
    new = xp.empty(s.shape, bool)
    new[0] = True
    xp.not_equal(s[1:], s[:-1], out=new[1:])
    starts = xp.flatnonzero(new)
    seg = xp.cumsum(new) - 1
    rank = xp.arange(s.size) - starts[seg]
    k = int(rank.max()) + 1
    if starts.size * k > 4 * s.size:
        return False
    ids = s[starts]
    buf = xp.zeros((k + 1, starts.size, g2.shape[1]), g2.dtype)
    buf[0] = res[ids]                        # what was there first, then the rows in index order
    buf[rank + 1, seg] = g2[order]
    acc = buf[0]
    for r in range(1, k + 1):
        acc += buf[r]
    res[ids] = acc
    return True


# ---------------------------------------------------------------- the primitives
def _index_backward_fwd(xp, g, *idx, shape, template, unique):
    out = xp.zeros(shape, g.dtype)
    if unique:
        out[_key(idx, template)] = g
    else:
        add_at(xp, out, _key(idx, template), g)
    return out


def _index_fwd(xp, x, *idx, template, unique):
    """``x[key]`` laid out row-major, as PyTorch's index returns it: numpy lays ``x[:, perm]`` out
    column-first, which reads as non-contiguous (torch_geometric's EdgeIndex refuses such an edge_index)."""
    out = x[_key(idx, template)]
    return out if out.ndim < 2 else xp.ascontiguousarray(out)   # (ascontiguousarray makes a 0-d array 1-d)


_index = Op("index", _index_fwd,
            lambda g, out, x, *idx, template, unique: (
                apply(_index_backward, g, *idx, shape=x._data.shape, template=template, unique=unique),
                *(None,) * len(idx)),
            # the vjp reads the index tensors' values (not x's): their versions are checked in
            # backward, as PyTorch's IndexBackward0 checks its saved indices
            saves=OTHERS, complex=True, aliases=("index_select", "take", "masked_select"), onnx=_onnx_index)
_index_backward = Op("index_backward", _index_backward_fwd,
                     lambda g, out, gin, *idx, shape, template, unique: (
                         apply(_index, g, *idx, template=template, unique=unique), *(None,) * len(idx)),
                     saves=OTHERS, complex=True)


def _put(xp, data, v, idx, basic, template, accumulate: bool) -> None:
    """Write (or add) ``v`` into ``data[basic][key]``: shared by the op and the no-grad fast path."""
    if basic is not None:
        data = data[basic]
    key = Ellipsis if template is None else _key(idx, template)
    try:
        if accumulate and template is not None:
            add_at(xp, data, key, v)
        else:
            data[key] = v
    except ValueError as e:
        if "broadcast" not in str(e) and "cannot assign" not in str(e):    # a read-only array's error stays
            raise
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(np.shape(v))} cannot be broadcast to "
                           f"indexing result of shape {list(data[key].shape)}") from None


def _index_put_fwd(xp, x, v, *idx, basic, template, accumulate):
    out = x.copy()
    _put(xp, out, v, idx, basic, template, accumulate)
    return out


def _index_put_vjp(g, out, x, v, *idx, basic, template, accumulate):
    gx = gv = None
    if x.requires_grad:
        gx = g if accumulate else apply(_index_put, g, 0, *idx, basic=basic, template=template,
                                        accumulate=False)
    if isinstance(v, Tensor) and v.requires_grad:
        if not has_data(g._device.xp):      # meta: a mask's selection has no known size, v's shape is known
            return gx, zeros(v._data.shape, dtype=v.dtype, device=g.device), *(None,) * len(idx)
        gv = _read(g, idx, basic, template)
        if gv.ndim < v.ndim:
            gv = gv.reshape((1,) * (v.ndim - gv.ndim) + gv._data.shape)
        gv = sum_to(gv, v._data.shape)
        if gv._data.dtype != v._data.dtype:
            gv = gv.to(v.dtype)
    return (gx, gv, *(None,) * len(idx))


_index_put = Op("index_put", _index_put_fwd, _index_put_vjp, saves=NONE,
                aliases=("index_add", "index_copy", "index_fill"), aten="index_put_")


def _read(x: Tensor, idx, basic, template) -> Tensor:
    """``x[key]`` for an already parsed key."""
    if basic is not None:
        x = apply(_slice, x, key=basic)
    if template is None:
        return x
    return apply(_index, x, *idx, template=template, unique=all(i._data.dtype.kind == "b" for i in idx))


# ---------------------------------------------------------------- parsing keys
def _as_tuple(key) -> tuple:
    """PyTorch still reads a short list holding sequences, tensors, slices or None as a tuple, and
    warns each time (pytorch-metric-learning's HistogramLoss indexes ``mat[[anchors, positives]]``)."""
    if type(key) is list and len(key) < 32 and any(
            isinstance(k, (Tensor, list, tuple, slice)) or k is None or k is Ellipsis for k in key):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed "
                      "in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted "
                      "as tensor index, x[torch.tensor(seq)], which will result either in an error or a different "
                      "result", UserWarning, stacklevel=4)   # the caller of x[seq] (_parse, then __getitem__)
        return tuple(key)
    return (key,)


def _index_tensor(k, x: Tensor):
    """An index item as an int (0-d integer tensors select, like ints), a bool, or an index Tensor."""
    if not isinstance(k, Tensor):
        if isinstance(k, bool):
            return k
        if isinstance(k, numbers.Integral):
            return int(k)
        k = _tensor(k, dtype=_dtype.int64 if isinstance(k, (list, tuple)) and not k else None,
                    device=x._device)
    kind = k._data.dtype.kind
    if kind not in "biu":
        raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors (got {k.dtype} "
                         f"index for a tensor of shape {list(x.shape)})")
    if k._data.ndim == 0 and k.__class__ is not BatchedTensor:   # inside vmap a 0-d index differs per slice
        return bool(k.item()) if kind == "b" else int(k.item())
    if k._data.dtype == _dtype.uint8.np:
        k = k.to(_dtype.bool)
    return k if k._device is x._device else k.to(x._device)


def _parse(x: Tensor, key):
    """Split ``key`` into (basic view key or None, index tensors, template or None)."""
    if type(key) is not tuple:
        key = _as_tuple(key)
    for k in key:
        tk = type(k)
        if tk is slice:
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
        elif tk is not int and k is not None and k is not Ellipsis:
            return _parse_advanced(x, key)
    return (key if Ellipsis in key else key + (Ellipsis,)), (), None


def _parse_advanced(x: Tensor, key):
    items, consumed = [], 0
    for k in key:
        if type(k) is not slice and k is not None and k is not Ellipsis:
            k = _index_tensor(k, x)
        items.append(k)
        if type(k) is int or type(k) is slice:
            consumed += 1
        elif isinstance(k, Tensor):
            consumed += k._data.ndim if k._data.dtype.kind == "b" else 1
    if consumed > x._data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x._data.ndim}")
    _check_masks(x._data.shape, items, consumed)
    basic, idx, template = [], [], []
    pos = 0          # dimension of the stage-1 view that the next item lands on
    covered = 0      # dimensions of that view the template covers so far
    sliced = False   # whether stage 1 changes anything
    for k in items:
        if k is Ellipsis:
            basic.append(k)
            pos += x._data.ndim - consumed
        elif k is None:
            basic.append(None)
            pos += 1
            sliced = True
        elif type(k) is int:
            basic.append(k)
            sliced = True
        elif type(k) is slice:
            basic.append(k)
            pos += 1
            sliced = sliced or k != _ALL
        else:
            if type(k) is bool:  # numpy's rule: a new dim of size 1 (True) or 0 (False)
                basic.append(None)
                sliced = True
                k = _tensor([0] if k else [], dtype=_dtype.int64, device=x._device)
                span = 1
            else:
                span = k._data.ndim if k._data.dtype.kind == "b" else 1
                basic.extend((_ALL,) * span)
            template.extend((None,) * (pos - covered))
            template.append(len(idx))
            idx.append(k)
            pos += span
            covered = pos
    if not sliced:
        basic = None
    elif not any(k is Ellipsis for k in basic):
        basic.append(Ellipsis)
    return (tuple(basic) if basic is not None else None), tuple(idx), tuple(template)


def _check_masks(shape: tuple, items: list, consumed: int) -> None:
    """PyTorch's error for a boolean mask whose shape is not that of the dimensions it indexes."""
    d = 0
    for k in items:
        if k is Ellipsis:
            d += len(shape) - consumed
        elif type(k) is int or type(k) is slice:
            d += 1
        elif isinstance(k, Tensor):
            m = k._data.shape
            if k._data.dtype.kind == "b":
                for j, n in enumerate(m):
                    if n != shape[d + j]:
                        raise IndexError(f"The shape of the mask {list(m)} at index {j} does not match the shape "
                                         f"of the indexed tensor {list(shape)} at index {d + j}")
                d += len(m)
            else:
                d += 1


# ---------------------------------------------------------------- __getitem__ / __setitem__
def _getitem(self: Tensor, key) -> Tensor:
    try:
        if type(key) is int:
            return _mark(apply(_slice, self, key=(key, Ellipsis)), self)
        basic, idx, template = _parse(self, key)
        out = self if basic is None else _mark(apply(_slice, self, key=basic), self)
    except IndexError:
        _out_of_bounds(self.shape, key)
        raise
    if template is None:
        return out
    return apply(_index, out, *idx, template=template, unique=all(i._data.dtype.kind == "b" for i in idx))


def _setitem(self: Tensor, key, value) -> None:
    basic, idx, template = _parse(self, key)
    try:
        _write(self, value, idx, basic, template, False)
    except IndexError:
        _out_of_bounds(self.shape, key)
        raise


def _out_of_bounds(shape, key) -> None:
    """Raise PyTorch's message for a basic key that does not fit ``shape`` (the array library's
    names an axis, and the dispatcher's adds the op's internals). As ATen: a bare int or slice on a
    0-d tensor has its own words (PyTorch-GAN's BEGAN indexes a 0-d loss with ``.data[0]``), a
    longer key is "too many indices", then the first integer out of its dimension's range."""
    if not shape and type(key) is int:
        if key == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number") from None
        raise IndexError(f"index {key} is out of bounds for dimension 0 with size 0") from None
    if not shape and type(key) is slice:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.") from None
    key = key if type(key) is tuple else (key,)
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if type(k) is int or type(k) is slice) > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}") from None
    d = 0
    for k in key:
        if k is Ellipsis:
            d += len(shape) - consumed
        elif k is not None:
            if isinstance(k, int) and not isinstance(k, bool) and d < len(shape) and not -shape[d] <= k < shape[d]:
                raise IndexError(f"index {k} is out of bounds for dimension {d} with size {shape[d]}") from None
            d += 1


def _last_view(basic) -> str | None:
    """The view op PyTorch applies last for a basic key (``Select`` for ``t[0]``), None for none."""
    last = None
    for k in basic or ():
        if k is None:
            last = "Unsqueeze"
        elif type(k) is slice:
            if k != slice(None):
                last = "Slice"
        elif k is not Ellipsis:
            last = "Select"
    return last


def _write(self: Tensor, value, idx, basic, template, accumulate: bool) -> Tensor:
    if isinstance(value, Tensor):
        if value._device is not self._device:
            value = value.to(self._device)
        vreq = value.requires_grad
    else:
        if not isinstance(value, (int, float)):
            value = _tensor(value, dtype=self.dtype, device=self._device)
        vreq = False
    if STATE.slow or (is_grad_enabled() and (self.requires_grad or vreq or _base_requires_grad(self))):
        if self._view_nograd and is_grad_enabled() and (self.requires_grad or vreq):
            raise nograd_view_error(self, _last_view(basic))
        if basic is not None and self.requires_grad and self.grad_fn is None and is_grad_enabled():
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        if basic is not None and not idx and not accumulate and type(self._data) is np.ndarray and (
                not STATE.slow or not (watched() or has_torch_function((self, value)))):
            # PyTorch writes a basic key through the view: t[0] = v is t.select(0, 0).copy_(v), a number
            # fill_, so the base's grad_fn is CopySlices (over CopyBackwards, FillBackward0); also while a
            # live subclass elsewhere keeps the functions hook on, as long as none takes part in this write
            view = _getitem(self, basic)
            if isinstance(value, Tensor):
                while value.ndim > view.ndim and value.shape[0] == 1:   # leading ones dropped, as PyTorch's setitem
                    value = value.squeeze(0)
                view.copy_(value)
            else:
                view.fill_(value)
            return self
        return apply_(_index_put, self, value, *idx, basic=basic, template=template, accumulate=accumulate)
    v = value._data if isinstance(value, Tensor) else value
    try:
        _put(self._device.xp, self._data, v, tuple(i._data for i in idx), basic, template, accumulate)
    except ValueError:
        if not getattr(self._data.flags, "writeable", True):
            raise overlap_error() from None
        raise
    self._vc[0] += 1
    return self


def _dim_template(d: int) -> tuple:
    return (None,) * d + (0,)


def _check_same_dtype(self: Tensor, src, op: str) -> None:
    if isinstance(src, Tensor) and src._data.dtype != self._data.dtype:
        raise RuntimeError(f"{op}: self ({self.dtype.name}) and source ({src.dtype.name}) must have the "
                           f"same scalar type")


def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, indices, values)):
        return handle_torch_function(index_put, (input, indices, values), input, indices, values,
                                     accumulate=accumulate)
    basic, idx, template = _index_put_args(input, indices, values)
    return apply(_index_put, input, values, *idx, basic=basic, template=template, accumulate=accumulate)


def index_put_(self: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    basic, idx, template = _index_put_args(self, indices, values)
    return _write(self, values, idx, basic, template, accumulate)


def _index_put_args(self, indices, values):
    if isinstance(values, Tensor) and values._data.dtype != self._data.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{self.dtype.scalar_type} for the destination and {values.dtype.scalar_type} for the "
                           f"source.")
    return _parse(self, tuple(indices))


# ---------------------------------------------------------------- along-a-dim ops
def _check_index(index: Tensor, op: str, kinds: str = "i") -> None:
    if not isinstance(index, Tensor) or index._data.dtype.kind not in kinds or index._data.dtype.itemsize < 4:
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index (got {got})")


def _vector_index(index: Tensor, op: str) -> Tensor:
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector (got shape {list(index.shape)})")
    return index.reshape(1) if index.ndim == 0 else index


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    _check_index(index, "index_select")
    index = _vector_index(index, "index_select")
    d = _wrap_dim(dim, input.ndim, "index_select")
    if input.ndim == 0:                  # PyTorch: a scalar takes one index, and stays a scalar
        if index._data.size != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                               f"{index._data.size} value(s)")
        return index_select(input.reshape(1), 0, index).reshape(())
    _index_select_bounds(input, d, index)
    try:
        return apply(_index, input, index, template=_dim_template(d), unique=False)
    except IndexError:
        raise IndexError("index out of range in self") from None


def _index_select_bounds(input: Tensor, d: int, index: Tensor) -> None:
    """PyTorch's refusal of an index outside ``[0, size)``: no negative index wraps (numpy's would,
    silently); along dim 1 of a tensor of two or more dims its gather kernel's RuntimeError naming
    the first such index, elsewhere ``IndexError``, in PyTorch 2.13's words."""
    idx = index._data
    if not idx.size or isinstance(index, BatchedTensor) or isinstance(input, BatchedTensor) or not has_data(index._device.xp):
        return
    size = input._data.shape[d] if input._data.ndim else 1
    values = idx.ravel().tolist() if idx.size <= 64 and type(idx) is np.ndarray else None   # a beam's few: Python's min/max
    lo, hi = (min(values), max(values)) if values is not None else (int(idx.min()), int(idx.max()))
    if lo >= 0 and hi < size:
        return
    if d == 1 and input._data.ndim > 1:
        bad = (idx < 0) | (idx >= size)
        raise RuntimeError(f"INDICES element is out of DATA bounds, id={int(idx[int(bad.argmax())])} axis_dim={size}")
    raise IndexError("index out of range in self")


def _index_along(self, dim, index, source, op):
    _check_index(index, op)
    index = _vector_index(index, op)
    d = _wrap_dim(dim, self.ndim, op)
    if isinstance(source, Tensor) and source.ndim and source._data.shape[d] != index._data.shape[0]:
        raise RuntimeError(f"{op}(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim): ({source._data.shape[d]}), for dim: {d}")
    return d, index


def _index_add_out_of_range(self: Tensor, d: int, index: Tensor, op: str) -> RuntimeError:
    """PyTorch's index_add reports a bad index as a RuntimeError (index_copy/index_select: IndexError)."""
    n = self.shape[d]
    bad = next(i for i in index.tolist() if not -n <= i < n)
    return RuntimeError(f"{op}(): index {bad} is out of bounds for dimension {d} with size {n} "
                        f"(self {list(self.shape)}, index {list(index.shape)})")


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    _check_same_dtype(input, source, "index_add_()")
    d, index = _index_along(input, dim, index, source, "index_add_")
    try:
        return apply(_index_put, input, source if alpha == 1 else source * alpha, index, basic=None,
                     template=_dim_template(d), accumulate=True)
    except IndexError:
        raise _index_add_out_of_range(input, d, index, "index_add") from None


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    _check_same_dtype(self, source, "index_add_()")
    d, index = _index_along(self, dim, index, source, "index_add_")
    try:
        return _write(self, source if alpha == 1 else source * alpha, (index,), None, _dim_template(d), True)
    except IndexError:
        raise _index_add_out_of_range(self, d, index, "index_add_") from None


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    _check_same_dtype(input, source, "index_copy_()")
    d, index = _index_along(input, dim, index, source, "index_copy_")
    return apply(_index_put, input, source, index, basic=None, template=_dim_template(d), accumulate=False)


def index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    _check_same_dtype(self, source, "index_copy_()")
    d, index = _index_along(self, dim, index, source, "index_copy_")
    return _write(self, source, (index,), None, _dim_template(d), False)


def _fill_args(self, dim, index, value):
    if not isinstance(index, Tensor) or index._data.dtype != _dtype.int64.np:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    return _wrap_dim(dim, self.ndim, "index_fill_"), _vector_index(index, "index_fill_")


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, index, value)):
        return handle_torch_function(index_fill, (input, index, value), input, dim, index, value)
    d, index = _fill_args(input, dim, index, value)
    return apply(_index_put, input, value, index, basic=None, template=_dim_template(d), accumulate=False)


def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    d, index = _fill_args(self, dim, index, value)
    return _write(self, value, (index,), None, _dim_template(d), False)


# ---------------------------------------------------------------- gather / scatter
def _fit(src, shape):
    return src if src.shape == shape else src[tuple(slice(0, n) for n in shape)]


def _gather_fwd(xp, x, index, *, dim):
    try:
        return x[along_key(xp, index, dim)]
    except IndexError as e:
        raise RuntimeError(f"gather(): {e}") from None


def _scatter_fwd(xp, x, index, src, *, dim, reduce):
    out = x.copy()
    key = along_key(xp, index, dim)
    if not isinstance(src, (int, float)):
        src = _fit(src, index.shape)
    try:
        if reduce is None:
            out[key] = src
        else:
            op = "add" if reduce == "add" else "multiply"
            if isinstance(src, (int, float)) or not scatter_along(xp, out, index, dim, src, op):
                _backend.ufunc_at(xp, op, out, key, src)
    except IndexError as e:
        raise RuntimeError(f"scatter(): {e}") from None
    return out


def _scatter_vjp(g, out, x, index, src, *, dim, reduce):
    if reduce == "multiply":
        raise RuntimeError("scatter(reduce='multiply') is not differentiable; use scatter_reduce")
    gx = g if reduce == "add" else apply(_scatter, g, index, 0, dim=dim, reduce=None)
    gs = apply(_gather, g, index, dim=dim) if isinstance(src, Tensor) and src.requires_grad else None
    return gx, None, gs


_gather = Op("gather", _gather_fwd,
             lambda g, out, x, index, *, dim: (
                 apply(_scatter, zeros(x._data.shape, dtype=g.dtype, device=g.device), index, g, dim=dim,
                       reduce="add"), None),
             saves=NONE, aliases=("take_along_dim",),
             onnx=lambda g, x, index, *, dim: g.op("GatherElements", x, index, axis=dim))
_scatter = Op("scatter", _scatter_fwd, _scatter_vjp, saves=NONE, aliases=("scatter_add",), onnx=_onnx_scatter)


def _check_along(self: Tensor, dim: int, index: Tensor, op: str, src=None) -> int:
    _check_index(index, op)
    ishape, sshape = index._data.shape, self._data.shape   # the arrays' shapes: no Size per call
    if len(ishape) != len(sshape) and index._data.size and sshape:
        raise RuntimeError(f"Index tensor must have the same number of dimensions as input tensor "
                           f"({op}: index {list(index.shape)}, self {list(self.shape)})")
    d = _wrap_dim(dim, len(sshape), op)
    for k in range(len(ishape)):
        if k != d and ishape[k] > sshape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(ishape)} to be no "
                               f"larger than self {list(sshape)} apart from dimension {d}")
    if isinstance(src, Tensor):
        if src._data.dtype != self._data.dtype:
            raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype (got {self.dtype.name} "
                               f"and {src.dtype.name})")
        if any(i > s for i, s in zip(ishape, src._data.shape)):
            raise RuntimeError(f"Size does not match: expected index {list(ishape)} to be no larger than "
                               f"src {list(src.shape)} ({op})")
    return d


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    d = _check_along(input, dim, index, "gather")
    if not input._data.ndim:
        return apply(_gather, input.reshape(1), index.reshape(1), dim=0).reshape(index.shape)
    return apply(_gather, input, index, dim=d)


def _scatter_args(self, dim, index, src, value, reduce, op):
    if src is None:
        src = value
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"{op}(): reduce argument must be either add or multiply, got {reduce!r}")
    return _check_along(self, dim, index, op, src), src


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:
    d, src = _scatter_args(input, dim, index, src, value, reduce, "scatter")
    return apply(_scatter, input, index, src, dim=d, reduce=reduce)


def scatter_(self: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:
    d, src = _scatter_args(self, dim, index, src, value, reduce, "scatter")
    return apply_(_scatter, self, index, src, dim=d, reduce=reduce)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    d = _check_along(input, dim, index, "scatter_add", src)
    return apply(_scatter, input, index, src, dim=d, reduce="add")


def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    d = _check_along(self, dim, index, "scatter_add", src)
    return apply_(_scatter, self, index, src, dim=d, reduce="add")


_REDUCE_UFUNC = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum",
                 "max": "maximum", "min": "minimum"}


def _reduce_identity(xp, reduce: str, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    info = xp.finfo(dtype) if dtype.kind in FLOATING_KINDS else xp.iinfo(dtype)
    return (-xp.inf if dtype.kind in FLOATING_KINDS else info.min) if reduce in ("amax", "max") else (
        xp.inf if dtype.kind in FLOATING_KINDS else info.max)


def _scatter_reduce_fwd(xp, x, index, src, *, dim, reduce, include_self):
    out = x.copy()
    key = along_key(xp, index, dim)
    src = _fit(src, index.shape)
    if not include_self:
        identity = _reduce_identity(xp, reduce, x.dtype)
        if not scatter_along(xp, out, index, dim, xp.broadcast_to(xp.asarray(identity, x.dtype), index.shape), "assign"):
            out[key] = identity
    if not scatter_along(xp, out, index, dim, src, _REDUCE_UFUNC[reduce]):
        _backend.ufunc_at(xp, _REDUCE_UFUNC[reduce], out, key, src)
    if reduce == "mean":
        count = xp.full(x.shape, int(include_self), x.dtype)
        if not scatter_along(xp, count, index, dim, xp.broadcast_to(xp.ones((), x.dtype), index.shape), "add"):
            xp.add.at(count, key, 1)
        out = out / xp.maximum(count, 1) if x.dtype.kind in FLOATING_KINDS else out // xp.maximum(count, 1)
    return out.astype(x.dtype, copy=False)


def _scatter_reduce_vjp(g, out, x, index, src, *, dim, reduce, include_self):
    """PyTorch's gradients (FunctionsManual's scatter_reduce_backward): sum and mean share ``g`` among
    contributors; amax/amin among the inputs equal to the result, counting ``input`` even when
    ``include_self=False`` (PyTorch's count, so a tie with the unused input halves the share); prod
    divides the result by each factor, with a lone zero factor given the product of the others."""
    if reduce in ("min", "max"):
        # ATen's forward takes these spellings, its backward only amax/amin
        raise RuntimeError(f"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', 'amin' but got {reduce}.")
    if reduce == "prod":
        return _scatter_prod_vjp(g, out, x, index, src, dim=dim, include_self=include_self)
    keep = full(x._data.shape, 1.0, dtype=g.dtype, device=g.device)
    if not include_self:
        keep = apply(_scatter, keep, index, 0, dim=dim, reduce=None)
    if reduce in ("sum", "mean"):
        hit_x, hit_src = keep, full(index._data.shape, 1.0, dtype=g.dtype, device=g.device)
    else:
        hit_x = (x == out).to(g.dtype)
        hit_src = (src == apply(_gather, out, index, dim=dim)).to(g.dtype)
    if reduce != "sum":
        g = g / apply(_scatter, hit_x, index, hit_src, dim=dim, reduce="add").clamp_min(1)
    return g * hit_x * keep, None, apply(_gather, g, index, dim=dim) * hit_src


def _scatter_prod_vjp(g, out, x, index, src, *, dim, include_self):
    """``out / factor`` for each factor; where that is 0/0 the product is taken again without it: an
    ``input`` of zero is replaced by one, and a ``src`` that is the only zero at its place by one."""
    def prod(base, values):
        return apply(_scatter_reduce, base, index, values, dim=dim, reduce="prod", include_self=include_self)
    x_one = x.masked_fill(x == 0, 1)
    gx = g * prod(x_one, src) / x_one
    if not include_self:
        gx = apply(_scatter, gx, index, 0, dim=dim, reduce=None)
    src_zero = src == 0
    zeros_there = apply(_scatter, zeros(x._data.shape, dtype=src.dtype, device=src.device), index,
                        src_zero.to(src.dtype), dim=dim, reduce="add")
    lone_zero = src_zero & (apply(_gather, zeros_there, index, dim=dim) == 1)
    without = apply(_gather, g * prod(x, src.masked_fill(lone_zero, 1)), index, dim=dim)
    through = apply(_gather, g * out, index, dim=dim) / src.masked_fill(src_zero, 1)
    return gx, None, without.where(lone_zero, through)


_scatter_reduce = Op("scatter_reduce", _scatter_reduce_fwd, _scatter_reduce_vjp, save_output=True)


def _scatter_reduction(reduce: str) -> str:
    """scatter_reduce's reduction name: ATen's forward also takes "min" and "max" (undocumented;
    Keras's unique uses "min"), its backward refuses them."""
    if reduce not in _REDUCE_UFUNC:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    return reduce


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    reduce = _scatter_reduction(reduce)
    d = _check_along(input, dim, index, "scatter_reduce", src)
    return apply(_scatter_reduce, input, index, src, dim=d, reduce=reduce, include_self=include_self)


def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    reduce = _scatter_reduction(reduce)
    d = _check_along(self, dim, index, "scatter_reduce", src)
    return apply_(_scatter_reduce, self, index, src, dim=d, reduce=reduce, include_self=include_self)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    dim = dim if axis is None else axis
    if indices._data.dtype != _dtype.int64.np:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{indices.dtype.name.capitalize()}")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of "
                           f"dimensions, but got {input.ndim} dimensions for input, and {indices.ndim} "
                           f"dimensions for indices")
    d = _wrap_dim(dim, input.ndim, "take_along_dim")
    shape = list(broadcast_shapes(input._data.shape[:d] + (1,) + input._data.shape[d + 1:],
                                  indices._data.shape[:d] + (1,) + indices._data.shape[d + 1:]))
    shape[d] = input._data.shape[d]
    input = expand(input, shape)
    shape[d] = indices._data.shape[d]
    return gather(input, d, expand(indices, shape))


def take(input: Tensor, index: Tensor) -> Tensor:
    if index._data.dtype != _dtype.int64.np:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {index.dtype.name.capitalize()}")
    flat = input.reshape(-1)
    try:
        return apply(_index, flat, index, template=(0,), unique=False)
    except IndexError:
        data = index._data
        bad = data[(data >= flat.shape[0]) | (data < -flat.shape[0])]
        raise IndexError(f"take(): out of range: tried to access index {int(bad.reshape(-1)[0]) if bad.size else '?'} "
                         f"on a tensor of {flat.shape[0]} elements.") from None


# ---------------------------------------------------------------- masks
def _masked_fill_fwd(xp, x, mask, value):
    out = xp.where(mask, value, x)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def _masked_fill_vjp(g, out, x, mask, value):
    gx = sum_to(apply(_masked_fill, g, mask, 0), x._data.shape) if x.requires_grad else None
    gv = None
    if isinstance(value, Tensor) and value.requires_grad:
        gv = apply(_masked_fill, g, ~mask, 0).sum()
        gv = gv if gv._data.dtype == value._data.dtype else gv.to(value.dtype)
    return gx, None, gv


_masked_fill = Op("masked_fill", _masked_fill_fwd, _masked_fill_vjp, saves=NONE, onnx=_onnx_masked_fill)


def _check_mask(mask, op: str) -> None:
    if not isinstance(mask, Tensor) or mask._data.dtype.kind != "b":
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"{op} only supports boolean masks, but got mask with dtype {got}")


def _fill_value(value, op: str):
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"{op} only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    return value


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, mask, value)):
        return handle_torch_function(masked_fill, (input, mask, value), input, mask, value)
    _check_mask(mask, "masked_fill_")
    return apply(_masked_fill, input, mask, _fill_value(value, "masked_fill_"))


def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor:
    _check_mask(mask, "masked_fill_")
    return apply_(_masked_fill, self, mask, _fill_value(value, "masked_fill_"))


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    if not isinstance(mask, Tensor) or mask._data.dtype.kind != "b":
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    if mask.__class__ is BatchedTensor:
        raise RuntimeError("vmap: Attempted to vmap over `mask` in torch.masked_select(self, mask) We cannot support "
                           "this because for each batch this would return a differently shaped Tensor. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues if you need this feature.")
    if mask._data.shape != input._data.shape:
        shape = broadcast_shapes(input._data.shape, mask._data.shape)
        input, mask = expand(input, shape), expand(mask, shape)
    return apply(_index, input, mask, template=(0,), unique=True)


# ---------------------------------------------------------------- nonzero, one_hot
_nonzero = Op("nonzero", lambda xp, x: xp.argwhere(x), None, saves=NONE, aliases=("argwhere",),
              data_dependent="nonzero()/argwhere()",
              onnx=lambda g, x: g.op("Transpose", g.op("NonZero", x), perm=[1, 0]))
_one_hot = Op("one_hot", lambda xp, x, *, n: (x[..., None] == xp.arange(n)).astype(x.dtype), None, saves=NONE,
              onnx=_onnx_one_hot)


def nonzero(input: Tensor, *, as_tuple: bool = False):
    if not as_tuple:
        return apply(_nonzero, input)
    nz = apply(_nonzero, input.reshape(1) if input.ndim == 0 else input)
    return tuple(apply(_slice, nz, key=(_ALL, i, Ellipsis)) for i in range(nz._data.shape[1]))


def argwhere(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(argwhere, (input,), input)
    return apply(_nonzero, input)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """``nn.functional.one_hot``: int64 class indices to an int64 one-hot encoding."""
    if _DISPATCH.functions is not None and has_tensor_like((tensor,)):
        return handle_torch_function(one_hot, (tensor,), tensor, num_classes=num_classes)
    if tensor._data.dtype != _dtype.int64.np:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    data = tensor._data
    if num_classes == -1:
        if not data.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max()) + 1      # meta: item()'s error, as PyTorch
    if not has_data(tensor._device.xp):
        return apply(_one_hot, tensor, n=num_classes)
    if data.size and int(data.min()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if data.size and int(data.max()) >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return apply(_one_hot, tensor, n=num_classes)


METHODS = ("index_select", "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
           "scatter_reduce_", "index_add",
           "index_add_", "index_fill", "index_fill_", "index_copy", "index_copy_", "index_put", "index_put_",
           "masked_fill", "masked_fill_", "masked_select", "take", "take_along_dim", "nonzero", "argwhere")
OPERATORS = {"__getitem__": _getitem, "__setitem__": _setitem}
