"""Movement ops: reshape, permute, slicing, joining, splitting, flipping, padding.

Forwards return numpy views where PyTorch returns views (declared ``is_view``, so they share
the input's version counter). Every slice-shaped view (``narrow``, ``select``, ``split``,
``chunk``, ``unbind``, basic ``x[...]``) is the one ``slice`` primitive, whose backward is a
zero tensor with the gradient written into the slice (never a scatter-add).
"""
from __future__ import annotations

import math
from operator import index as _index

import numpy as np

from .. import kernels
from ..base.dispatch_state import STATE as _DISPATCH
from ..core.batching import BatchedTensor, rebind
from ..core.overrides import handle_torch_function, has_tensor_like
from ..autograd.views import _as_strided, _as_strided_scatter, _view_grad_fn, apply_, overlap_error, strided_geometry
from ..base.dispatch_state import STATE
from ..base.grad_mode import STATE as GRAD, is_grad_enabled
from ..base.pytype import tp_name
from ..core.creation import zeros
from ..core.arguments import refuse_non_tensors
from ..core.dispatch import apply
from ..core.node import Node, _seq
from ..core.random import memory_order
from ..base.layout import preserve_format
from ..core.registry import NONE, Op
from ._util import channels_last_order, dim_or_axis
from ..base.dtype import dtype as _dtype_cls
from ..core.tensor import _VIEW_ATTRS, Size, Tensor, _wrap_dim, sum_to

__all__ = ["reshape", "permute", "transpose", "swapaxes", "swapdims", "movedim", "moveaxis", "t",
           "squeeze", "unsqueeze", "flatten", "unflatten", "broadcast_to", "broadcast_tensors",
           "broadcast_shapes", "tile", "cat", "concat", "concatenate", "stack", "hstack", "vstack",
           "dstack", "column_stack", "atleast_1d", "atleast_2d", "atleast_3d", "split", "chunk",
           "unbind", "tensor_split", "flip", "fliplr", "flipud", "roll", "narrow", "select",
           "clone", "tril", "triu", "constant_pad_nd", "as_strided", "as_strided_scatter"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_roll(g, x, *, shifts, dims):
    """Each shift as two Slices swapped by a Concat (the size along a rolled dim is baked in)."""
    shape = g.shape(x)
    for s, d in zip(shifts, dims):
        n = g.numel([shape[d]])
        s %= n
        if s:
            axis = g.const([d], "int64")
            tail = g.op("Slice", x, g.const([n - s], "int64"), g.const([n], "int64"), axis)
            head = g.op("Slice", x, g.const([0], "int64"), g.const([n - s], "int64"), axis)
            x = g.op("Concat", tail, head, axis=d)
    return x


def _onnx_cat(g, *xs, dim, skip):
    return g.op("Concat", *[x for x in xs if not (skip and tuple(g.shape(x)) == (0,))], axis=dim)


def _onnx_stack(g, *xs, dim):
    return g.op("Concat", *[g.op("Unsqueeze", x, g.const([dim], "int64")) for x in xs], axis=dim)


# Sizes may be ``Dim``s of the exporter (they follow dynamic axes): they only pass through ``g.ints``.
_I64_MAX, _I64_MIN = 2 ** 63 - 1, -2 ** 63


def _onnx_reshape(g, x, *, shape):
    return g.op("Reshape", x, g.ints(shape), allowzero=1 if 0 in [int(s) for s in shape] else None)


def _onnx_slice(g, x, *, key):
    """Basic indexing: ints, slices, ``...`` and ``None`` as one Slice, a Squeeze and an Unsqueeze."""
    key = key if isinstance(key, tuple) else (key,)
    n = g.rank(x)
    fill = n - sum(1 for k in key if k is not None and k is not Ellipsis)
    axes, starts, ends, steps, squeeze, unsqueeze = [], [], [], [], [], []
    d = od = 0
    for k in key:
        if k is Ellipsis:
            d, od = d + fill, od + fill
        elif k is None:
            unsqueeze.append(od)
            od += 1
        elif isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if (k.start, k.stop, step) != (None, None, 1):
                axes.append(d)
                steps.append(step)
                starts.append(k.start if k.start is not None else (0 if step > 0 else _I64_MAX))
                ends.append(k.stop if k.stop is not None else (_I64_MAX if step > 0 else _I64_MIN))
            d, od = d + 1, od + 1
        else:
            axes.append(d)
            starts.append(k)
            ends.append(k + 1 if int(k) != -1 else _I64_MAX)
            steps.append(1)
            squeeze.append(d)
            d += 1
    if axes:
        x = g.op("Slice", x, g.ints(starts), g.ints(ends), g.const(axes, "int64"), g.const(steps, "int64"))
    if squeeze:
        x = g.op("Squeeze", x, g.const(squeeze, "int64"))
    if unsqueeze:
        x = g.op("Unsqueeze", x, g.const(unsqueeze, "int64"))
    return x if axes or squeeze or unsqueeze else g.op("Identity", x)


def _onnx_repeat(g, x, *, reps):
    extra = len(reps) - g.rank(x)
    if extra > 0:
        x = g.op("Reshape", x, g.ints([1] * extra + list(g.shape(x))))
    return g.op("Tile", x, g.ints(reps))


def _onnx_flip(g, x, *, dims):
    k = len(dims)
    return g.op("Slice", x, g.const([-1] * k, "int64"), g.const([_I64_MIN] * k, "int64"), g.const(list(dims), "int64"),
                g.const([-1] * k, "int64"))


def _onnx_pad(g, x, *, pads, mode, value):
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    fill = g.scalar(value or 0, x) if mode == "constant" else None
    return g.op("Pad", x, g.ints([b for b, _ in pads] + [a for _, a in pads]), fill, mode=mode)


_ALL = slice(None)


# ---------------------------------------------------------------- views: reshape, permute, expand, slice
_reshape = Op("reshape", lambda xp, x, *, shape: x.reshape(shape),
              lambda g, out, x, *, shape: (g.reshape(x._data.shape),), saves=NONE, is_view=True,
              aliases=("view", "view_as", "reshape_as", "squeeze", "unsqueeze", "flatten", "unflatten",
                       "atleast_1d", "atleast_2d", "atleast_3d"), onnx=_onnx_reshape, backward_name="ViewBackward0",
              aten="view")
# the same bytes read as another dtype (``Tensor.view(dtype)``); not differentiable, as PyTorch's
_view_dtype = Op("view_dtype", lambda xp, x, *, to: x.view(to.np), None, saves=NONE, is_view=True)
_permute = Op("permute", lambda xp, x, *, dims: x.transpose(dims),
              lambda g, out, x, *, dims: (apply(_permute, g, dims=_inverse(dims)),), saves=NONE, is_view=True,
              aliases=("transpose", "swapaxes", "swapdims", "movedim", "moveaxis", "t", "T", "mT"),
              onnx=lambda g, x, *, dims: g.op("Transpose", x, perm=list(dims)))


def _expand_fwd(xp, x, *, shape, fill=False):
    # adding only size-1 dims is a writable view with PyTorch's strides (its expand keeps a new size-1
    # dim's stride; numpy's broadcast_to gives a read-only one, and in-place writes to it failed)
    if math.prod(shape) == x.size and x.size:
        return x.reshape(shape)
    # numpy's broadcast_to costs ~4 us; a filled copy of a single element is cheaper for small
    # shapes (empty + fill skips numpy.full's Python wrapper), not for large ones: a sum's gradient
    # over 1M elements was a 4 MB fill a fused backward then read in full (helper F, issue 18).
    # Only where nobody sees the memory (``fill``: a reduction's gradient); ``Tensor.expand`` is a
    # stride-0 view of its input's memory, as PyTorch's (``torch.tensor([v]).expand(n)`` follows v)
    if fill and x.size == 1 and math.prod(shape) <= 4096:
        out = xp.empty(shape, x.dtype)
        out[...] = x if x.ndim <= len(shape) else x.reshape(())   # no reshape frame when it broadcasts
        return out
    if type(x) is np.ndarray and x.ndim:
        return _expanded(x, shape)
    return xp.broadcast_to(x, shape)


def _expanded(x: np.ndarray, shape: tuple) -> np.ndarray:
    """``x`` expanded to ``shape`` with ATen's strides (``inferExpandGeometry``: an expanded dim 0, a kept
    dim its own, a new dim of one element spanning the dim after it; numpy's broadcast_to strides every
    dim of one element 0), read-only as broadcast_to's (an in-place write through it is PyTorch's overlap
    error). A C-contiguous x's is an array over its memory: 1.0 us against broadcast_to's 2.5."""
    lead = len(shape) - x.ndim
    strides = list(x.strides)
    i = lead
    for n in x.shape:   # (a loop, no comprehension's frame)
        if n != shape[i]:
            strides[i - lead] = 0
        i += 1
    while lead:
        lead -= 1
        strides.insert(0, shape[lead + 1] * strides[0] if shape[lead] == 1 else 0)
    if x.flags.c_contiguous and x.size:
        out = np.ndarray(shape, x.dtype, x, 0, strides)
        out.setflags(write=False)
        return out
    out = np.broadcast_to(x, shape)
    strides = tuple(strides)
    return out if out.strides == strides else np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)


_expand = Op("expand", _expand_fwd,
             lambda g, out, x, *, shape, fill=False: (sum_to(g, x._data.shape),), saves=NONE, is_view=True,
             aliases=("expand_as", "broadcast_to", "broadcast_tensors"),
             onnx=lambda g, x, *, shape, fill=False: g.op("Expand", x, g.ints(shape)))


def _slice_backward_fwd(xp, g, *, shape, key):
    out = xp.zeros(shape, g.dtype)
    out[key] = g
    return out


def _slice_name(ndims: tuple, params: dict) -> str:
    """PyTorch's node for basic indexing, which applies the key's entries in order: that of the last one
    that does something (an int selects, a slice short of the whole dim slices, None unsqueezes)."""
    key = params["key"]
    name = "AliasBackward0"
    for k in key:   # (one loop, no list of the key: the name 1.14 -> 0.54 us a recorded slice)
        if k is None:
            name = "UnsqueezeBackward0"
        elif type(k) is int:
            name = "SelectBackward0"
        elif k is not Ellipsis and k != _ALL:
            name = "SliceBackward0"
    if len(key) == 2 and key[1] is Ellipsis and key[0] is not Ellipsis and name == "AliasBackward0":
        return "SliceBackward0"   # x[:] alone is sliced; x[...] and x[..., :] aliased
    return name


def _slice_fwd(xp, x, *, key):
    """``x[key]``; a new axis (None) strided as ATen's unsqueeze strides it when the index reaches it:
    as the input dim then after it spans (one element past the last). numpy strides it 0, and ATen's
    ordering of an elementwise result reads one-element dims' strides."""
    if None not in key:
        return x[key]
    if type(x) is np.ndarray:
        out = _unsqueezed_view(x, key)
        if out is not None:
            return out
    out = x[key]
    if type(out) is not np.ndarray:
        return out
    strides = list(out.strides)
    n, shape, steps = x.ndim, x.shape, x.strides
    i = o = 0
    for k in key:
        if k is None:
            strides[o] = shape[i] * steps[i] if i < n else x.itemsize
            o += 1
        elif k is Ellipsis:
            rest = n - len(key) + key.count(None) + 1   # the dims the Ellipsis takes
            i, o = i + rest, o + rest
        elif type(k) is int:
            i += 1
        else:
            i, o = i + 1, o + 1
    strides = tuple(strides)
    if strides != out.strides:
        # adding dims of one element never copies, and numpy's reshape strides them as ATen's
        # unsqueeze in the common cases (x[None], y[:, None]): 0.4 us against as_strided's 4
        out = x[tuple([k for k in key if k is not None])].reshape(out.shape)
        if out.strides != strides:
            out = np.lib.stride_tricks.as_strided(out, out.shape, strides, writeable=out.flags.writeable)
    return out


def _unsqueezed_view(x: np.ndarray, key: tuple) -> np.ndarray | None:
    """``x[key]`` for a key of whole slices, Nones and an Ellipsis (``x[:, :, None]``, ``x[None]``): new
    dims of one element strided as ATen's unsqueeze, laid over x's memory (C-contiguous x) or numpy's
    reshape where it strides them so (1.0 us against indexing, reshaping and comparing's 1.9);
    None for any other key, or where neither applies."""
    n, have, steps = x.ndim, x.shape, x.strides
    shape, strides = [], []
    i, ellipsis = 0, False
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(have[i] * steps[i] if i < n else x.itemsize)
        elif k is Ellipsis:
            rest = i + n - len(key) + key.count(None) + 1   # the dims the Ellipsis takes end here
            if ellipsis or rest < i:   # numpy's errors: two of them, too many indices
                return None
            shape += have[i:rest]
            strides += steps[i:rest]
            i, ellipsis = rest, True
        elif i < n and type(k) is slice and k.start is None and k.stop is None and k.step is None:
            shape.append(have[i])
            strides.append(steps[i])
            i += 1
        else:
            return None
    if i != n:
        return None
    if x.flags.c_contiguous and x.size:
        return np.ndarray(shape, x.dtype, x, 0, strides)
    out = x.reshape(shape)
    return out if out.strides == tuple(strides) else None


# ``key`` is a tuple of ints, slices (positive steps), None and a trailing Ellipsis, so numpy
# always returns a view (an all-int key without the Ellipsis would give a scalar copy)
_slice = Op("slice", _slice_fwd,
            lambda g, out, x, *, key: (apply(_slice_backward, g, shape=x._data.shape, key=key),),
            saves=NONE, is_view=True, aliases=("narrow", "select", "split", "chunk", "unbind", "tensor_split"),
            onnx=_onnx_slice, backward_name=_slice_name)
_slice_backward = Op("slice_backward", _slice_backward_fwd,
                     lambda g, out, gin, *, shape, key: (apply(_slice, g, key=key),), saves=NONE)


# ---------------------------------------------------------------- view tracking (see autograd/views.py)
def _mark(out: Tensor, input: Tensor) -> Tensor:
    """Record that ``out`` aliases ``input``'s root base: attribute stores, nothing else. A view made
    in no_grad mode of a tensor that requires grad requires grad itself, without a grad_fn (a leaf
    whose gradient goes nowhere, as PyTorch's; in-place with grad mode on is refused, autograd/views.py).
    Only that inherited flag sends the gradient nowhere: a no_grad view of a tensor that needs no grad,
    given ``requires_grad = True`` by the program (a reversible block's recomputation inside a custom
    backward), is a leaf that accumulates its ``.grad`` as any other."""
    b = input._base
    if b is None:
        out._base = input
        if not is_grad_enabled():
            out._view_nograd = True
            if input.requires_grad:
                out.requires_grad = out._grad_nowhere = True
    else:
        out._base = b
        if not is_grad_enabled():
            out._view_nograd = True
            if input.requires_grad:
                out.requires_grad = out._grad_nowhere = True
        elif input._view_nograd:
            out._view_nograd = True
    return out


def _reshaped(out: Tensor, input: Tensor) -> Tensor:
    """A reshape is a view when numpy returned one; a copy gets its own version counter."""
    ob, data = out._data.base, input._data
    if ob is not None and (ob is data or ob is data.base):
        return _mark(out, input)
    out._vc = [0]
    return out


def _base_requires_grad(t: Tensor) -> bool:
    """A view whose base requires grad (the view may not yet know it: see views._view_grad_fn)."""
    b = t._base
    return b is not None and b.requires_grad


class MultiViewNode(Node):
    """The one grad_fn of all outputs of ``unbind``/``split``/``chunk``/``tensor_split``.

    Output ``i`` is ``input[keys[i]]``. Backward writes the gradients that arrived into one
    zero tensor of the input's shape (a single dispatched op, whatever the number of outputs
    and however many received no gradient), rather than one full-size tensor per output.
    """

    __slots__ = ("_name", "keys", "shape", "n_outputs", "module")

    def __init__(self, name, edge, keys, shape):
        self._name, self.keys, self.shape = name, keys, shape
        self.n_outputs = len(keys)
        self.edges = (edge,)
        self.seq = next(_seq)
        self.pre_hooks = self.hooks = self._metadata = None
        self.module = ""

    def name(self) -> str:
        return self._name

    @property
    def saved_tensors(self) -> tuple:
        return ()

    def run(self, grads):
        present = [i for i, g in enumerate(grads) if g is not None]
        if not present:
            return (None,)
        keys = self.keys
        return (apply(_views_backward, *[grads[i] for i in present], shape=self.shape,
                      keys=tuple(keys[i] for i in present)),)


def _views_backward_fwd(xp, *gs, shape, keys):
    d = _partition_dim(shape, keys)
    if d is None:
        out = xp.zeros(shape, gs[0].dtype)
    elif d and kernels.use(xp, *gs):   # split's pieces side by side in each row: one copy into each
        out = np.empty(shape, gs[0].dtype)   # row's columns, cut over the threads as ATen's cat
        rows = math.prod(shape[:d])
        flat, col = out.reshape(rows, -1), 0
        put = kernels.loops("pointwise").put_cols
        for g in gs:
            g = g.reshape(rows, -1)
            kernels.parallel(put, 2, g, flat, col)
            col += g.shape[1]
        return out
    else:
        out = xp.empty(shape, gs[0].dtype)   # the pieces cover it: nothing to zero first
    for k, g in zip(keys, gs):
        out[k] = g
    return out


def _partition_dim(shape: tuple, keys: tuple) -> int | None:
    """The dim ``d`` whose pieces ``keys`` (``_dim_key(d, ...)`` each, in order) cover ``shape`` from end to
    end, one after the other, or None (a piece got no gradient, or the keys are not such pieces)."""
    d = len(keys[0]) - 2
    at = 0
    for k in keys:
        if len(k) != d + 2 or k[-1] is not Ellipsis or any(s != _ALL for s in k[:d]):
            return None
        s = k[d]
        if type(s) is int:
            lo, hi = s, s + 1
        elif type(s) is slice and s.step is None and type(s.start) is int and type(s.stop) is int:
            lo, hi = s.start, s.stop
        else:
            return None
        if lo != at:
            return None
        at = hi
    return d if at == shape[d] else None


# the backward of MultiViewNode (unbind/split/chunk/tensor_split): one zero tensor, each
# incoming gradient written into its piece
_views_backward = Op("views_backward", _views_backward_fwd,
                     lambda g, out, *gs, shape, keys: tuple(apply(_slice, g, key=k) for k in keys),
                     saves=NONE)


def _inverse(dims: tuple) -> tuple:
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return tuple(inv)


def _dim_key(dim: int, item) -> tuple:
    """The basic-index key that applies ``item`` (an int or a slice) to dimension ``dim``."""
    return (_ALL,) * dim + (item, Ellipsis)


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and type(shape[0]) is not int:
        shape = shape[0]
    return tuple(map(_index, shape))


def _sizes(args: tuple, given, op: str, name: str) -> tuple:
    """The sizes or dims an op takes as varargs, one sequence or a keyword (``x.view(2, 3)``,
    ``x.view((2, 3))``, ``x.view(size=(2, 3))``); none at all is PyTorch's TypeError (``()`` is a size)."""
    if given is not None:
        return _shape_arg((given,))
    if not args:
        raise TypeError(f"{op}() received an invalid combination of arguments - got (), but expected one of:\n"
                        " * (torch.dtype dtype)\n * (tuple of ints size)\n" if op == "view" else
                        f'{op}() missing 1 required positional arguments: "{name}"')
    return _shape_arg(args)


def _infer(shape: tuple, numel: int, op: str, have) -> tuple:
    if -1 not in shape:
        if math.prod(shape) == numel and (not shape or min(shape) >= 0):   # (min's default= keyword: 2x the call)
            return shape
        _check_dims(shape)
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel} "
                           f"(input shape {list(have)}, in {op})")
    if min(shape) < -1:
        _check_dims(shape)
    if shape.count(-1) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred, got shape {list(shape)}")
    i = shape.index(-1)   # (slices and a list: no generator frames, reshape(-1) 2.7 -> 2.3 us)
    known = math.prod(shape[:i]) * math.prod(shape[i + 1:])
    if known == 0 or numel % known:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape[:i] + (numel // known,) + shape[i + 1:]


def _check_dims(shape: tuple) -> None:
    """PyTorch's error for a size below -1 (-1 alone means "infer this one")."""
    for i, s in enumerate(shape):
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")


def _viewable(old: tuple, strides: tuple, new: tuple) -> bool:
    """PyTorch's computeStride test: can ``new`` be laid over ``old``'s strides without a copy?"""
    if not old or 0 in old:
        return True
    view_d = len(new) - 1
    base = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return view_d == -1


def reshape(input: Tensor, *args, shape=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, *args, shape)):
        return handle_torch_function(reshape, (input, *args, shape), input, *args, shape=shape)
    data = input._data
    shape = _sizes(args, shape, "reshape", "shape")   # reshape(2, 3), reshape((2, 3)), reshape(shape=...)
    return _reshaped(apply(_reshape, input, shape=_infer(shape, data.size, "reshape", data.shape)), input)


def view(input: Tensor, *args, size=None, dtype=None) -> Tensor:
    """``view(*shape)``: the same memory in a new shape; ``view(dtype)``: the same bytes read as
    another dtype (not differentiable, as PyTorch's)."""
    if dtype is not None or (len(args) == 1 and isinstance(args[0], _dtype_cls)):
        to = dtype if dtype is not None else args[0]
        _check_view_dtype(input, to)
        return _mark(apply(_view_dtype, input, to=to), input)
    data = input._data
    shape = _infer(_sizes(args, size, "view", "size"), data.size, "view", data.shape)
    if not data.flags.c_contiguous and not _viewable(data.shape, data.strides, shape):
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride (at least "
                           f"one dimension spans across two contiguous subspaces). Use .reshape(...) "
                           f"instead. (view of shape {list(data.shape)} as {list(shape)})")
    return _mark(apply(_reshape, input, shape=shape), input)


def _check_view_dtype(input: Tensor, to) -> None:
    """PyTorch's refusals of ``view(dtype)`` between element sizes: the last dim scales by their
    ratio, which needs a last dim of stride 1 and a whole number of new elements."""
    data, old, new = input._data, input.dtype.itemsize, to.itemsize
    if old == new:
        return
    what = f"to view {input.dtype.scalar_type} as {to.scalar_type} (different element sizes)"
    if data.ndim == 0:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    if data.strides[-1] != old:
        raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {data.strides[-1] // old}")
    if old < new and (data.shape[-1] * old) % new:
        raise RuntimeError(f"self.size(-1) must be divisible by {new // old} {what}, but got {data.shape[-1]}")


def view_as(input: Tensor, other: Tensor) -> Tensor:
    return view(input, other._data.shape)


def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    return reshape(input, other._data.shape)


def permute(input: Tensor, *args, dims=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, *args, dims)):
        return handle_torch_function(permute, (input, *args, dims), input, *args, dims=dims)
    dims = _sizes(args, dims, "permute", "dims")
    n = input.ndim
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match "
                           f"the length of the desired ordering of dimensions i.e. input.dim() = "
                           f"{n} is not equal to len(dims) = {len(dims)}")
    order = list(range(n))
    if sorted(dims) != order:   # negative dims, or a dim repeated or out of range (one sort when none is)
        dims = tuple([_wrap_dim(d, n, "permute") for d in dims])
        if sorted(dims) != order:
            raise RuntimeError(f"permute(): duplicate dims are not allowed (got {list(dims)})")
    return _mark(apply(_permute, input, dims=dims), input)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(transpose, (input,), input, dim0, dim1)
    return _swapped(input, dim0, dim1)


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """transpose under numpy's name, with numpy's keyword names (``axis0=``), as PyTorch's."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(swapaxes, (input,), input, axis0, axis1)
    return _swapped(input, axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(swapdims, (input,), input, dim0, dim1)
    return _swapped(input, dim0, dim1)


def _swapped(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """transpose, swapaxes and swapdims: the permutation swapping two dims (a view)."""
    try:
        n = input.ndim
    except AttributeError:
        refuse_non_tensors("transpose", input)
        raise
    if n == 0:
        return input
    d0, d1 = _wrap_dim(dim0, n, "transpose"), _wrap_dim(dim1, n, "transpose")
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return _mark(apply(_permute, input, dims=tuple(dims)), input)


def _dim_list(dims, ndim: int, op: str, what: str) -> list:
    dims = [dims] if isinstance(dims, int) else list(dims)
    wrapped = [_wrap_dim(d, ndim, op) for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"{op}: repeated dim in `{what}` ({dims})")
    return wrapped


def movedim(input: Tensor, source, destination) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, source, destination)):
        return handle_torch_function(movedim, (input, source, destination), input, source, destination)
    try:
        n = input.ndim
    except AttributeError:
        refuse_non_tensors("movedim", input)
        raise
    src = _dim_list(source, n, "movedim", "source")
    dst = _dim_list(destination, n, "movedim", "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
                           f"contain the same number of dims as destination ({list(dst)} dims)")
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _mark(apply(_permute, input, dims=tuple(order)), input)   # a view even when nothing moves, as torch's


moveaxis = movedim


def expand(input: Tensor, *args, size=None) -> Tensor:
    sizes = _shape_arg(args if size is None else (size,))   # expand(*()) of a 0-d shape: internal callers
    have = input._data.shape
    if len(sizes) < len(have):
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({len(have)})")
    lead = len(sizes) - len(have)
    shape = sizes
    if -1 in sizes:   # -1: the existing size
        if -1 in sizes[:lead]:
            raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
        shape = tuple([have[i - lead] if s == -1 else s for i, s in enumerate(sizes)])
    for i, s, cur in zip(range(lead, len(shape)), shape[lead:], have):   # new leading dims take any size
        if s != cur and cur != 1:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size "
                               f"({cur}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(have)}")
    # the same shape is still a new view with its own node, as PyTorch's (Megatron/DeepSpeed reach a
    # parameter's AccumulateGrad through ``p.expand_as(p).grad_fn.next_functions[0][0]``)
    return _mark(apply(_expand, input, shape=shape), input)


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return expand(input, other._data.shape)


def broadcast_to(input: Tensor, size) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, size)):
        return handle_torch_function(broadcast_to, (input, size), input, size)
    return expand(input, tuple(size))


def broadcast_shapes(*shapes) -> tuple:
    """The shape all ``shapes`` broadcast to (PyTorch's RuntimeError when they do not)."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, n in enumerate(s, nd - len(s)):
            if n != 1 and out[i] != 1 and n != out[i]:
                raise RuntimeError(f"The size of tensor a ({out[i]}) must match the size of tensor b ({n}) "
                                   f"at non-singleton dimension {i}")
            if n != 1:
                out[i] = n
    return Size(out)


def broadcast_tensors(*tensors) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(broadcast_tensors, tensors, *tensors)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    shape = broadcast_shapes(*(t._data.shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def unsqueeze(input: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, axis)):
        return handle_torch_function(unsqueeze, (input, axis), input, dim=dim, axis=axis)
    d = _wrap_dim(dim_or_axis("unsqueeze", dim, axis), input.ndim + 1, "unsqueeze")
    shape = input._data.shape
    return _mark(apply(_reshape, input, shape=shape[:d] + (1,) + shape[d:]), input)


def squeeze(input: Tensor, dim=None, *, axis=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, dim, axis)):
        return handle_torch_function(squeeze, (input, dim, axis), input, dim=dim, axis=axis)
    dim = dim if axis is None else axis
    shape = input._data.shape
    if type(dim) is int:   # one dim (the usual call): no sets
        n = len(shape)
        d = _wrap_dim(dim, n, "squeeze")
        kept = shape[:d] + shape[d + 1:] if n and shape[d] == 1 else shape
        return _mark(apply(_reshape, input, shape=kept), input)
    if dim is None:
        return _mark(apply(_reshape, input, shape=tuple([s for s in shape if s != 1])), input)
    else:
        dims = {_wrap_dim(d, input.ndim, "squeeze") for d in ((dim,) if isinstance(dim, int) else dim)}
        dims = {d for d in dims if input.ndim and shape[d] == 1}
    return _mark(apply(_reshape, input, shape=tuple(s for i, s in enumerate(shape) if i not in dims)), input)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        # positional, trailing defaults left out: a traced torch.flatten(x, 1) records (x, 1), as PyTorch's
        args = (input, start_dim, end_dim)[:3 if end_dim != -1 else 2 if start_dim != 0 else 1]
        return handle_torch_function(flatten, (input,), *args)
    shape = input._data.shape
    n = len(shape)
    if n == 0:
        return input.reshape(1)
    s, e = _wrap_dim(start_dim, n, "flatten"), _wrap_dim(end_dim, n, "flatten")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return _reshaped(apply(_reshape, input, shape=shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:]),
                     input)


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, sizes)):
        return handle_torch_function(unflatten, (input, sizes), input, dim, sizes)
    shape = input._data.shape
    d = _wrap_dim(dim, input.ndim, "unflatten")
    sizes = tuple(int(s) for s in sizes)
    if sizes.count(-1) > 1:
        raise RuntimeError("unflatten: only one dimension can be inferred")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes and known and shape[d] % known == 0:
        sizes = tuple(shape[d] // known if s == -1 else s for s in sizes)
    elif known != shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of "
                           f"dim {dim} ({shape[d]}) in the input tensor")
    return _mark(apply(_reshape, input, shape=shape[:d] + sizes + shape[d + 1:]), input)


def t(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(t, (input,), input)
    n = input._data.ndim
    if n > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D")
    return input if n < 2 else _mark(apply(_permute, input, dims=(1, 0)), input)   # transpose(input, 0, 1)


def _T(self: Tensor) -> Tensor:
    return self if self.ndim < 2 else _mark(apply(_permute, self, dims=tuple(reversed(range(self.ndim)))), self)


def _mT(self: Tensor) -> Tensor:
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self.ndim}-D tensor.")
    return transpose(self, -2, -1)


def atleast_1d(*tensors):
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(atleast_1d, tensors, *tensors)
    return _atleast(tensors, 1)


def atleast_2d(*tensors):
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(atleast_2d, tensors, *tensors)
    return _atleast(tensors, 2)


def atleast_3d(*tensors):
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(atleast_3d, tensors, *tensors)
    return _atleast(tensors, 3)


def _atleast(tensors, n: int):
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    seq = tensors[0] if len(tensors) == 1 and not one else tensors
    out = tuple(t if t.ndim >= n else _mark(apply(_reshape, t, shape=_pad_shape(t._data.shape, n)), t) for t in seq)
    return out[0] if one else out


def _pad_shape(shape: tuple, n: int) -> tuple:
    # numpy's rule: 1-D (k,) becomes (1, k) and, for 3-D, (1, k, 1); 2-D (a, b) becomes (a, b, 1)
    if len(shape) == 0:
        return (1,) * n
    if len(shape) == 1:
        return (1,) + shape + (1,) * (n - 2)
    return shape + (1,)


# ---------------------------------------------------------------- slicing views
def narrow(input: Tensor, dim: int, start, length: int) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, start)):
        return handle_torch_function(narrow, (input, start), input, dim, start, length)
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim, "narrow")
    size = input._data.shape[d]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    start %= max(size, 1)
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _mark(apply(_slice, input, key=_dim_key(d, slice(start, start + length))), input)


def as_strided(input: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A view of ``input``'s storage with the given sizes, strides and offset (in elements)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, size, stride)):
        return handle_torch_function(as_strided, (input, size, stride), input, size, stride,
                                     storage_offset=storage_offset)
    return _mark(apply(_as_strided, input, geom=strided_geometry(input, size, stride, storage_offset)), input)


def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A copy of ``input`` with ``src`` written where ``input.as_strided(size, stride, storage_offset)`` lies."""
    if _DISPATCH.functions is not None and has_tensor_like((input, src, size, stride)):
        return handle_torch_function(as_strided_scatter, (input, src, size, stride), input, src, size, stride,
                                     storage_offset=storage_offset)
    geom = strided_geometry(input, size, stride, storage_offset)
    if tuple(src.shape) != geom.dst[0]:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(geom.dst[0])}")
    return apply(_as_strided_scatter, input, src.to(input.dtype), geom=geom.gradients())


def select(input: Tensor, dim: int, index: int) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(select, (input,), input, dim, index)
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim, "select")
    size = input._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} "
                         f"at dimension {d}")
    return _mark(apply(_slice, input, key=_dim_key(d, index % size)), input)


def _pieces(input: Tensor, d: int, bounds, name: str | None) -> tuple:
    return _views(input, [_dim_key(d, slice(a, b)) for a, b in bounds], name)


def _views(input: Tensor, keys: list, name: str | None) -> tuple:
    """The views ``input[key]`` for each key, sharing ONE grad_fn (a MultiViewNode, output ``i``
    for piece ``i``), whose backward costs one tensor of the input's size however many pieces.

    ``name`` is PyTorch's name of the op (``Unbind``, ``Split``, ``SplitWithSizes``): its outputs
    may not be modified in place while autograd records; None (tensor_split) allows it.
    """
    if STATE.slow and STATE.modes:  # tracers and capture see one slice per piece
        return tuple(_mark(apply(_slice, input, key=k), input) for k in keys)
    if STATE.slow:   # observers (tape, profiler) see one slice per piece; the node is attached below
        prev, GRAD.enabled = GRAD.enabled, False
        try:
            pieces = [apply(_slice, input, key=k) for k in keys]
        finally:
            GRAD.enabled = prev
    else:
        data, vc, dev = input._data, input._vc, input._device
        pieces = [Tensor._wrap(data[k], False, None, 0, vc, dev) for k in keys]
    if is_grad_enabled() and input.requires_grad:
        fn = input.grad_fn
        if input._base is not None and input._vc[0]:
            fn = _view_grad_fn(input)
        edge = (fn, input._out_nr) if fn is not None else (input._accumulator(), 0)
        node = MultiViewNode((name or "Slice") + "Backward0", edge, tuple(keys), input._data.shape)
        if STATE.slow and STATE.module_path:
            node.module = STATE.module_path[-1]
        for i, p in enumerate(pieces):
            p.requires_grad, p.grad_fn, p._out_nr = True, node, i
    for p in pieces:
        _mark(p, input)
        if name is not None:
            p._view_multi = name
    return tuple(pieces)


def split(tensor: Tensor, split_size_or_sections=None, dim: int = 0, *, split_size=None) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((tensor, split_size_or_sections, split_size)):
        return handle_torch_function(split, (tensor, split_size_or_sections, split_size), tensor,
                                     split_size_or_sections=split_size_or_sections, dim=dim, split_size=split_size)
    if split_size is not None:   # Tensor.split's keyword name (torch.split's is split_size_or_sections)
        split_size_or_sections = split_size
    d = _wrap_dim(dim, tensor.ndim, "split")
    size = tensor._data.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0 or (step == 0 and size):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size "
                               f"of {size}" if step == 0 else f"split expects split_size be non-negative, "
                               f"but got split_size={step}")
        if size == 0:
            return _pieces(tensor, d, [(0, 0)], "Split")
        return _pieces(tensor, d, [(a, min(a + step, size)) for a in range(0, size, step)], "Split")
    sizes = [int(s) for s in split_size_or_sections]
    if sum(sizes) != size or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                           f"size at dimension {d}), but got split_sizes={sizes}")
    ends = list(_accumulate(sizes))
    return _pieces(tensor, d, zip([0] + ends[:-1], ends), "SplitWithSizes")


def _accumulate(sizes):
    total = 0
    for s in sizes:
        total += s
        yield total


def chunk(input: Tensor, chunks: int, dim: int = 0, *, axis=None) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((input, axis)):
        return handle_torch_function(chunk, (input, axis), input, chunks, dim=dim, axis=axis)
    dim = dim if axis is None else axis
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _wrap_dim(dim, input.ndim, "chunk")
    size = input._data.shape[d]
    if not size:
        return _pieces(input, d, [(0, 0)] * chunks, "Split")
    return split(input, -(-size // chunks), d)


def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((input, indices_or_sections)):
        return handle_torch_function(tensor_split, (input, indices_or_sections), input, indices_or_sections, dim=dim)
    d = _wrap_dim(dim, input.ndim, "tensor_split")
    size = input._data.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        ends = list(_accumulate([q + 1] * r + [q] * (n - r)))
        return _pieces(input, d, zip([0] + ends[:-1], ends), None)
    cuts = [min(max(int(i) if i >= 0 else int(i) + size, 0), size) for i in indices_or_sections]
    starts, stops = [0] + cuts, cuts + [size]
    return _pieces(input, d, ((a, max(a, b)) for a, b in zip(starts, stops)), None)


def unbind(input: Tensor, dim: int = 0, *, axis=None) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((input, axis)):
        return handle_torch_function(unbind, (input, axis), input, dim=dim, axis=axis)
    dim = dim if axis is None else axis
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, input.ndim, "unbind")
    return _views(input, [_dim_key(d, i) for i in range(input._data.shape[d])], "Unbind")


# ---------------------------------------------------------------- joining
def _cat_fwd(xp, *xs, dim, skip):
    xs = [x for x in xs if x.shape != (0,)] if skip else xs
    out = xp.concatenate(xs, axis=dim)
    return out if xp is not np or out.flags.c_contiguous else _relaid(out, xs, lambda x: (x.shape, _steps(x)))


def _relaid(out: np.ndarray, xs: list, layout) -> np.ndarray:
    """A join's result in PyTorch's memory format: channels-last where every input's ``layout(x)``
    (its shape and strides as the join sees them) is (``suggest_memory_format``), else contiguous.
    numpy lays the result out in whatever order its inputs share (an ``einsum`` result's permuted
    strides), and programs ``view`` PyTorch's result. Contiguous inputs never get here."""
    orders = {channels_last_order(*layout(x)) for x in xs} if out.ndim in (4, 5) else {None}
    order = orders.pop() if len(orders) == 1 else None
    if order is None:
        return np.ascontiguousarray(out)
    want = _empty_in_order(out.shape, out.dtype, order)
    if want.strides == out.strides:
        return out
    want[...] = out
    return want


def _empty_in_order(shape: tuple, dtype, order: tuple) -> np.ndarray:
    """An empty array of ``shape`` whose dims lie in memory in ``order`` (outermost first)."""
    return np.empty([shape[d] for d in order], dtype).transpose(np.argsort(order))


def _steps(x: np.ndarray) -> tuple:
    """``x``'s strides in elements, as PyTorch counts them."""
    return tuple(st // x.itemsize for st in x.strides)


def _unsqueezed(shape: tuple, strides: tuple, dim: int) -> tuple:
    """``(shape, strides)`` after PyTorch's ``unsqueeze(dim)``: the new dim's stride spans the dim it
    precedes (1 at the end), as ``stack`` sees its inputs."""
    step = shape[dim] * strides[dim] if dim < len(shape) else 1
    return shape[:dim] + (1,) + shape[dim:], strides[:dim] + (step,) + strides[dim:]


def _cat_vjp(g, out, *xs, dim, skip):
    grads, start = [], 0
    for x in xs:
        if skip and x._data.shape == (0,):
            grads.append(zeros(0, dtype=g.dtype, device=g.device))
            continue
        stop = start + x._data.shape[dim]
        grads.append(apply(_slice, g, key=_dim_key(dim, slice(start, stop))))
        start = stop
    return tuple(grads)


def _cat_array_vjp(g, out, inputs, params):
    """``_cat_vjp`` on arrays: each input's part of ``g`` as the slice op's forward makes it (a view), without
    its dispatch and tensor (a GRU step's cats: 32 a step); None where an input was skipped."""
    if params["skip"]:
        return None
    dim = params["dim"]
    grads, start = [], 0
    for x in inputs:
        stop = start + x._data.shape[dim]
        grads.append(g[_dim_key(dim, slice(start, stop))] if x.requires_grad else None)
        start = stop
    return tuple(grads)


_cat = Op("cat", _cat_fwd, _cat_vjp, promote="common", saves=NONE,
          aliases=("concat", "concatenate", "hstack", "vstack", "dstack", "column_stack"), onnx=_onnx_cat,
          array_vjp=_cat_array_vjp)
def _stack_fwd(xp, *xs, dim):
    """Along dim 0 on numpy, ``np.array`` of the list: a C-contiguous copy as PyTorch's (``np.stack``
    keeps its inputs' strides: transposed samples stack non-contiguous), 3x faster for a batch of
    64 samples (the DataLoader's collate)."""
    if dim == 0 and xp is np:
        return np.array(xs)
    out = xp.stack(xs, axis=dim)
    if xp is not np or out.flags.c_contiguous:
        return out
    return _relaid(out, xs, lambda x: _unsqueezed(x.shape, _steps(x), dim))


_stack = Op("stack", _stack_fwd,
            lambda g, out, *xs, dim: tuple(apply(_slice, g, key=_dim_key(dim, i)) for i in range(len(xs))),
            promote="common", saves=NONE, onnx=_onnx_stack)


def _tensor_list(tensors, op: str) -> list:
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {tp_name(t)}")
    if not tensors:   # PyTorch: a ValueError from cat's Python check, a RuntimeError from the others' kernels
        raise (ValueError(f"torch.{op}(): expected a non-empty list of Tensors") if op == "cat" else
               RuntimeError(f"{op} expects a non-empty TensorList"))
    return tensors


def cat(tensors, dim: int = 0, *, axis: int | None = None) -> Tensor:
    """Join along ``dim``; 1-D empty tensors are skipped (but still promote), as in PyTorch."""
    if axis is not None:
        dim = axis
    tensors = _tensor_list(tensors, "cat")
    first = tensors[0]._data.shape
    n = len(first)
    # the usual call: shapes equal but along dim, checked in one pass (cat of two: 6.2-6.9 -> 5.1-6.6 us)
    if n > 1 and -n <= dim < n:
        d = dim % n
        for t in tensors:
            s = t._data.shape
            if s != first and (len(s) != n or s[:d] != first[:d] or s[d + 1:] != first[d + 1:]):
                break
        else:
            return apply(_cat, *tensors, dim=d, skip=False)
    for i, t in enumerate(tensors):
        if not t._data.ndim:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    first = next((t._data.shape for t in tensors if t._data.shape != (0,)), (0,))
    d = _wrap_dim(dim, len(first), "cat")
    skip = False
    for i, t in enumerate(tensors):
        s = t._data.shape
        if s != first:
            if s == (0,):
                skip = True
                continue
            if len(s) != len(first):
                raise RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} and {len(s)}")
            for k in range(len(s)):
                if k != d and s[k] != first[k]:
                    raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                       f"{first[k]} but got size {s[k]} for tensor number {i} in the list.")
    return apply(_cat, *tensors, dim=d, skip=skip)


concat = concatenate = cat


def stack(tensors, dim: int = 0, *, axis=None) -> Tensor:
    dim = dim if axis is None else axis
    tensors = _tensor_list(tensors, "stack")
    first = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != first:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                               f"and {list(t.shape)} at entry {i}")
    return apply(_stack, *tensors, dim=_wrap_dim(dim, len(first) + 1, "stack"))


def hstack(tensors) -> Tensor:
    tensors = atleast_1d(_tensor_list(tensors, "hstack"))
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    return cat(atleast_2d(_tensor_list(tensors, "vstack")), 0)


row_stack = vstack


def dstack(tensors) -> Tensor:
    return cat(atleast_3d(_tensor_list(tensors, "dstack")), 2)


def column_stack(tensors) -> Tensor:
    tensors = _tensor_list(tensors, "column_stack")
    return cat([t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors], 1)


# ---------------------------------------------------------------- copies: repeat, flip, roll, tril, clone
def _repeat_vjp(g, out, x, *, reps):
    have = (1,) * (len(reps) - x.ndim) + x._data.shape
    split_shape = tuple(v for r, s in zip(reps, have) for v in (r, s))
    return (g.reshape(split_shape).sum(tuple(range(0, 2 * len(reps), 2))).reshape(x._data.shape),)


_repeat = Op("repeat", lambda xp, x, *, reps: xp.tile(x, reps), _repeat_vjp, saves=NONE, aliases=("tile",),
             onnx=_onnx_repeat)
_flip = Op("flip", lambda xp, x, *, dims: xp.flip(x, dims).copy(),
           lambda g, out, x, *, dims: (apply(_flip, g, dims=dims),), saves=NONE, aliases=("fliplr", "flipud"),
           onnx=_onnx_flip)
_roll = Op("roll", lambda xp, x, *, shifts, dims: xp.roll(x, shifts, dims),
           lambda g, out, x, *, shifts, dims: (apply(_roll, g, shifts=tuple(-s for s in shifts), dims=dims),),
           saves=NONE, onnx=_onnx_roll)
_tril = Op("tril", lambda xp, x, *, diagonal: xp.tril(x, diagonal),
           lambda g, out, x, *, diagonal: (apply(_tril, g, diagonal=diagonal),), saves=NONE,
           onnx=lambda g, x, *, diagonal: g.op("Trilu", x, g.const(diagonal, "int64"), upper=0))
_triu = Op("triu", lambda xp, x, *, diagonal: xp.triu(x, diagonal),
           lambda g, out, x, *, diagonal: (apply(_triu, g, diagonal=diagonal),), saves=NONE,
           onnx=lambda g, x, *, diagonal: g.op("Trilu", x, g.const(diagonal, "int64"), upper=1))


def _clone_fwd(xp, x, *, contiguous: bool = False):
    """A copy in its input's memory order, as PyTorch's ``clone`` (``preserve_format``: ``empty_like``'s
    dense strides in the input's stride order), so a draw into it in memory order (``bernoulli_``,
    ``normal_``) lands where PyTorch's does; row-major for ``contiguous()``."""
    order = None if contiguous or type(x) is not np.ndarray else memory_order(x)   # not a sparse array's
    if order is None:
        return x.copy()
    out = _empty_in_order(x.shape, x.dtype, order)
    out[...] = x
    return out


_clone = Op("clone", _clone_fwd, lambda g, out, x, **_: (g,), saves=NONE, aliases=("contiguous",),
            onnx="Identity", aten="clone(empty_strided, copy_)")


def repeat(input: Tensor, *args, repeats=None) -> Tensor:
    reps = _sizes(args, repeats, "repeat", "repeats")
    if len(reps) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           f"dimensions of tensor (repeat {list(reps)} of a {input.ndim}-D tensor)")
    if any(r < 0 for r in reps):
        raise RuntimeError(f"Trying to create tensor with negative dimension: repeat {list(reps)}")
    return apply(_repeat, input, reps=reps)


def tile(input: Tensor, dims) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, dims)):
        return handle_torch_function(tile, (input, dims), input, dims)
    dims = _shape_arg((dims,) if isinstance(dims, int) else dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def flip(input: Tensor, *args, dims=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, *args, dims)):
        return handle_torch_function(flip, (input, *args, dims), input, *args, dims=dims)
    wrapped = tuple(_wrap_dim(d, input.ndim, "flip") for d in _sizes(args, dims, "flip", "dims"))
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"dim {next(d for d in wrapped if wrapped.count(d) > 1)} appears multiple times "
                           f"in the list of dims")
    return apply(_flip, input, dims=wrapped) if wrapped and input.ndim else apply(_clone, input)


def fliplr(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(fliplr, (input,), input)
    if input.ndim < 2:
        raise RuntimeError(f"Input must be >= 2-d (fliplr of a {input.ndim}-D tensor).")
    return apply(_flip, input, dims=(1,))


def flipud(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(flipud, (input,), input)
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d (flipud of a 0-D tensor).")
    return apply(_flip, input, dims=(0,))


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, shifts, dims)):
        return handle_torch_function(roll, (input, shifts, dims), input, shifts, dims=dims)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll: `shifts` must be a single int when dims is not given, got {shifts}")
        flat = apply(_roll, input.reshape(-1), shifts=shifts, dims=(0,))
        return flat.reshape(input._data.shape)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    dims = tuple(_wrap_dim(d, input.ndim, "roll") for d in dims)
    return apply(_roll, input, shifts=shifts, dims=dims)


def _tri(op, input, diagonal: int, name: str) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions (got {input.ndim}-D)")
    return apply(op, input, diagonal=int(diagonal))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    return _tri(_tril, input, diagonal, "tril")


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    return _tri(_triu, input, diagonal, "triu")


def clone(input: Tensor, *, memory_format=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(clone, (input,), input, **({} if memory_format is None else {"memory_format": memory_format}))
    if memory_format is None or memory_format is preserve_format:
        return apply(_clone, input)
    return apply(_clone, input, contiguous=True)


def contiguous(input: Tensor, memory_format=None) -> Tensor:
    return input if input._data.flags.c_contiguous else apply(_clone, input, contiguous=True)


# ---------------------------------------------------------------- copy_
def _copy_fwd(xp, x, src):
    out = xp.empty_like(x)
    out[...] = src
    return out


def _copy_vjp(g, out, x, src):
    # the old value of ``x`` is overwritten: it gets a zero gradient, as in PyTorch
    gx = zeros(x._data.shape, dtype=x.dtype, device=x.device) if x.requires_grad else None
    if not (isinstance(src, Tensor) and src.requires_grad):
        return gx, None
    gs = sum_to(g, src._data.shape)
    return gx, (gs if gs._data.dtype == src._data.dtype else gs.to(src.dtype))


_copy = Op("copy", _copy_fwd, _copy_vjp, saves=NONE,
           onnx=lambda g, x, src: g.op("Expand", g.cast(src, g.dtype(x)), g.op("Shape", x)), aten="copy_")


def copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """Write ``src`` (broadcast, cast to ``self``'s dtype) into ``self``; gradients flow to ``src``."""
    if not isinstance(src, Tensor):
        if type(src) not in (int, float, bool, complex):
            raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not {tp_name(src)}")
        src = self.new_tensor(src)   # a number: PyTorch's parser wraps it (t.copy_(2.0) fills)
    if src._device is not self._device:
        src = src.to(self._device)
    if STATE.slow or (is_grad_enabled() and (self.requires_grad or src.requires_grad or _base_requires_grad(self))):
        return apply_(_copy, self, src)
    try:
        self._data[...] = src._data
    except ValueError:
        if not getattr(self._data.flags, "writeable", True):
            raise overlap_error() from None
        expand(src, self._data.shape)  # raises PyTorch's broadcast error
        raise
    self._vc[0] += 1
    return self


# ---------------------------------------------------------------- padding
_NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_fwd(xp, x, *, pads, mode, value):
    if any(b < 0 or a < 0 for b, a in pads):
        x = x[tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(pads, x.shape))]
        pads = tuple((max(b, 0), max(a, 0)) for b, a in pads)
    if mode != "constant":
        return xp.pad(x, pads, mode=_NP_MODE[mode])
    out = xp.full(tuple(n + b + a for (b, a), n in zip(pads, x.shape)), value, x.dtype)
    out[tuple(slice(b, b + n) for (b, a), n in zip(pads, x.shape))] = x
    return out


def _pad_vjp(g, out, x, *, pads, mode, value):
    if mode == "constant":
        return (apply(_pad, g, pads=tuple((-b, -a) for b, a in pads), mode=mode, value=0),)
    return (apply(_pad_backward, g, pads=pads, mode=mode),)


def _pad_backward_fwd(xp, g, *, pads, mode):
    """Fold the padded border of ``g`` back onto the input positions it was copied from."""
    for d, (b, a) in enumerate(pads):
        if not (b or a):
            continue
        n = g.shape[d] - b - a
        at = (_ALL,) * d
        gx = g[at + (slice(b, b + n),)].copy()
        left, right = g[at + (slice(0, b),)], g[at + (slice(b + n, None),)]
        if mode == "reflect":
            gx[at + (slice(1, b + 1),)] += xp.flip(left, d)
            gx[at + (slice(n - 1 - a, n - 1),)] += xp.flip(right, d)
        elif mode == "replicate":
            gx[at + (slice(0, 1),)] += left.sum(d, keepdims=True)
            gx[at + (slice(n - 1, n),)] += right.sum(d, keepdims=True)
        else:
            gx[at + (slice(n - b, n),)] += left
            gx[at + (slice(0, a),)] += right
        g = gx
    return g


_pad = Op("pad", _pad_fwd, _pad_vjp, saves=NONE, aliases=("constant_pad_nd",), onnx=_onnx_pad,
          aten="pad(constant_pad_nd)")
_pad_backward = Op("pad_backward", _pad_backward_fwd,
                   lambda g, out, gin, *, pads, mode: (apply(_pad, g, pads=pads, mode=mode, value=0),),
                   saves=NONE)


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """``nn.functional.pad``: ``pad`` lists (before, after) pairs from the last dimension backwards."""
    if _DISPATCH.functions is not None and has_tensor_like((input, pad)):
        return handle_torch_function(_PAD, (input, pad), input, pad, mode=mode, value=value)
    return _padded(input, pad, mode, value)


_PAD = pad   # the name its guard records it by: the parameter ``pad`` shadows the function


def _padded(input: Tensor, pad, mode: str, value) -> Tensor:
    pad = tuple(int(p) for p in pad)
    n = input.ndim
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pad) // 2
    if k > n:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension "
                           f"but got padding length {len(pad)} and input of dimension {n}")
    pairs = ((0, 0),) * (n - k) + tuple((pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k)))
    if mode == "constant":
        return apply(_pad, input, pads=pairs, mode=mode, value=0 if value is None else value)
    if mode not in _NP_MODE:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if k not in (1, 2, 3) or n not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {n}D input tensor.\n"
                                  "Supported combinations for non-constant padding:\n"
                                  "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                                  "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                                  "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    shape = input._data.shape
    for d, (b, a) in enumerate(pairs):
        if b < 0 or a < 0:
            raise NotImplementedError(f"pad: negative padding {(b, a)} is only supported in constant mode")
        if mode == "reflect" and (b >= shape[d] or a >= shape[d]):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({b}, {a}) at dimension {d} of input {list(shape)}")
        if mode == "circular" and (b > shape[d] or a > shape[d]):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode == "replicate" and (b or a) and not shape[d]:
            raise RuntimeError(f"pad: cannot replicate-pad dimension {d} of size 0 (input {list(shape)})")
    return apply(_pad, input, pads=pairs, mode=mode, value=None)


def constant_pad_nd(input: Tensor, pad, value: float = 0) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, pad)):
        return handle_torch_function(constant_pad_nd, (input, pad), input, pad, value=value)
    return _padded(input, pad, "constant", value)


def _inplace_view(name: str):
    """``Tensor.<name>_``: the view ``<name>`` taken in place. The tensor becomes that view (its
    shape, and in autograd the view's node), as PyTorch rebases an in-place view op's history; a
    leaf that requires grad refuses, as PyTorch's."""
    def method(self: Tensor, *args, **kwargs) -> Tensor:
        if self.requires_grad and self.grad_fn is None and is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        # the view is taken of an alias: its node keeps the alias (the old shape) as its input,
        # while this tensor object takes the new shape
        alias = Tensor._wrap(self._data, self.requires_grad, self.grad_fn, self._out_nr, self._vc, self._device)
        alias.__dict__.update({k: v for k, v in self.__dict__.items() if k in _VIEW_ATTRS})
        out = getattr(alias, name)(*args, **kwargs)
        if out.__class__ is BatchedTensor and self.__class__ is BatchedTensor:   # inside vmap: the physical value too
            rebind(self, out)
        self._data, self.grad_fn, self._out_nr, self.requires_grad = out._data, out.grad_fn, out._out_nr, \
            out.requires_grad
        self._vc[0] += 1
        return self
    method.__name__ = name + "_"
    method.__doc__ = f"In-place version of :meth:`{name}` (the tensor's own shape changes)."
    return method


METHODS = ("reshape", "view", "view_as", "reshape_as", "permute", "transpose", "swapaxes", "swapdims",
           "movedim", "moveaxis", "expand", "expand_as", "broadcast_to", "unsqueeze", "squeeze", "flatten",
           "unflatten", "t", "repeat", "tile", "split", "chunk", "unbind", "tensor_split", "flip",
           "fliplr", "flipud", "roll", "narrow", "select", "clone", "contiguous", "tril", "triu", "copy_",
           "as_strided", "as_strided_scatter")
PROPERTIES = {"T": _T, "mT": _mT}
OPERATORS = {"tril_": lambda self, diagonal=0: apply_(_tril, self, diagonal=int(diagonal)),
             "triu_": lambda self, diagonal=0: apply_(_triu, self, diagonal=int(diagonal)),
             **{name + "_": _inplace_view(name) for name in ("squeeze", "unsqueeze", "t", "transpose", "swapaxes",
                                                             "swapdims", "as_strided")}}
