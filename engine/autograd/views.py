"""View and in-place autograd, in one module: what makes an in-place op on a tensor, or on a
view of one, differentiate as PyTorch's does.

``apply_`` is the in-place form of ``apply``. A view op's public function stores
``out._base`` (the root tensor whose memory the view aliases; see ops/movement.py ``_mark``).
An in-place op on a view while autograd records makes the base's grad_fn a ``CopySlices``
over its old graph and regenerates the view's grad_fn as an ``as_strided`` view of the
base's new graph (PyTorch's rebase_history). Other views of the same base then hold a stale
grad_fn: ``Tensor._view_grad_fn`` regenerates it when the view is next used (the dispatcher
asks; PyTorch does this in the grad_fn accessor, comparing version counters).

Above the dispatcher (it applies ops) and below the op families, which call ``apply_``.
The Tensor methods ``detach``, ``detach_`` and ``_view_grad_fn`` are declared here and
bound by ``ops.install_methods``.
"""
from __future__ import annotations

import math

import numpy as np

from ..base.dispatch_state import STATE
from ..base.dtype import from_np
from ..base.grad_mode import is_grad_enabled
from ..core.dispatch import _NUMBERS, apply, eager, keeps_float32, observed_write
from ..core.node import DETACHED_IN_PLACE, Node, OpNode, _seq
from ..core.storage import _root
from ..core.registry import ALL, NONE, Op
from ..core.tensor import Tensor, sum_to

__all__ = ["apply_", "fill_outside_autograd", "CopySlices", "DETACH", "strided_geometry", "nograd_view_error", "overlap_error",
           "WRITING"]


WRITING: list = []   # the operand an in-place op being applied writes into (``_write_inplace``), innermost last


def apply_(op, target, *args, **params):
    """In-place form: computes ``op(target, *args)`` and writes it into ``target``'s memory.

    On a view (``target._base`` set) with autograd recording, the base's graph is rebased as
    PyTorch's CopySlices does, and the view's grad_fn is regenerated over it (``_inplace_view``).
    """
    if STATE.slow and STATE.modes:
        done = STATE.modes[-1].inplace(op, target, args, params)
        if done is not None:
            return done
    grad_on = is_grad_enabled()
    if (op.ufunc is not None or op.fwd_out is not None) and target._base is None and not (
            grad_on and (target.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in args))):
        if op.ufunc is not None and not params:
            if not STATE.slow:
                return _ufunc_inplace(op, target, args, params)
            if observed_write(op, target, args, lambda: _ufunc_write(op, target, args)):
                return target
        elif op.fwd_out is not None and op.elementwise:   # p.add_(g, alpha=-lr), ema.lerp_(p, w): one pass, in place
            if (_fwd_out_write(op, target, args, params) if not STATE.slow else
                    observed_write(op, target, args, lambda: _fwd_out_write(op, target, args, params))):
                return target
    if grad_on:
        if target._base is not None:
            return _inplace_view(op, target, args, params)
        if target.requires_grad:
            fn = target.grad_fn
            if fn is None:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            if fn.plain and fn.op.is_view and fn.out_vc is target._vc:
                _untracked_view(op, fn)
        _refresh_args(args)
    out = _write_inplace(op, target, args, params, grad_on)
    if out.grad_fn is not None:
        target.grad_fn, target._out_nr, target.requires_grad = out.grad_fn, 0, True
    return target


def _ufunc_inplace(op, target, args, params):
    """Outside autograd: one ufunc call writing into ``target`` (no temporary, no copy)."""
    if _ufunc_write(op, target, args):
        return target
    return _write_inplace(op, target, args, params, False)   # the general path names what is wrong


def _ufunc_write(op, target, args) -> bool:
    """Write ``op(target, *args)`` into ``target`` with one ufunc call; False, with nothing
    written, for operands it does not take (another device, an array-like, PyTorch's cast or
    broadcast errors): the general path handles those."""
    arrays = []
    for a in args:
        if isinstance(a, Tensor):
            if a._device is not target._device:
                return False
            arrays.append(a._data)
        elif type(a) in _NUMBERS:
            arrays.append(a)
        else:
            return False
    data = target._data
    if keeps_float32(op, data.dtype):   # x.mul_(0.9) in bfloat16: the float32 product rounded once, as x.mul(0.9)
        arrays = [np.float32(a) if type(a) is float else a for a in arrays]
    try:
        getattr(target._device.xp, op.ufunc)(data, *arrays, out=data, casting="same_kind")
    except (TypeError, ValueError):
        return False
    target._vc[0] += 1
    return True


def _operands_into(target: Tensor, args) -> list | None:
    """The operands' arrays (numbers as they are) for a write into ``target``'s own memory: None unless
    ``target`` is a writeable C-contiguous numpy array and every operand a numpy tensor of its dtype and
    device broadcasting to its shape, or a Python number beside a float ``target``."""
    data = target._data
    if type(data) is not np.ndarray or not data.flags.c_contiguous or not data.flags.writeable:
        return None
    arrays = []
    for a in args:
        if type(a) in (float, int) and data.dtype.kind == "f":   # a number the forward itself takes (lerp's weight)
            arrays.append(a)
            continue
        if not isinstance(a, Tensor) or a._device is not target._device:
            return None
        x = a._data
        if type(x) is not np.ndarray or x.dtype != data.dtype or x.ndim > data.ndim or (
                x.shape != data.shape and np.broadcast_shapes(x.shape, data.shape) != data.shape):
            return None
        arrays.append(x)
    return arrays


def fill_outside_autograd(target: Tensor, value) -> bool:
    """``fill_``/``zero_`` with nothing watching (no mode, tape or profiler) and nothing to record:
    ``ndarray.fill`` on ``target``'s memory, where ``full_like`` and a copy made an array and two
    passes (``zero_`` of 16k floats 5.9 us, PyTorch 1.0). False, with nothing written, where the
    general path is needed: a view or a tensor that requires grad under grad mode, a value that is
    not a number, a nonzero value into an integer or bool tensor (PyTorch's overflow checks)."""
    if STATE.slow or type(value) not in _NUMBERS:
        return False
    data = target._data
    if type(data) is not np.ndarray or not data.flags.writeable or (value != 0 and data.dtype.kind not in "fc"):
        return False
    if (target.requires_grad or target._base is not None) and is_grad_enabled():
        return False
    data.fill(value)
    target._vc[0] += 1
    return True


def overlap_error() -> RuntimeError:
    """PyTorch's refusal to write into a tensor whose elements share memory (an expanded view)."""
    return RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a single "
                        "memory location. Please clone() the tensor before performing the operation.")


def _fwd_out_write(op, target, args, params) -> bool:
    """Write ``op(target, *args, **params)`` into ``target`` through the op's elementwise ``fwd_out``
    (``add``/``sub`` with ``alpha``, ``lerp``); False, with nothing written, unless every operand is a
    numpy tensor of ``target``'s dtype and device broadcasting to ``target``'s shape or a Python number
    beside a float ``target``, and ``target`` is C-contiguous: the general path (promotion, casts,
    errors) takes the rest."""
    data = target._data
    if data.dtype.kind in "biu":   # the result's dtype may not be target's (exp_ of integers): the general path refuses
        return False
    arrays = _operands_into(target, args)
    if arrays is None:
        return False
    op.fwd_out(np, data, *arrays, out=(data,), **params)
    target._vc[0] += 1
    return True


def _fill_through(op, target, args, params):
    """``fill_``/``zero_`` of an expanded view write its one memory location per element, as PyTorch's
    (every element gets the same value, so the overlap is harmless): through a writeable alias of
    the read-only stride-0 array over the same memory."""
    data = target._data
    root = data
    while isinstance(root.base, np.ndarray):
        root = root.base
    if type(data) is not np.ndarray or not root.flags.writeable or not root.flags.c_contiguous:
        raise overlap_error()
    offset = data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    out = apply(op, target, *args, **params)
    np.ndarray(data.shape, data.dtype, buffer=root, offset=offset, strides=data.strides)[...] = out._data
    target._vc[0] += 1
    return out


def _write_inplace(op, target, args, params, grad_on):
    """Run ``op`` on (a snapshot of) ``target`` and write the result into it; returns the result."""
    if not getattr(target._data.flags, "writeable", True):   # a stride-0 view (expand); sparse arrays have none
        if op.name == "fill" and not args[0].__class__ is Tensor:
            return _fill_through(op, target, args, params)
        raise overlap_error()
    src = target
    if grad_on and (target.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in args)):
        # the recorded node must see target's value and graph position from before the write
        keep = op.saves is ALL or (op.saves is not NONE and
                                   any(isinstance(a, Tensor) and a.requires_grad for a in args))
        data = target._data.copy() if keep else target._data
        if keep and STATE.slow and STATE.modes:
            STATE.modes[-1].copy(target._data, data)  # capture (tapelab.graphs) replays this copy
        # bookkeeping, not an op: target's pre-write value keeps target's graph position
        src = Tensor._wrap(data, target.requires_grad,
                           target.grad_fn, target._out_nr, [0] if keep else target._vc, target._device)
        if not keep and not op.save_output and not STATE.slow:
            write = _ufunc_into(op, target, args, params)
            if write is not None:   # the node reads no value of target's: the ufunc writes straight into it
                out = eager(op, (src, *args), params, write)
                if out._data is not data:   # the result came back re-laid out: its values are target's already
                    data[...] = out._data
                target._vc[0] += 1
                return out
    if STATE.slow:   # observers see the op as the in-place one (the profiler's aten::addcmul_)
        WRITING.append(src)
        try:
            out = apply(op, src, *args, **params)
        finally:
            WRITING.pop()
    else:
        out = apply(op, src, *args, **params)
    if isinstance(out, tuple):
        out = out[0]
    if out._data.dtype != target._data.dtype and not _can_cast(out._data.dtype, target._data.dtype):
        raise RuntimeError(f"result type {from_np(out._data.dtype).scalar_type} can't be cast to "
                           f"the desired output type {target.dtype.scalar_type}")
    if out._data.shape != target._data.shape:
        raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the broadcast shape "
                           f"{list(out.shape)} (in-place {op.name}_)")
    if STATE.slow and STATE.modes:
        STATE.modes[-1].write(target._data, out._data)  # capture (tapelab.graphs) records the write
    target._data[...] = out._data
    target._vc[0] += 1
    return out


_F32_F64 = (np.dtype(np.float32), np.dtype(np.float64))   # half types compute in float32 (their forwards say so)


def _ufunc_into(op, target, args, params):
    """A forward writing ``op``'s ufunc into ``target``'s memory, for a recorded in-place op whose node
    keeps neither target's old value nor the result (``out += identity`` in a residual block: the result
    and a copy back cost 2x torch's); None unless ``target`` is a contiguous numpy array and every
    operand a numpy tensor of its dtype (float32 or float64) broadcasting to its shape, or a number."""
    data = target._data
    if op.ufunc is None or params or data.dtype not in _F32_F64 or _operands_into(target, args) is None:
        return None
    ufunc = getattr(np, op.ufunc)
    return lambda xp, *arrays: ufunc(*arrays, out=data)


_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2, "V": 2, "c": 3}   # V: ml_dtypes' bfloat16


def _can_cast(src, dst) -> bool:
    return _CATEGORY[src.kind] <= _CATEGORY[dst.kind]


# ---------------------------------------------------------------- views
# ``detach``: the same memory and version counter, outside every graph. Not a tracked view
# (no ``_base``), so an in-place op on it rebases nothing, as in PyTorch.
DETACH = Op("detach", lambda xp, a: a, saves=NONE, is_view=True, onnx=lambda g, a: a)

def _view_grad_fn(t):
    """``t``'s grad_fn, regenerated over its base's current graph if that changed since ``t``'s
    was made (a view's grad_fn older than its base's is stale). Sets ``t.grad_fn`` and
    ``t.requires_grad`` accordingly. Cheap to call on any tensor: non-views return at once."""
    fn = t.grad_fn
    b = t._base
    if b is None or t._view_nograd:
        return fn
    bfn = b.grad_fn
    if bfn is None or (fn is not None and fn.seq > bfn.seq):
        return fn
    try:
        geom = _geometry(b, t)
    except RuntimeError:
        return fn  # the base's data was replaced: the view no longer follows it
    node = _strided_node(b, geom, t._vc)
    t.grad_fn, t._out_nr, t.requires_grad = node, 0, True
    return node


def _strided_node(base, geom, vc):
    """AsStridedBackward0: the grad_fn of a view of ``base`` over ``base``'s current graph."""
    node = OpNode(_as_strided, (base,), {"geom": geom}, ((base.grad_fn, base._out_nr),), None, vc, None)
    if STATE.slow and STATE.module_path:
        node.module = STATE.module_path[-1]
    return node


def _refresh_args(args) -> None:
    for a in args:
        if isinstance(a, Tensor) and a._base is not None and a._vc[0]:
            _view_grad_fn(a)


def _untracked_view(op, fn):
    raise RuntimeError(f"in-place {op.name}_() on the output of {fn.op.name}, a view whose base tapelab does not "
                       f"track: the base's gradient would be wrong. Apply {op.name} out of place, or clone() the "
                       f"view first.")


_MULTI_MSG = ("This view is the output of a function that returns multiple views. Such functions do not allow "
              "the output views to be modified inplace. You should replace the inplace operation by an "
              "out-of-place one.")


def nograd_view_error(target, view: str | None, out_nr: int = 0) -> RuntimeError:
    """PyTorch's refusal of an in-place op with grad mode on into a view made in no_grad mode, or
    into ``view`` (the name of the view op, ``Select``) made from one in grad mode."""
    what = ("A view was created in no_grad mode" if view is None else
            f"Output {out_nr} of {view} is a view of a view which was created in "
            f"no_grad mode")
    return RuntimeError(what + " and is being modified inplace with grad mode enabled. " + (
        _MULTI_MSG if target._view_multi else
        "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
        "moving both the view and the inplace either both inside the no_grad block (if you don't want the "
        "inplace to be tracked) or both outside (if you want the inplace to be tracked)."))


def _inplace_view(op, target, args, params):
    """``apply_`` on a view with grad mode on (PyTorch's rebase_history / CopySlices)."""
    base = target._base
    if target._vc[0]:
        _view_grad_fn(target)
    _refresh_args(args)
    if not (target.requires_grad or base.requires_grad or
            any(isinstance(a, Tensor) and a.requires_grad for a in args)):
        _write_inplace(op, target, args, params, True)   # nothing to record
        return target
    if target._view_nograd:
        fn = target.grad_fn   # made in grad mode from a view made in no_grad mode: PyTorch names its node
        raise nograd_view_error(target, None if fn is None else fn.name().removesuffix("Backward0"), target._out_nr)
    if target._view_multi:
        if not base.requires_grad:
            raise RuntimeError("A view was created in no_grad mode and is being modified inplace with grad "
                               "mode enabled. " + _MULTI_MSG)
        raise RuntimeError(f"Output {target._out_nr} of {target._view_multi} is a view and is being modified "
                           f"inplace. " + _MULTI_MSG)
    if base.requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    data = target._data
    if any(s == 0 and n > 1 for s, n in zip(data.strides, data.shape)) and not (
            op.name == "fill" and args[0].__class__ is not Tensor):   # fill_ of a number writes through
        raise overlap_error()
    out = _write_inplace(op, target, args, params, True)
    fn = out.grad_fn
    if fn is None:
        return target
    geom = _geometry(base, target)
    bfn = base.grad_fn
    cs = CopySlices((bfn, base._out_nr) if bfn is not None else None, geom, fn)
    if STATE.slow and STATE.module_path:
        cs.module = STATE.module_path[-1]
    base.grad_fn, base._out_nr, base.requires_grad = cs, 0, True
    target.grad_fn, target._out_nr, target.requires_grad = _strided_node(base, geom, target._vc), 0, True
    return target


class CopySlices(Node):
    """The base's grad_fn after an in-place op on one of its views (PyTorch's CopySlices).

    ``fn`` is the node of the in-place op applied to the view's old value; ``geom`` says where
    the view lies in the base. Backward: the gradient of the base outside the view passes
    through to the base's old graph; inside it goes through ``fn``, whose gradient for the
    view's old value is written back into that region; ``fn``'s other inputs get theirs.
    Edges: the base's old grad_fn, then ``fn``'s edges past the first.
    """

    __slots__ = ("fn", "geom", "module")

    def __init__(self, base_edge, geom, fn):
        self.fn, self.geom, self.module = fn, geom, ""
        self.edges = (base_edge,) + tuple(fn.edges[1:])
        self.seq = next(_seq)
        self.pre_hooks = self.hooks = self._metadata = None

    def name(self) -> str:
        """PyTorch's: the C++ class's qualified name (its Python type is ``CopySlices``)."""
        return "torch::autograd::CopySlices"

    def __repr__(self) -> str:
        return f"<CopySlices object at {hex(id(self))}>"      # PyTorch's: the Python type's name

    @property
    def saved_tensors(self) -> tuple:
        return self.fn.saved_tensors

    def run(self, grads):
        g = grads[0]
        if g is None:
            return (None,) * len(self.edges)
        res = self.fn.run([apply(_as_strided, g, geom=self.geom)])
        gb = None
        if self.edges[0] is not None:
            r0 = res[0]
            if r0 is not None and r0._data.dtype != g._data.dtype:
                r0 = r0.to(g.dtype)
            gb = apply(_as_strided_scatter, g, 0 if r0 is None else r0, geom=self.geom)
        return (gb, *res[1:])

    def release(self) -> None:
        self.fn.release()


# ---------------------------------------------------------------- where a view lies in its base
class _Geom:
    """Where a view lies in its base: ``take`` reads that region of a base-shaped array,
    ``put`` writes into it. Relative to the base's C-order layout (strided) when the base is
    C-contiguous, else through a precomputed array of flat C-order positions."""

    __slots__ = ("base_shape", "shape", "strides", "offset", "flat")

    def __init__(self, base_shape, shape, strides, offset, flat):
        self.base_shape, self.shape, self.strides, self.offset, self.flat = (
            base_shape, shape, strides, offset, flat)

    def __repr__(self) -> str:
        return f"_Geom(size={list(self.shape)}, stride={list(self.strides)}, storage_offset={self.offset})"

    def _region(self, xp, flat_arr):
        isz = flat_arr.itemsize
        return xp.lib.stride_tricks.as_strided(flat_arr[self.offset:], self.shape,
                                               tuple(s * isz for s in self.strides))

    def take(self, xp, a):
        if self.flat is not None:
            return a.reshape(-1)[self.flat]
        if not math.prod(self.shape):
            return xp.zeros(self.shape, a.dtype)
        return self._region(xp, xp.ascontiguousarray(a).reshape(-1)).copy()

    def put(self, xp, out, src) -> None:
        """``out`` is C-contiguous and base-shaped."""
        if self.flat is not None:
            out.reshape(-1)[self.flat] = xp.broadcast_to(src, self.shape)
        elif math.prod(self.shape):
            self._region(xp, out.reshape(-1))[...] = src

    def back(self, xp, g):
        """The adjoint of ``take``: ``g`` written into a zero base-shaped array."""
        out = xp.zeros(self.base_shape, g.dtype)
        self.put(xp, out, g)
        return out

    def gradients(self) -> "_Geom":
        return self


# ---------------------------------------------------------------- the public as_strided
_Layout = tuple   # (size, stride, storage offset), in elements of a storage


def _positions(xp, layout: _Layout):
    """The storage positions of a layout's elements, in C order."""
    size, stride, offset = layout
    pos = xp.full((), offset, np.int64)
    for n, s in zip(size, stride):
        pos = pos[..., None] + xp.arange(n, dtype=np.int64) * s
    return pos.reshape(-1)


def _restride(xp, a, src: _Layout, dst: _Layout, norm):
    """Place ``a``'s elements at the storage positions of ``src`` (summing where they meet), divide
    each position by how often layout ``norm`` lists it, and read the result at ``dst``'s positions.
    PyTorch's as_strided_backward is this with src the view's layout and dst the input's."""
    lo = min(src[2], dst[2])
    si, di = _positions(xp, src) - lo, _positions(xp, dst) - lo
    n = int(max(int(si.max()) if si.size else -1, int(di.max()) if di.size else -1)) + 1
    buf = xp.zeros(n, a.dtype)
    xp.add.at(buf, si, a.reshape(-1))
    if norm is not None:
        count = xp.bincount(_positions(xp, norm) - lo, minlength=n)[:n]
        buf = buf / xp.maximum(count, 1).astype(buf.dtype)
    return buf[di].reshape(dst[0])


class _Restride:
    """Gradient plumbing of ``as_strided``: ``take`` moves values from layout ``src`` to ``dst`` of a
    shared storage (``_restride``), ``back`` is its adjoint (``dst`` to ``src``). ``norm`` is the
    input's layout when its elements overlap in memory (PyTorch divides by the overlap there)."""

    __slots__ = ("src", "dst", "norm")

    def __init__(self, src: _Layout, dst: _Layout, norm):
        self.src, self.dst, self.norm = src, dst, norm

    def __repr__(self) -> str:
        (size, stride, offset) = self.dst
        return f"as_strided(size={list(size)}, stride={list(stride)}, storage_offset={offset})"

    def take(self, xp, a):
        return _restride(xp, a, self.src, self.dst, self.norm)

    def back(self, xp, g):
        return _restride(xp, g, self.dst, self.src, self.norm)

    def gradients(self) -> "_Restride":
        return _Restride(self.src, self.dst, self.norm)

    def put(self, xp, out, src) -> None:
        """Write ``src`` where layout ``dst`` meets layout ``src`` in ``out`` (C-contiguous, ``src``-shaped):
        ``as_strided_scatter``'s forward."""
        lo = min(self.src[2], self.dst[2])
        si, di = _positions(xp, self.src) - lo, _positions(xp, self.dst) - lo
        n = int(max(int(si.max()) if si.size else -1, int(di.max()) if di.size else -1)) + 1
        slot = xp.full(n, -1, np.int64)
        slot[si] = xp.arange(si.size, dtype=np.int64)
        hit = slot[di]
        inside = hit >= 0
        out.reshape(-1)[hit[inside]] = xp.broadcast_to(src, self.dst[0]).reshape(-1)[inside]


class _Strided(_Restride):
    """``as_strided``'s geometry: ``take`` is the view itself (the input's storage read through the
    requested layout); its gradients move values between the two layouts (``_Restride``)."""

    __slots__ = ()

    def take(self, xp, a):
        size, stride, offset = self.dst
        root = _root(a)
        isz = a.itemsize
        if isinstance(a, np.ndarray) and root.flags.c_contiguous:
            return np.ndarray(size, a.dtype, buffer=root, offset=offset * isz, strides=[s * isz for s in stride])
        if offset != self.src[2]:
            raise NotImplementedError(f"as_strided: a storage offset other than the input's ({self.src[2]}) on "
                                      f"{type(a).__name__} arrays")
        return xp.lib.stride_tricks.as_strided(a, size, [s * isz for s in stride])


def _overlaps(size, stride) -> bool:
    """Whether two elements of a layout share a storage position (exact: sorts the dims by stride)."""
    dims = sorted((s, n) for n, s in zip(size, stride) if n > 1)
    if any(n == 0 for n in size):
        return False
    reach = 0
    for s, n in dims:
        if s <= reach:
            return True
        reach += (n - 1) * s
    return False


def strided_geometry(x: Tensor, size, stride, storage_offset) -> _Strided:
    """The geometry of ``x.as_strided(size, stride, storage_offset)``, checked as PyTorch checks it."""
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    isz = x._data.itemsize
    own = x.storage_offset()
    offset = own if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    need = 0 if 0 in size else (offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1) * isz
    have = x.untyped_storage().nbytes()
    if need > have:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {isz} requiring a storage size of {need} are out of bounds for storage of "
                           f"size {have}")
    src = (tuple(x._data.shape), x.stride(), own)
    return _Strided(src, (size, stride, offset), src if _overlaps(*src[:2]) else None)


def _addr(a) -> int:
    ai = getattr(a, "__array_interface__", None)
    return ai["data"][0] if ai is not None else a.data.ptr


def _extent(a) -> tuple:
    """Byte offsets (lowest, highest) an array touches, from its first element."""
    return (sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides)),
            sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides)))


def _geometry(base: Tensor, view: Tensor) -> _Geom:
    """Where ``view`` lies in ``base``; RuntimeError if it no longer aliases it (``base.data = ...``)."""
    b, v = base._data, view._data
    isz = b.itemsize
    off = _addr(v) - _addr(b)
    (blo, bhi), (vlo, vhi) = _extent(b), _extent(v)
    if v.size and (b.dtype != v.dtype or b.size == 0 or off + vlo < blo or off + vhi > bhi or off % isz):
        raise RuntimeError(f"this view of shape {list(v.shape)} no longer aliases its base of shape "
                           f"{list(b.shape)} (was the base's .data replaced?): autograd cannot relate them")
    if b.flags.c_contiguous:
        return _Geom(b.shape, v.shape, tuple(s // isz for s in v.strides), off // isz, None)
    # any strided base: lay the base's C-order positions out in memory as the base is laid
    # out, then read them back through the view's strides
    ast = np.lib.stride_tricks.as_strided
    lo, hi = blo, bhi
    mem = np.zeros((hi - lo) // isz + 1, np.int64)
    ast(mem[-lo // isz:], b.shape, tuple(s // isz * 8 for s in b.strides))[...] = (
        np.arange(b.size).reshape(b.shape))
    flat = ast(mem[(off - lo) // isz:], v.shape, tuple(s // isz * 8 for s in v.strides)).copy()
    xp = base._device.xp
    return _Geom(b.shape, v.shape, None, None, flat if xp is np else xp.asarray(flat))


def _as_strided_scatter_fwd(xp, x, src, *, geom):
    out = xp.array(x, order="C")
    geom.put(xp, out, src)
    return out


def _as_strided_scatter_vjp(g, out, x, src, *, geom):
    gx = apply(_as_strided_scatter, g, 0, geom=geom) if x.requires_grad else None
    gs = None
    if isinstance(src, Tensor) and src.requires_grad:
        gs = sum_to(apply(_as_strided, g, geom=geom), src._data.shape)
    return gx, gs


# ``as_strided`` (public: ``strided_geometry`` makes its geometry, ``take`` is a view of the input's
# storage), the grad_fn of a view regenerated over its base's graph after an in-place op
# (AsStridedBackward0, a ``_Geom``), and the gradient plumbing of CopySlices (a ``_Geom`` or
# ``_Restride``: ``take`` copies, as it only ever reads gradients). ``back`` is ``take``'s adjoint.
_as_strided = Op("as_strided", lambda xp, x, *, geom: geom.take(xp, x),
                 lambda g, out, x, *, geom: (apply(_as_strided_backward, g, geom=geom),), saves=NONE, is_view=True)
_as_strided_backward = Op("as_strided_backward", lambda xp, g, *, geom: geom.back(xp, g),
                          lambda g, out, gv, *, geom: (apply(_as_strided, g, geom=geom.gradients()),), saves=NONE)
_as_strided_scatter = Op("as_strided_scatter", _as_strided_scatter_fwd, _as_strided_scatter_vjp,
                         saves=NONE)


# ---------------------------------------------------------------- Tensor methods declared here
def detach(self: Tensor) -> Tensor:
    """A view sharing memory and version counter, outside the graph (a dispatched op)."""
    return apply(DETACH, self)


def detach_(self: Tensor) -> Tensor:
    if self._base is not None:
        raise RuntimeError("Can't detach views in-place. Use detach() instead. If you are using "
                           "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as True, "
                           "gradients are views of DDP buckets, and hence detach_() cannot be called on these "
                           "gradients. To fix this error, please refer to the Optimizer.zero_grad() function in "
                           "torch/optim/optimizer.py as the solution.")
    if self.grad_fn is not None:   # nodes that took it as an input still owe it a gradient
        DETACHED_IN_PLACE[0] = True
    self.grad_fn, self.requires_grad = None, False
    return self


OPERATORS = {"detach": detach, "detach_": detach_, "_view_grad_fn": _view_grad_fn}
