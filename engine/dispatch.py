"""The dispatcher: the one choke point every tensor operation passes.

``apply(op, *args, **params)`` promotes dtypes, checks devices, runs the forward in the
device's array namespace, wraps the result and records an autograd node when needed.
Every tensor is born here: factories (``zeros``, ``arange``, ``tensor(data)``) and random
draws (``randn``, ``bernoulli``) are ops too (``op.kind`` says which), so a mode sees them.

Devices: an op runs on the device of its Tensor arguments (all the same, or an error).
An op with no Tensor argument (a factory, most random draws) names its device in the
param ``device`` (a ``tapelab.device``) and its dtype in ``dtype`` (a ``tapelab.dtype``);
its forward receives both like any other param, and a random forward draws on the host
from the param ``generator`` (``None``: the default generator) before moving the numbers
to ``xp``.

Anything else (tape, profiler, tracing, capture, anomaly detection) happens behind one
flag, ``STATE.slow``: with no subscriber, no mode and anomaly detection off, the eager path
pays a single attribute test. Modes are ``Mode`` subclasses (the declared interface
below) and see every op; anomaly detection is a declared flag of the state
(``set_anomaly``), checked after each compute op; tape and profiler subscribe to ``op``
events, emitted for compute ops (what a step computed, not the tensors it allocated).
"""
from __future__ import annotations

import time

from .base import events
from .base.dispatch_state import STATE
from .base.dtype import _BY_NP, from_np, get_default_dtype, result_type
from .base.grad_mode import STATE as GRAD
from .autograd.graph import OpNode
from .ops.registry import ALL, NONE, OTHERS, Op
from .tensor import Tensor, _ndarray, _new, _uids

__all__ = ["apply", "apply_", "eager", "Mode", "STATE", "push_mode", "pop_mode", "module_scope"]


_OP_SUBSCRIBERS = events._subscribers["op"]  # the live list: a truth test instead of a call


def _refresh() -> None:
    STATE.slow = bool(STATE.modes) or STATE.anomaly or events.has_subscribers("op")


events.on_change(_refresh)


class Mode:
    """An interpreter of tensor work: the one declared interface every mode implements.

    In the spirit of PyTorch's ``TorchDispatchMode``: subclass, override the hooks you need
    (each has a default that leaves eager behaviour unchanged) and enter it with ``with``.
    The innermost (last entered) mode receives ``dispatch``, ``write``, ``copy``,
    ``accumulate`` and ``call_module``; ``host_read`` goes to every active mode, since any
    of them may refuse it.

    Hooks:
        dispatch(op, args, params): every op, factories and random draws included (their
            ``Op`` says which: ``op.kind``); return what ``apply`` returns. The default
            runs it eagerly; ``eager(op, args, params, fwd=...)`` runs it with a
            replacement forward (capture's ``out=`` form) without touching the ``Op``.
        write(target, src): the array ``src`` is about to be written into the array
            ``target`` (an in-place op, outside ``apply``'s result).
        copy(src, copy): ``copy`` was made from ``src`` outside ``apply`` (the value an
            in-place op's autograd node must see).
        accumulate(var, grad) -> bool: ``grad`` is about to be accumulated into
            ``var.grad``. Return True to have an existing ``.grad`` updated through the
            dispatcher (an in-place ``add_`` the mode then sees) instead of by bookkeeping.
        host_read(tensor, what): a value is about to be copied to the host; ``what`` is
            ``"item"``, ``"tolist"``, ``"numpy"``, ``"bool"`` or ``"print"``.
        call_module(module, forward, args, kwargs): an ``nn.Module`` is being called;
            the default returns ``forward(*args, **kwargs)``.

    >>> class CountOps(Mode):
    ...     def __init__(self): self.names = []
    ...     def dispatch(self, op, args, params):
    ...         self.names.append(op.name)
    ...         return super().dispatch(op, args, params)
    >>> with CountOps() as m:
    ...     (tapelab.ones(2) * 3).sum()
    >>> m.names
    ['full', 'mul', 'sum']
    """

    def dispatch(self, op, args: tuple, params: dict):
        return eager(op, args, params)

    def write(self, target, src) -> None:
        pass

    def copy(self, src, copy) -> None:
        pass

    def accumulate(self, var, grad) -> bool:
        return False

    def host_read(self, tensor, what: str) -> None:
        pass

    def call_module(self, module, forward, args: tuple, kwargs: dict):
        return forward(*args, **kwargs)

    def __enter__(self):
        push_mode(self)
        return self

    def __exit__(self, *exc) -> None:
        pop_mode(self)


def push_mode(mode: Mode) -> None:
    """Install an interpreter whose ``dispatch(op, args, params)`` receives every op."""
    if not isinstance(mode, Mode):
        raise TypeError(f"push_mode() takes a tapelab.dispatch.Mode, got {type(mode).__name__}")
    STATE.modes.append(mode)
    _refresh()


def pop_mode(mode) -> None:
    STATE.modes.remove(mode)
    _refresh()


def set_anomaly(enabled: bool) -> None:
    STATE.anomaly = enabled
    _refresh()


class module_scope:
    """Names the nn.Module whose forward is running (its full path, e.g. ``encoder.layers.0``)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        STATE.module_path.append(self.name)

    def __exit__(self, *exc):
        STATE.module_path.pop()


def apply(op, *args, **params):
    """Run ``op`` on Tensors (and Python numbers where the op takes them)."""
    if STATE.slow:
        return _observed(op, args, params)
    return eager(op, args, params)


def eager(op, args, params, fwd=None):
    """Run ``op`` now (the default of ``Mode.dispatch``); ``fwd`` replaces ``op.fwd`` for this
    call only (capture's spying forward), so no mode ever mutates the shared ``Op``."""
    arrays = []
    dev = dt = None
    req = mixed = flt = False
    for a in args:
        if isinstance(a, Tensor):
            data = a._data
            arrays.append(data)
            if dev is not a._device:
                if dev is None:
                    dev, dt = a._device, data.dtype
                else:
                    _device_mismatch(op, args)
            elif data.dtype != dt:
                mixed = True
            if a.requires_grad:
                req = True
            elif a._vc[0] and a._base is not None and _view_grad_fn(a) is not None:
                req = True  # a view made before its base began to require grad in place
        else:
            arrays.append(a)
            if type(a) is float:
                flt = True
            elif type(a) is not int and type(a) is not bool:
                mixed = True
    if op.promote is not None and (mixed or ((flt or op.promote == "float") and dt is not None and dt.kind != "f")):
        promoted = _promote(op, args)  # array-like operands become Tensors here
        if promoted is not args:
            return eager(op, promoted, params, fwd)
    if dev is None:  # no Tensor argument: a factory or random draw names its device in params
        dev = params["device"]
    if fwd is None:
        fwd = op.fwd
    xp = dev._xp or dev.xp
    try:
        out = fwd(xp, *arrays, **params)
    except OverflowError:
        # numpy 2 rejects Python ints outside an integer tensor's range; PyTorch wraps them
        out = fwd(xp, *[xp.asarray(a).astype(dt) if type(a) is int else a for a in arrays], **params)
    except (ValueError, TypeError, IndexError) as e:
        raise _forward_error(op, args, params, e) from None
    if op.n_extra:
        out, *extras = out
    if type(out) is not _ndarray and not hasattr(out, "__dlpack__"):
        out = dev.xp.asarray(out)  # a numpy scalar from a reduction; device arrays stay as they are
    res = _new(Tensor)
    res._data = out
    res._out_nr = 0
    res._device = dev
    res.grad = None
    res._vc = args[0]._vc if op.is_view else [0]
    if req and GRAD.enabled and out.dtype.kind == "f" and op.vjp is not None:
        res.requires_grad = True
        res.grad_fn = _record(op, args, params, out, res._vc)
    else:
        res.requires_grad = False
        res.grad_fn = None
    if op.n_extra:
        return (res, *[Tensor._wrap(dev.xp.asarray(e), False, None, 0, [0], dev) for e in extras])
    return res


def _record(op, args, params, out, out_vc):
    edges = []
    versions = [] if op.saves is not NONE else None
    nreq = i = 0
    req_at = -1
    for a in args:
        if isinstance(a, Tensor):
            if versions is not None:
                versions.append((i, a._vc[0]))
            if a.requires_grad:
                fn = a.grad_fn
                if a._vc[0] and a._base is not None:  # a view whose base changed in place since
                    fn = _view_grad_fn(a)
                edges.append((fn, a._out_nr) if fn is not None else (a._accumulator(), 0))
                nreq += 1
                req_at = i
            else:
                edges.append(None)
        else:
            edges.append(None)
        i += 1
    if versions is not None and nreq == 1 and op.saves is OTHERS:
        # OTHERS: an input's value is read only for *another* input's gradient
        versions = [v for v in versions if v[0] != req_at]
    if op.save_output:
        if versions is None:
            versions = []
        versions.append((-1, out_vc[0]))
    node = OpNode(op, args, params, tuple(edges), out if op.save_output else None, out_vc, versions)
    if STATE.module_path:
        node.module = STATE.module_path[-1]
    return node


def _promote(op, args):
    """Cast tensor operands to PyTorch's result dtype; Python numbers stay as they are."""
    if not all(isinstance(a, Tensor) or type(a) in _NUMBERS for a in args):
        return tuple(a if isinstance(a, Tensor) or type(a) in _NUMBERS else _as_operand(a, op) for a in args)
    rt = result_type(*args)
    if op.promote == "float" and not rt.is_floating_point:
        rt = get_default_dtype()
    if all(a._data.dtype == rt.np for a in args if isinstance(a, Tensor)):
        return args
    return tuple(a.to(rt) if isinstance(a, Tensor) and a._data.dtype != rt.np else a for a in args)


_NUMBERS = (int, float, bool)  # exactly: numpy's float64 subclasses float but promotes as float64


def _as_operand(a, op):
    """numpy scalars become Python numbers, array-likes become tensors."""
    import numpy as np
    if isinstance(a, np.generic):
        return a.item()
    if isinstance(a, (np.ndarray, list, tuple)):
        from .creation import tensor
        return tensor(a)
    raise TypeError(f"{op.name}(): expected Tensor or number operands, got {type(a).__name__}")


def _forward_error(op, args, params, e: Exception) -> Exception:
    """Turn a backend error into PyTorch's exception type, naming the op, shapes and dtypes."""
    shapes = [tuple(a.shape) for a in args if isinstance(a, Tensor)]
    what = ", ".join(f"{a.dtype.name}{list(a.shape)}@{a.device}" if isinstance(a, Tensor) else repr(a)
                     for a in args)
    msg = str(e)
    if "broadcast" in msg and len(shapes) >= 2:
        return RuntimeError(_broadcast_message(shapes) + f" (in {op.name}({what}))")
    kind = IndexError if isinstance(e, IndexError) else RuntimeError
    return kind(f"{op.name}({what}{', ' if params else ''}"
                f"{', '.join(f'{k}={v!r}' for k, v in params.items())}) failed: {msg}")


def _broadcast_message(shapes) -> str:
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    for d in range(nd):
        sizes = {p[d] for p in padded} - {1}
        if len(sizes) > 1:
            a, b = [p[d] for p in padded if p[d] != 1][:2]
            return (f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                    f"non-singleton dimension {d}")
    return f"shapes {[list(s) for s in shapes]} cannot be broadcast together"


def _device_mismatch(op, args):
    devs = ", ".join(f"{a.device} {list(a.shape)}" for a in args if isinstance(a, Tensor))
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                       f"devices in {op.name}: {devs}. Move them with .to(device) first.")


def _observed(op, args, params):
    """The slow path: modes take over dispatch; otherwise run eagerly, then check and tell.

    Modes see every op; ``op`` events (tape, profiler) and anomaly checks are about what
    was computed, so factories and random draws run without them."""
    if STATE.modes:
        return STATE.modes[-1].dispatch(op, args, params)
    if op.kind != "compute":
        return eager(op, args, params)
    start = time.perf_counter_ns()
    out = eager(op, args, params)
    dur = time.perf_counter_ns() - start
    res = out[0] if isinstance(out, tuple) else out
    if STATE.anomaly:
        from .autograd.anomaly import check_forward
        check_forward(op, args, res)
    if _OP_SUBSCRIBERS:
        seq = next(STATE._seq)
        node = res.grad_fn
        if node is not None:
            node._tape_seq = seq  # links backward steps of this node to the recorded op
        data = res._data
        uids = []
        shapes = []
        for a in args:
            if isinstance(a, Tensor):
                uids.append(a._uid())
                shapes.append(a._data.shape)
            else:
                uids.append(None)
                shapes.append(())
        uid = res._uid_ = next(_uids)   # a new op result gets its uid here (no lazy lookup)
        path = STATE.module_path
        events.emit("op", events.OpRecorded(   # positional: field order of OpRecorded
            seq, op.name, tuple(uids), tuple(shapes), uid, data.shape, _BY_NP[data.dtype].name,
            res._device._name, res.requires_grad, dur, start, path[-1] if path else "",
            node.name() if node is not None else "", (args, res)))
    return out


def apply_(op, target, *args, **params):
    """In-place form: computes ``op(target, *args)`` and writes it into ``target``'s memory.

    On a view (``target._base`` set) with autograd recording, the base's graph is rebased as
    PyTorch's CopySlices does, and the view's grad_fn is regenerated over it (``_inplace_view``).
    """
    grad_on = GRAD.enabled
    if op.ufunc is not None and not STATE.slow and target._base is None and not (
            grad_on and (target.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in args))):
        return _ufunc_inplace(op, target, args, params)
    if grad_on:
        if target._base is not None:
            return _inplace_view(op, target, args, params)
        if target.requires_grad:
            fn = target.grad_fn
            if fn is None:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            if type(fn) is OpNode and fn.op.is_view and fn.out_vc is target._vc:
                _untracked_view(op, fn)
        _refresh_args(args)
    out = _write_inplace(op, target, args, params, grad_on)
    if out.grad_fn is not None:
        target.grad_fn, target._out_nr, target.requires_grad = out.grad_fn, 0, True
    return target


def _ufunc_inplace(op, target, args, params):
    """Outside autograd: one ufunc call writing into ``target`` (no temporary, no copy)."""
    arrays = []
    for a in args:
        if isinstance(a, Tensor):
            if a._device is not target._device:
                return _write_inplace(op, target, args, params, False)  # the slow path names the mismatch
            arrays.append(a._data)
        elif type(a) in _NUMBERS:
            arrays.append(a)
        else:
            return _write_inplace(op, target, args, params, False)
    data = target._data
    try:
        getattr(target._device.xp, op.ufunc)(data, *arrays, out=data, casting="same_kind")
    except (TypeError, ValueError):
        return _write_inplace(op, target, args, params, False)  # PyTorch's cast / broadcast errors
    target._vc[0] += 1
    return target


def _write_inplace(op, target, args, params, grad_on):
    """Run ``op`` on (a snapshot of) ``target`` and write the result into it; returns the result."""
    src = target
    if grad_on and (target.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in args)):
        # the recorded node must see target's value and graph position from before the write
        keep = op.saves is ALL or (op.saves is not NONE and
                                   any(isinstance(a, Tensor) and a.requires_grad for a in args))
        data = target._data.copy() if keep else target._data
        if keep and STATE.modes:
            STATE.modes[-1].copy(target._data, data)  # capture (tapelab.graphs) replays this copy
        # bookkeeping, not an op: target's pre-write value keeps target's graph position
        src = Tensor._wrap(data, target.requires_grad,
                           target.grad_fn, target._out_nr, [0] if keep else target._vc, target._device)
    out = apply(op, src, *args, **params)
    if isinstance(out, tuple):
        out = out[0]
    if out._data.dtype != target._data.dtype and not _can_cast(out._data.dtype, target._data.dtype):
        raise RuntimeError(f"result type {from_np(out._data.dtype).name.capitalize()} can't be cast to "
                           f"the desired output type {target.dtype.name.capitalize()} (in-place {op.name}_)")
    if out._data.shape != target._data.shape:
        raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the broadcast shape "
                           f"{list(out.shape)} (in-place {op.name}_)")
    if STATE.modes:
        STATE.modes[-1].write(target._data, out._data)  # capture (tapelab.graphs) records the write
    target._data[...] = out._data
    target._vc[0] += 1
    return out


def _can_cast(src, dst) -> bool:
    order = "biuf"
    return order.index(src.kind if src.kind != "u" else "i") <= order.index(dst.kind if dst.kind != "u" else "i")


# ---------------------------------------------------------------- views and in-place ops
# ``detach``: the same memory and version counter, outside every graph. Not a tracked view
# (no ``_base``), so an in-place op on it rebases nothing, as in PyTorch.
DETACH = Op("detach", lambda xp, a: a, saves=NONE, is_view=True)

# A view op's public function stores ``out._base`` (the root tensor whose memory the view
# aliases; see ops/movement.py ``_mark``). An in-place op on a view while autograd records
# makes the base's grad_fn a CopySlices over its old graph and regenerates the view's grad_fn
# as an as_strided view of the base's new graph. Other views of the same base then hold a
# stale grad_fn: ``_view_grad_fn`` regenerates it when the view is next used (PyTorch does
# this in the grad_fn accessor, comparing version counters).

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
    from .ops.movement import _geometry
    try:
        geom = _geometry(b, t)
    except RuntimeError:
        return fn  # the base's data was replaced: the view no longer follows it
    node = _strided_node(b, geom, t._vc)
    t.grad_fn, t._out_nr, t.requires_grad = node, 0, True
    return node


def _strided_node(base, geom, vc):
    """AsStridedBackward0: the grad_fn of a view of ``base`` over ``base``'s current graph."""
    from .ops.movement import _as_strided
    node = OpNode(_as_strided, (base,), {"geom": geom}, ((base.grad_fn, base._out_nr),), None, vc, None)
    if STATE.module_path:
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
        raise RuntimeError("A view was created in no_grad mode and is being modified inplace with grad mode "
                           "enabled. " + (_MULTI_MSG if target._view_multi else
                           "Given that this use case is ambiguous and error-prone, it is forbidden. You can "
                           "clarify your code by moving both the view and the inplace either both inside the "
                           "no_grad block (if you don't want the inplace to be tracked) or both outside (if you "
                           "want the inplace to be tracked)."))
    if target._view_multi:
        if not base.requires_grad:
            raise RuntimeError("A view was created in no_grad mode and is being modified inplace with grad "
                               "mode enabled. " + _MULTI_MSG)
        raise RuntimeError(f"Output {target._out_nr} of {target._view_multi} is a view and is being modified "
                           f"inplace. " + _MULTI_MSG)
    if base.requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    data = target._data
    if any(s == 0 and n > 1 for s, n in zip(data.strides, data.shape)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")
    out = _write_inplace(op, target, args, params, True)
    fn = out.grad_fn
    if fn is None:
        return target
    from .autograd.graph import CopySlices
    from .ops.movement import _geometry
    geom = _geometry(base, target)
    bfn = base.grad_fn
    cs = CopySlices((bfn, base._out_nr) if bfn is not None else None, geom, fn)
    if STATE.module_path:
        cs.module = STATE.module_path[-1]
    base.grad_fn, base._out_nr, base.requires_grad = cs, 0, True
    target.grad_fn, target._out_nr, target.requires_grad = _strided_node(base, geom, target._vc), 0, True
    return target
