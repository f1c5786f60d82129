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

Anything else (tape, profiler, tracing, capture, anomaly detection, the ``__torch_function__``
protocol) happens behind one flag, ``STATE.slow``: with no subscriber, no mode, no function hook
and anomaly detection off, the eager path pays a single attribute test. Modes are ``Mode`` subclasses (the declared interface
below) and see every op; anomaly detection is a declared slot of the state
(``set_anomaly``: the check to run after each compute op, or None); tape and profiler subscribe to ``op``
events, emitted for compute ops (what a step computed, not the tensors it allocated).

Threads: modes and module scopes are per thread (``base/dispatch_state.py``); ``STATE.slow``
is true while anyone in any thread watches, and ``_observed`` then reads the calling
thread's own modes, so another thread's mode never sees this thread's ops.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
import time

import numpy as np

from ..base import events
from ..base.device import CPU
from ..base.dispatch_state import LOCAL, STATE
from ..base.dtype import _BY_NP, BFLOAT16_NP, FLOATING_KINDS, INEXACT_KINDS, get_default_dtype, result_type
from ..base.grad_mode import GRAD_OFF
from ..base.iter_order import in_iterator_order
from .arguments import not_tensor
from .factories import TENSOR, host_array
from .node import OpNode, _seq as _node_seq, edge_to, node_type
from .registry import ALL, NONE, OTHERS, Op, _c_order
from .tensor import Tensor, _ndarray, _new, _uids

__all__ = ["apply", "eager", "Mode", "STATE", "push_mode", "pop_mode", "module_scope", "set_functions", "PASS"]


_generic = np.generic
_get_ident = threading.get_ident
_clock = time.perf_counter_ns   # an op's start and duration, while someone watches
_OP_SUBSCRIBERS = events._subscribers["op"]  # the live list: a truth test instead of a call
_OpRecorded = events.OpRecorded
_TAKES_FIELDS = events._takes_fields   # the ``op`` subscribers told by fields (``events.subscribe``)
_MADE_SUBSCRIBERS = events._subscribers["made"]


_LOCK = threading.RLock()   # slow is computed from process-wide counts: one writer at a time


def _refresh() -> None:
    with _LOCK:
        STATE.slow = (STATE.watching > 0 or STATE.anomaly is not None or STATE.functions is not None
                      or events.has_subscribers("op"))


class _Watching:
    """Counts one thread in ``STATE.watching`` while it holds a mode: made when its mode stack
    becomes non-empty, dropped when it empties or when the thread ends (its state goes)."""

    __slots__ = ()

    def __init__(self):
        with _LOCK:
            STATE.watching += 1
            _refresh()

    def __del__(self):
        if _LOCK is None:   # interpreter shutdown: module globals are gone
            return
        with _LOCK:
            STATE.watching -= 1
            _refresh()


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
        compiling(name): a compiled function ``name`` is about to trace and compile this call (a new
            guard), running the function under the tracer and the lowering's shape work on meta
            tensors, none of which is the call; a mode that records calls (capture) refuses here.
            The default does nothing.
        call_module(module, forward, args, kwargs): an ``nn.Module`` is being called;
            the default returns ``forward(*args, **kwargs)``.
        repr_suffixes(tensor) -> list: what a printed tensor adds after its ``grad_fn=`` while the mode
            is active (forward AD's ``tangent=tensor(...)``); the default adds nothing.
        inplace(op, target, args, params): an in-place op (``target.op_(*args)``) is about to run; return
            ``target`` when the mode has done it (vmap writes every slice of a batched target and keeps
            its autograd history), None (the default) to have it run as usual.
        composite(name, fn, tensors): a front end that PyTorch runs as its one op ``name`` (``dot``,
            ``addbmm``, ``upsample_bilinear2d``) is about to compute ``fn(*tensors)`` with several ops;
            a mode that treats ops by PyTorch's names (autocast) decides for the whole here. The
            default hands it to the mode below; the ops ``fn`` runs reach ``dispatch`` as usual.

    Properties:
        whole_layer_ops: the mode takes ops that run a recurrent layer over a whole sequence
            (``nn.LSTM``/``nn.GRU``'s ``lstm_scan``/``lstm``) as they are. False (the default):
            while the mode is active those layers run one cell op per time step, which every mode
            understands (autocast casts per primitive; capture and the ONNX export see each step).
        whole_compiled_steps: the mode takes a compiled call's one-node step (``compiled(<Module>)``)
            and its backward as one op each (capture: a replay then runs the generated forward and
            backward). False (the default): while the mode is active a compiled call runs its
            lowered graph, whose ops every mode understands (a tracer sees each).
        kept_forwards: the mode takes a forward that keeps what its backward reads (batch and layer
            norm's statistics, attention's weights) as its two ops, the saving op and a pass-through
            (capture: a replay runs both, and the backward reads the kept arrays). False (the default):
            while the mode is active those forwards run as their one named op and the backward
            recomputes (a tracer, the tape, autocast see the op PyTorch names).

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

    whole_layer_ops = False
    whole_compiled_steps = False
    kept_forwards = False

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

    def compiling(self, name: str) -> None:
        pass

    def call_module(self, module, forward, args: tuple, kwargs: dict):
        return forward(*args, **kwargs)

    def repr_suffixes(self, tensor) -> list:
        return []

    def inplace(self, op, target, args: tuple, params: dict):
        return None

    def composite(self, name: str, fn: Callable, tensors: tuple):
        below = self.below()
        return fn(*tensors) if below is _PLAIN else below.composite(name, fn, tensors)

    def below(self) -> "Mode":
        """The mode under this one in the calling thread's stack (the default hooks when none): where a
        mode that only changes one thing hands the other hooks on."""
        modes = LOCAL.modes
        i = modes.index(self) if self in modes else len(modes)
        return modes[i - 1] if i > 0 else _PLAIN

    def aside(self) -> "_Aside":
        """``with mode.aside():`` this mode is off the stack inside (the ops a handler runs go to the
        modes below it) and back in its place after."""
        return _Aside(self)

    def __enter__(self):
        push_mode(self)
        return self

    def __exit__(self, *exc) -> None:
        pop_mode(self)


_PLAIN = Mode()   # the default hooks, for a stack with nothing below


class _Aside:
    __slots__ = ("mode", "index")

    def __init__(self, mode: Mode):
        self.mode = mode

    def __enter__(self):
        modes = LOCAL.modes
        self.index = modes.index(self.mode)
        del modes[self.index]

    def __exit__(self, *exc):
        LOCAL.modes.insert(self.index, self.mode)


def push_mode(mode: Mode) -> None:
    """Install an interpreter whose ``dispatch(op, args, params)`` receives every op."""
    if not isinstance(mode, Mode):
        raise TypeError(f"push_mode() takes a tapelab.dispatch.Mode, got {type(mode).__name__}")
    local = LOCAL
    local.modes.append(mode)
    if local.watching is None:
        local.watching = _Watching()


def pop_mode(mode) -> None:
    local = LOCAL
    local.modes.remove(mode)
    if not local.modes:
        local.watching = None


def set_anomaly(check) -> None:
    """Install ``check(op, args, result)``, called after every compute op (anomaly detection:
    ``autograd/anomaly.py`` passes its check, so the dispatcher needs no import of it), or None.
    Process-wide, as PyTorch's anomaly mode is."""
    STATE.anomaly = check
    _refresh()


PASS = object()   # what the functions hook returns when no mode or subclass claims the op


def set_functions(hook) -> None:
    """Install the ``__torch_function__`` protocol's ``hook(op, args, params)`` (``core/overrides.py``
    passes it while a TorchFunctionMode is entered or a Tensor subclass takes part), or None. The
    slow path calls it before any dispatcher mode; it returns the op's result or ``PASS``."""
    STATE.functions = hook
    _refresh()


_TENSOR_LIKES: list = [None]   # core/overrides.py's handler for a tensor-like nobody registered (set_tensor_likes)


def set_tensor_likes(handler) -> None:
    """Install ``handler(op, args, params)``, which the general path calls when an operand's type defines
    ``__torch_function__`` without taking part (``core/overrides.py``): the op's result, or ``PASS``."""
    _TENSOR_LIKES[0] = handler


def keeps_forwards() -> bool:
    """Whether a forward may keep what its backward reads as two ops (``Mode.kept_forwards``): nobody
    watches, or only modes of this thread that declare it, with no anomaly check, function hook or
    ``op`` subscriber."""
    if not STATE.slow:
        return True
    modes = STATE.modes
    return (bool(modes) and all(m.kept_forwards for m in modes) and STATE.anomaly is None
            and STATE.functions is None and not events.has_subscribers("op"))


def keeps_forward_state(*inputs: Tensor | None) -> bool:
    """Whether a fused forward keeps its backward's state (layer norm's and batch norm's statistics,
    attention's weights, cross-entropy's log-sum-exps) as a saving op and a pass-through: a gradient will
    be taken of one of ``inputs`` (``None`` skipped) and ``keeps_forwards()``; a watcher that does not keep
    them sees the one named op, whose backward recomputes the state."""
    return (any(t is not None and t.requires_grad for t in inputs)
            and (not GRAD_OFF or _get_ident() not in GRAD_OFF) and keeps_forwards())


def watched() -> bool:
    """Whether a mode, anomaly detection or an ``op`` subscriber watches: ``STATE.slow`` without the
    ``__torch_function__`` hook alone (which a live Tensor subclass keeps installed for every op)."""
    return STATE.watching > 0 or STATE.anomaly is not None or events.has_subscribers("op")


class module_scope:
    """Names the nn.Module whose forward is running (its full path, e.g. ``encoder.layers.0``)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        LOCAL.module_path.append(self.name)

    def __exit__(self, *exc):
        LOCAL.module_path.pop()


def apply(op, *args, **params):
    """Run ``op`` on Tensors (and Python numbers where the op takes them)."""
    if STATE.slow:
        return _observed(op, args, params)
    fast = op.fast
    if fast:
        return fast(args, params)
    if fast is None:
        op.fast = _compile(op)
    return eager(op, args, params)


def composite(name: str, fn: Callable, *tensors):
    """``fn(*tensors)``: the ops of a front end that PyTorch runs as its one op ``name``, handed to
    the modes' ``composite`` hook while any is active (autocast casts for ``name`` as a whole and
    leaves the ops inside alone, as PyTorch's kernel for ``name`` runs below autocast)."""
    if not STATE.slow:
        return fn(*tensors)
    modes = LOCAL.modes
    return modes[-1].composite(name, fn, tensors) if modes else fn(*tensors)


# the params of an operator's or a unary function's call, which have none: one dict for all (a new one
# was ~0.04 us a call); nothing writes a call's params, and the nodes recorded keep this one
_NO_PARAMS: dict = {}


def unary(op: Op) -> Callable[[Tensor], Tensor]:
    """``apply(op, input)`` as a function of one tensor that calls the op's compiled path itself
    (one Python frame fewer per call: the unary ops' public functions and Tensor methods). On the
    slow path the functions hook's ``entry(fn, input)`` may hand the call to a program's Tensor
    subclass first, with ``fn`` as ``func`` (the check other public functions make at their entry)."""
    def fn(input: Tensor) -> Tensor:
        fast = op.fast
        if fast and not STATE.slow:
            return fast((input,), _NO_PARAMS)
        functions = STATE.functions
        if functions is not None:   # a program's subclass gets this public function, as PyTorch's torch.relu
            out = functions.entry(fn, input)
            if out is not PASS:
                return out
        return _observed(op, (input,), {}) if STATE.slow else apply(op, input)   # (apply's frame skipped)
    return fn


_SEQUENCES = (list, tuple)


def refused_operand(other) -> bool:
    """Whether a Tensor operator (``t * other``, ``t += other``) returns NotImplemented for ``other``: a
    list or tuple, which PyTorch's argument parser takes as neither a Tensor nor a Scalar, so that the
    operand's own reflected method runs (a tuple subclass's ``__rmul__``, as zuko's ``NestedTensor``
    in ``dt * state``) or Python raises its TypeError (``unsupported operand type(s)``)."""
    return other.__class__ is not Tensor and isinstance(other, _SEQUENCES)


def array_operand(other) -> Tensor:
    """The failure path of a Tensor operator whose op refused ``other`` (called in its ``except TypeError``):
    a numpy array as a cpu tensor, since PyTorch's ``t + a`` computes (its operator hands the array to
    numpy, whose result comes back a tensor) where ``torch.add(t, a)`` refuses the array; for anything
    else the TypeError being handled is raised again. A check up front would cost every ``t + 1``."""
    if not isinstance(other, np.ndarray):
        raise   # noqa: PLE0704 - the TypeError the operator is handling
    return apply(TENSOR, data=host_array(other, None), device=CPU)


def reflected_failure(other):
    """The failure path of a reflected Tensor operator (``a + t`` reaching ``t.__radd__(a)``): PyTorch's leave a
    numpy array to Python's refusal (NotImplemented: ``unsupported operand type(s)``), as they leave any
    operand they cannot take; anything else raises the TypeError being handled again."""
    if isinstance(other, np.ndarray):
        return NotImplemented
    raise   # noqa: PLE0704 - the TypeError the operator is handling


def binary(op: Op, reflected: bool = False) -> Callable[[Tensor, object], Tensor]:
    """A Tensor operator method, ``apply(op, self, other)`` (``op(other, self)`` when
    ``reflected``), calling the op's compiled path itself as ``unary`` does; NotImplemented for
    a ``refused_operand``, a numpy array made a tensor on the failure path (``array_operand``; reflected:
    ``reflected_failure``)."""
    if reflected:
        def method(self, other):
            cls = other.__class__   # refused_operand, inline; a number's class tested first (isinstance: 0.03 us)
            if cls is not Tensor and cls is not float and cls is not int and isinstance(other, _SEQUENCES):
                return NotImplemented
            fast = op.fast
            try:
                if fast and not STATE.slow:
                    return fast((other, self), _NO_PARAMS)
                return _observed(op, (other, self), {}) if STATE.slow else apply(op, other, self)
            except TypeError:
                return reflected_failure(other)
    else:
        def method(self, other):
            cls = other.__class__   # refused_operand, inline; a number's class tested first (isinstance: 0.03 us)
            if cls is not Tensor and cls is not float and cls is not int and isinstance(other, _SEQUENCES):
                return NotImplemented
            fast = op.fast
            try:
                if fast and not STATE.slow:
                    return fast((self, other), _NO_PARAMS)
                return _observed(op, (self, other), {}) if STATE.slow else apply(op, self, other)
            except TypeError:   # a numpy array (array_operand); a try costs nothing until it catches
                return method(self, array_operand(other))
    method.__name__ = method.__qualname__ = (f"__{'r' if reflected else ''}{op.operator}__" if op.operator
                                             else op.name)
    return method


# numpy 2 takes ~0.6 us longer for `a + 1` than for `a + c`, c a 0-d array of a's dtype (same values:
# the number is cast to that dtype either way); 0 and nan are not cached (-0.0 == 0.0, nan != nan)
_ARITH = frozenset(("add", "subtract", "multiply", "true_divide"))
_CONSTANTS: dict = {}


def _constant(b, dtype):
    """``b`` as a 0-d array of ``dtype``, cached per dtype (bounded)."""
    table = _CONSTANTS.get(dtype)
    if table is None:
        table = _CONSTANTS[dtype] = {}
    c = table.get(b)
    if c is None:
        if len(table) >= 256:
            table.clear()
        try:
            c = np.array(b, dtype)
        except OverflowError:   # an int beyond the dtype: numpy's own scalar path decides
            return b
        table[b] = c
    return c


def _compile(op):
    """The op's own eager path while nobody watches: one closure over its declaration (forward,
    vjp, which values it saves) that runs the forward and builds the result and its OpNode
    directly, for the calls ``eager``'s hot path takes (one tensor, or a tensor and a second
    operand needing no promotion; no view whose base changed); anything else goes to ``eager``.
    Only for compute ops of one output declared as ``Op`` (False otherwise: ``eager`` always);
    a view op's result shares its input's version counter, as in ``_result``. Built once, at the op's first dispatch; nothing here runs with a mode, an ``op``
    subscriber or anomaly detection on (``apply`` sends those to ``_observed``)."""
    if type(op) is Op and op.kind == "factory" and not op.n_extra:
        return _compile_factory(op)
    if type(op) is not Op or op.kind != "compute" or op.n_extra:
        return False
    fwd, vjp, save_output, complex_ok, is_view = op.fwd, op.vjp, op.save_output, op.complex, op.is_view
    ordered = getattr(fwd, "__wrapped__", None)   # a `contiguous` op: its result ordered here, a 0-d one left be
    if ordered is not None:
        fwd = ordered
    saves = 0 if op.saves is NONE else 1 if op.saves is ALL else 2
    promote_none, promote_float = op.promote is None, op.promote == "float"
    arith = op.ufunc in _ARITH   # the forward is that ufunc on its operands: a number may come as a 0-d array
    elementwise = op.elementwise

    def run(args, params):
        n = len(args)
        if n == 2:
            a, b = args
            if not (isinstance(a, Tensor) and (a.requires_grad or not a._vc[0] or a._base is None)):
                return eager(op, args, params)
            x = a._data
            ra = a.requires_grad
            if isinstance(b, Tensor):
                y = b._data
                kind = x.dtype.kind
                # two dtypes only for an op that never promotes (a loss's targets, an index): none complex
                if not (b._device is a._device and (y.dtype is x.dtype or (promote_none and y.dtype.kind != "c"))
                        and (kind == "f" or (promote_none and kind != "c"))
                        and (b.requires_grad or not b._vc[0] or b._base is None)):
                    return eager(op, args, params)
                rb = b.requires_grad
            elif (type(b) is float or type(b) is int) and x.dtype.kind == "f" and x.dtype is not _HALF:
                y = _constant(b, x.dtype) if arith and type(x) is _ndarray and b and b == b else b
                rb = None   # a number: numpy keeps x's order, as ATen
            else:
                return eager(op, args, params)
            dev = a._device
            try:
                out = fwd(dev._xp or dev.xp, x, y, **params) if params else fwd(dev._xp or dev.xp, x, y)
            except Exception as e:  # noqa: BLE001 - _failed re-raises what it does not handle
                out = _failed(op, fwd, dev, (x, y), args, params, e)
            if elementwise and rb is not None and out.ndim > 1 and type(out) is _ndarray and not (
                    x.flags.c_contiguous and (x.size == out.size or y.flags.c_contiguous) and 1 not in out.shape):
                # operands laid out differently, or dimensions of one element (numpy strides them freely,
                # and ATen's ordering reads their strides): ATen's order
                out = in_iterator_order(out, (x, y))
            req = ra or rb
        elif n == 1:
            a = args[0]
            if not isinstance(a, Tensor):
                return eager(op, args, params)
            x = a._data
            kind = x.dtype.kind
            if not ((a.requires_grad or not a._vc[0] or a._base is None)
                    and (kind == "f" or (not promote_float and kind != "c"))):
                return eager(op, args, params)
            dev = a._device
            try:
                out = fwd(dev._xp or dev.xp, x, **params) if params else fwd(dev._xp or dev.xp, x)
            except Exception as e:  # noqa: BLE001
                out = _failed(op, fwd, dev, (x,), args, params, e)
            req = ra = a.requires_grad
            rb = False
        elif n == 3:   # linear's (x, W, b), addcmul, lerp: three tensors of one float dtype and device
            a, b, c = args
            if not (isinstance(a, Tensor) and isinstance(b, Tensor) and isinstance(c, Tensor)):
                return eager(op, args, params)
            x, y, z = a._data, b._data, c._data
            dev = a._device
            if not (x.dtype.kind == "f" and y.dtype is x.dtype and z.dtype is x.dtype and b._device is dev
                    and c._device is dev and (a.requires_grad or not a._vc[0] or a._base is None)
                    and (b.requires_grad or not b._vc[0] or b._base is None)
                    and (c.requires_grad or not c._vc[0] or c._base is None)):
                return eager(op, args, params)
            try:
                out = fwd(dev._xp or dev.xp, x, y, z, **params) if params else fwd(dev._xp or dev.xp, x, y, z)
            except Exception as e:  # noqa: BLE001
                out = _failed(op, fwd, dev, (x, y, z), args, params, e)
            if elementwise and type(out) is _ndarray and out.ndim > 1:
                out = _operands_order(out, args)
            ra, rb, rc = a.requires_grad, b.requires_grad, c.requires_grad
            req = ra or rb or rc
        else:
            return eager(op, args, params)
        if ordered is not None and out.ndim:
            out = _c_order(dev._xp or dev.xp, out)
        if type(out) is not _ndarray and (isinstance(out, _generic) or not hasattr(out, "__dlpack__")):
            out = (dev._xp or dev.xp).asarray(out)  # a numpy scalar from a reduction
        res = _new(Tensor)
        res._data = out
        res._out_nr = 0
        res._device = dev
        res._grad = None
        res._vc = out_vc = a._vc if is_view else [0]   # a view shares its input's version counter
        if req and (not GRAD_OFF or _get_ident() not in GRAD_OFF) and vjp is not None:
            kind = out.dtype.kind
            if kind not in FLOATING_KINDS:
                if kind != "c":
                    req = False
                elif not complex_ok:
                    raise _no_complex_grad(op, args)
        else:
            req = False
        if not req:
            res.requires_grad = False
            res.grad_fn = None
            return res
        res.requires_grad = True
        # edges: (grad_fn, output number) of each input needing a gradient, a leaf's accumulator;
        # edge_to inlined for an op's result whose base (if any) was not written since, and for a
        # leaf whose accumulator exists (a frame less per leaf operand)
        if ra:
            fn = a.grad_fn
            va = a._vc[0]
            if va and a._base is not None:
                ea = edge_to(a)
            elif fn is not None:
                ea = (fn, a._out_nr)
            else:
                try:
                    ea = (a._accum, 0)
                except AttributeError:
                    ea = edge_to(a)
        else:
            ea = None
            va = a._vc[0]
        # versions: a tuple of (input index, version) pairs, one constant while they are all 0
        if n == 1:
            edges = (ea,)
            versions = None if saves == 0 else (((0, va),) if va else _V0) if saves == 1 else ()   # OTHERS: no other input
        elif n == 3:   # (x, W, b): an edge to each input needing a gradient, the versions of all three
            edges = (ea, edge_to(b) if rb else None, edge_to(c) if rc else None)
            vb, vc = b._vc[0], c._vc[0]
            if saves == 0:
                versions = None
            elif saves == 2 and ra + rb + rc == 1:   # OTHERS: the two inputs not needing a gradient
                versions = ((1, vb), (2, vc)) if ra else ((0, va), (2, vc)) if rb else ((0, va), (1, vb))
            else:
                versions = ((0, va), (1, vb), (2, vc)) if va or vb or vc else _V012
        else:
            if rb:
                fn = b.grad_fn
                vb = b._vc[0]
                if vb and b._base is not None:
                    eb = edge_to(b)
                elif fn is not None:
                    eb = (fn, b._out_nr)
                else:
                    try:
                        eb = (b._accum, 0)
                    except AttributeError:
                        eb = edge_to(b)
            else:
                eb = None
            edges = (ea, eb)
            if saves == 0:
                versions = None
            elif rb is None:   # a number: only a's value can be read (OTHERS: not for a's own gradient)
                versions = (((0, va),) if va else _V0) if saves == 1 else ()
            else:
                if not rb:
                    vb = b._vc[0]
                if saves == 1 or (ra and rb):
                    versions = ((0, va), (1, vb)) if va or vb else _V01
                elif ra:   # OTHERS with one input needing a gradient: the other input's value
                    versions = ((1, vb),) if vb else _V1
                else:
                    versions = ((0, va),) if va else _V0
        # _op_node's body written out (one frame less per recorded op); the two fill the same slots
        node = _new(op.node_type or node_type(op, args, params))
        if save_output:   # the output's version too (a view's is its input's)
            ov = out_vc[0]
            out_v = ((-1, ov),) if ov else _OUT
            versions = versions + out_v if versions is not None else out_v
            node.out_data = out
        else:
            node.out_data = None
        node.op = op
        node.inputs = args
        node.params = params
        node.edges = edges
        node.out_vc = out_vc
        node.versions = versions
        node.seq = next(_node_seq)
        node.pre_hooks = node.hooks = node._metadata = node.freed_by = None
        node.module = ""
        res.grad_fn = node
        return res
    # one copy of the code per op: the interpreter specialises an attribute store or call by the type it
    # saw there (Python 3.11+), and each op makes nodes of its own class and calls its own forward, so a
    # step of mixed ops missed at every node store when all ops shared one copy (chain16 recording 12.2 ->
    # 10.8 us)
    run.__code__ = run.__code__.replace()
    return run


# the versions of a node whose saved values were not written in place (the usual case), made once
_V0, _V1, _V01, _V012, _OUT = ((0, 0),), ((1, 0),), ((0, 0), (1, 0)), ((0, 0), (1, 0), (2, 0)), ((-1, 0),)


def _compile_factory(op):
    """A factory's eager path while nobody watches (``zeros``, ``empty``, ``arange``, ``tensor``): no
    operands to check or promote, nothing to record; the device is the ``device`` parameter."""
    fwd = op.fwd

    def run(args, params):
        dev = params.get("device")
        if args or dev is None:
            return eager(op, args, params)
        xp = dev._xp or dev.xp
        try:
            out = fwd(xp, **params)
        except Exception as e:  # noqa: BLE001 - _failed re-raises what it does not handle
            out = _failed(op, fwd, dev, (), args, params, e)
        return _result(op, args, params, dev, False, out)
    return run


def _op_node(op, args, params, edges, out, out_vc, versions, save_output) -> OpNode:
    """A recorded op's node, its slots filled directly (no ``__init__`` frame on the hot path):
    what the backward reads, and the version of every value it will read. The compiled path
    (``_compile``'s ``run``) fills the same slots inline: change both together."""
    node = _new(op.node_type or node_type(op, args, params))
    if save_output:
        if versions is None:
            versions = []
        versions.append((-1, out_vc[0]))
        node.out_data = out
    else:
        node.out_data = None
    node.op = op
    node.inputs = args
    node.params = params
    node.edges = edges
    node.out_vc = out_vc
    node.versions = versions
    node.seq = next(_node_seq)
    node.pre_hooks = node.hooks = node._metadata = node.freed_by = None
    node.module = ""
    return node


def eager(op, args, params, fwd=None):
    """Run ``op`` now (the default of ``Mode.dispatch``); ``fwd`` replaces ``op.fwd`` for this
    call only (capture's spying forward), so no mode ever mutates the shared ``Op``.

    The hot path: one tensor, or a tensor and a second operand (a tensor on the same device
    with the same dtype, or a Python number) that need no promotion, and no view whose base
    began to require grad in place; these call the forward positionally. Everything else goes
    through ``_general``, which checks and promotes operand by operand."""
    if fwd is None:
        fwd = op.fwd
    n = len(args)
    if n == 2:
        a, b = args
        if isinstance(a, Tensor) and (a.requires_grad or a._base is None or not a._vc[0]):
            x = a._data
            if isinstance(b, Tensor):
                y = b._data
                if not (b._device is a._device and y.dtype is x.dtype
                        and (x.dtype.kind == "f" or (op.promote is None and x.dtype.kind != "c"))
                        and (b.requires_grad or b._base is None or not b._vc[0])):
                    return _general(op, args, params, fwd)
                req = a.requires_grad or b.requires_grad
            elif (type(b) is float or type(b) is int) and x.dtype.kind == "f" and x.dtype is not _HALF:
                y = b
                req = a.requires_grad
            else:
                return _general(op, args, params, fwd)
            dev = a._device
        elif ((type(a) is float or type(a) is int) and isinstance(b, Tensor) and b._data.dtype.kind == "f"
              and b._data.dtype is not _HALF and (b.requires_grad or b._base is None or not b._vc[0])):
            # a number first (``2 * t``, ``1 + t``: the reflected operators), as a number second; as the
            # compiled path does for that, an arithmetic ufunc's number a 0-d array (2.2 -> 1.5 us on 16 floats)
            y = b._data
            x = _constant(a, y.dtype) if op.ufunc in _ARITH and type(y) is _ndarray and a and a == a else a
            req = b.requires_grad
            dev = b._device
        else:
            return _general(op, args, params, fwd)
        try:
            out = fwd(dev._xp or dev.xp, x, y, **params) if params else fwd(dev._xp or dev.xp, x, y)
        except Exception as e:  # noqa: BLE001 - _failed re-raises what it does not handle
            out = _failed(op, fwd, dev, (x, y), args, params, e)
        return _result(op, args, params, dev, req, out)
    elif n == 1:
        a = args[0]
        if (isinstance(a, Tensor) and (a.requires_grad or a._base is None or not a._vc[0])
                and (a._data.dtype.kind == "f" or (op.promote != "float" and a._data.dtype.kind != "c"))):
            dev = a._device
            try:
                out = fwd(dev._xp or dev.xp, a._data, **params) if params else fwd(dev._xp or dev.xp, a._data)
            except Exception as e:  # noqa: BLE001
                out = _failed(op, fwd, dev, (a._data,), args, params, e)
            return _result(op, args, params, dev, a.requires_grad, out)
    return _general(op, args, params, fwd)


def _no_tensor(op, args) -> TypeError:
    """PyTorch's refusal of an op given numbers only (``torch.maximum(7, 2)``); ``add``, ``sub``, ``mul``
    and the divisions make their first number a tensor before they get here, as PyTorch's parser does."""
    return not_tensor(args[0] if args else None, op.name)


# operands PyTorch's parser takes neither as a Tensor nor as a Scalar (``torch.add(t, np.ones(3))``,
# ``torch.exp([1.0])``); the operators that take a numpy array (``t + a``) make it a tensor when refused
# (``array_operand``)
_NOT_OPERANDS = (np.ndarray, list, tuple, str)


def _non_operand(op, args, a) -> TypeError:
    """PyTorch's refusal of the operand ``a`` of ``args``, by its position (``core/arguments.py``)."""
    position = next(i for i, x in enumerate(args) if x is a) + 1
    return not_tensor(a, op.name, position)


def _general(op, args, params, fwd):
    """Any operands: checks devices, promotes dtypes, refreshes views whose base changed."""
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
                    return _general(op, _cpu_scalars_moved(op, args), params, fwd)
            elif data.dtype is not dt and data.dtype != dt:   # (the identity first: a batch of one dtype)
                mixed = True
            if a.requires_grad:
                req = True
            elif a._vc[0] and a._base is not None and a._view_grad_fn() is not None:
                req = True  # a view made before its base began to require grad in place
        else:
            arrays.append(a)
            if type(a) is float:
                flt = True
            elif type(a) is not int and type(a) is not bool:
                mixed = True
                if isinstance(a, _NOT_OPERANDS) or (a is None and op.elementwise):   # None: an optional input
                    raise _non_operand(op, args, a)
                if hasattr(type(a), "__torch_function__") and _TENSOR_LIKES[0] is not None:
                    # a tensor-like (Keras's Variable in `x * self.w`): PyTorch hands it any call it is in
                    out = _TENSOR_LIKES[0](op, args, params)
                    if out is not PASS:
                        return out
    if (mixed or dt is not None and dt.kind == "c") and op.complex_error is not None:
        _refuse_complex(op, args, params, dev)
    if op.promote is not None and (mixed or ((flt or op.promote == "float") and dt is not None and dt.kind not in INEXACT_KINDS)):
        promoted = _promote(op, args)  # numpy scalars become Python numbers here
        if promoted is not args:
            return eager(op, promoted, params, fwd)
    if dev is None:  # no Tensor argument: a factory or random draw names its device in params
        if "device" not in params:
            raise _no_tensor(op, args)
        dev = params["device"]
    scaled = flt and keeps_float32(op, dt)
    if scaled:   # PyTorch keeps the number a float32 (numpy's weak scalar would round it to dt first)
        arrays = [np.float32(a) if type(a) is float else a for a in arrays]
    try:
        out = fwd(dev._xp or dev.xp, *arrays, **params)
    except Exception as e:  # noqa: BLE001
        out = _failed(op, fwd, dev, arrays, args, params, e)
    if scaled and out.dtype != dt:
        out = out.astype(dt)   # rounded once
    return _result(op, args, params, dev, req, out)


# PyTorch multiplies and divides a bfloat16 or float16 tensor by a Python float with the number kept
# in float32 (its CPU kernels' opmath), but adds and subtracts it rounded to the tensor's dtype
# first, as numpy does
_SCALED = frozenset(("multiply", "true_divide"))
_HALF = np.dtype(np.float16)


def keeps_float32(op, dt) -> bool:
    """Whether ``op`` on a ``dt`` tensor and a Python float computes with the float kept a float32 (the
    in-place writes, ``x.mul_(0.9)``, ask too)."""
    return (dt is BFLOAT16_NP or dt is _HALF) and op.ufunc in _SCALED


def _failed(op, fwd, dev, arrays, args, params, e: Exception):
    """A forward raised: retry Python ints numpy 2 refused (PyTorch wraps them into the tensor's
    range), or raise PyTorch's exception type naming the op, shapes and dtypes."""
    if isinstance(e, OverflowError) and any(isinstance(a, Tensor) for a in args):
        dt = next(a._data.dtype for a in args if isinstance(a, Tensor))
        xp = dev._xp or dev.xp
        return fwd(xp, *[xp.asarray(a).astype(dt) if type(a) is int else a for a in arrays], **params)
    if isinstance(e, (ValueError, TypeError, IndexError)):
        raise _forward_error(op, args, params, e) from None
    raise e


def _result(op, args, params, dev, req, out):
    """Wrap the forward's array in the new Tensor, and record the node when one is needed.

    The node is built here, slot by slot (no ``OpNode.__init__`` frame, no separate record
    function): this tail runs once per dispatch, so each frame saved is paid back on every op."""
    if op.n_extra:
        out, *extras = out
    if type(out) is not _ndarray and not hasattr(out, "__dlpack__"):
        out = dev.xp.asarray(out)  # a numpy scalar from a reduction; device arrays stay as they are
    elif op.elementwise and len(args) > 1 and type(out) is _ndarray and out.ndim > 1:
        out = _operands_order(out, args)
    res = _new(Tensor)
    res._data = out
    res._out_nr = 0
    res._device = dev
    res._grad = None
    res._vc = out_vc = args[0]._vc if op.is_view else [0]
    if req and (not GRAD_OFF or _get_ident() not in GRAD_OFF) and op.vjp is not None and (
            out.dtype.kind in FLOATING_KINDS or (out.dtype.kind == "c" and _complex_grad(op, args))):
        res.requires_grad = True
        # the OpNode: one edge per argument, and the versions of the values its vjp reads
        # (checked in backward against in-place writes since)
        edges = []
        saves = op.saves
        versions = None if saves is NONE else []
        nreq = i = 0
        req_at = -1
        for a in args:
            if isinstance(a, Tensor):
                vc = a._vc
                if versions is not None:
                    versions.append((i, vc[0]))
                if a.requires_grad:
                    edges.append(edge_to(a))
                    nreq += 1
                    req_at = i
                else:
                    edges.append(None)
            else:
                edges.append(None)
            i += 1
        if nreq == 1 and saves is OTHERS:
            # OTHERS: an input's value is read only for *another* input's gradient
            versions = [v for v in versions if v[0] != req_at]
        node = _op_node(op, args, params, tuple(edges), out, out_vc, versions, op.save_output)
        if STATE.slow:  # scopes are kept only while someone watches: a thread-local read only then
            path = LOCAL.module_path
            if path:
                node.module = path[-1]
        res.grad_fn = node
    else:
        res.requires_grad = False
        res.grad_fn = None
    if op.n_extra:
        return (res, *[Tensor._wrap(dev.xp.asarray(e), False, None, 0, [0], dev) for e in extras])
    return res


def _operands_order(out, args):
    """``out`` in ATen's order of an elementwise result (``base/iter_order.py``) when its tensor operands
    are laid out differently or it has one-element dimensions: numpy's order differs from ATen's only then."""
    arrays = [a._data for a in args if isinstance(a, Tensor)]
    if len(arrays) < 2 or (arrays[0].flags.c_contiguous and arrays[0].size == out.size and 1 not in out.shape):
        return out
    return in_iterator_order(out, arrays)


def _complex_grad(op, args) -> bool:
    """A complex result records a node only for ops whose vjp follows PyTorch's complex convention."""
    if not op.complex:
        raise _no_complex_grad(op, args)
    return True


def _refuse_complex(op, args, params, dev) -> None:
    """Raise the op's declared ``complex_error`` when an operand is complex (PyTorch has no such kernel)."""
    cplx = [a for a in args if (isinstance(a, Tensor) and a._data.dtype.kind == "c") or type(a) is complex]
    if cplx:
        kind, message = op.complex_error
        operands = [a for a in args if isinstance(a, Tensor) or type(a) in _NUMBERS]
        rt = result_type(*operands)
        name = rt.scalar_type if rt.is_complex else "ComplexFloat"
        raise kind(message.format(**{**params, "dtype": name, "device": dev.type if dev is not None else "cpu"}))


def _no_complex_grad(op, args) -> NotImplementedError:
    """A complex result of an op whose vjp is written for real tensors only: refused, not wrong."""
    what = ", ".join(f"{a.dtype.name}{list(a.shape)}" for a in args if isinstance(a, Tensor))
    return NotImplementedError(f"{op.name}({what}): the derivative of {op.name} is not implemented for complex "
                               f"tensors in tapelab; detach the input or compute in real and imaginary parts")


def _promote(op, args):
    """Cast tensor operands to PyTorch's result dtype; Python numbers stay as they are."""
    if not all(isinstance(a, Tensor) or type(a) in _NUMBERS for a in args):
        return tuple(a if isinstance(a, Tensor) or type(a) in _NUMBERS else _as_operand(a, op, args) for a in args)
    rt = result_type(*args)
    if op.promote == "float" and not rt.is_floating_point and not rt.is_complex:
        rt = get_default_dtype()
    if all(a._data.dtype == rt.np for a in args if isinstance(a, Tensor)):
        return args
    return tuple(a.to(rt) if isinstance(a, Tensor) and a._data.dtype != rt.np else a for a in args)


_NUMBERS = (int, float, bool, complex)  # exactly: numpy's float64 subclasses float but promotes as float64


def _as_operand(a, op, args):
    """numpy scalars become Python numbers (PyTorch's parser takes them as Scalars); anything else that is
    neither a Tensor nor a number (None, an object) is PyTorch's refusal."""
    if isinstance(a, np.generic):
        return a.item()
    raise _non_operand(op, args, a)


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
    for d in reversed(range(nd)):    # ATen's infer_size names the last dim that differs
        sizes = {p[d] for p in padded} - {1}
        if len(sizes) > 1:
            a, b = [p[d] for p in padded if p[d] != 1][:2]
            return (f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                    f"non-singleton dimension {d}")
    return f"shapes {[list(s) for s in shapes]} cannot be broadcast together"


# ops PyTorch also runs through TensorIterator (so a 0-d cpu tensor may join them), besides elementwise maps
_ITERATOR_OPS = frozenset({"fill", "masked_fill"})


def _cpu_scalars_moved(op, args):
    """PyTorch's exception to one device per op: an elementwise op takes 0-d cpu tensors beside tensors
    of one other device (``x_cuda * torch.tensor(2.0)``, ``loss + cpu_scalar``). They are moved there
    by a differentiable copy, so their gradient comes back to the cpu; any other mix is refused."""
    devs = {a._device for a in args if isinstance(a, Tensor)}
    other = [d for d in devs if d.type != "cpu"]
    if not (op.elementwise or op.name in _ITERATOR_OPS) or len(other) != 1 or len(devs) != 2 or any(
            isinstance(a, Tensor) and a._device is not other[0] and a._data.ndim for a in args):
        _device_mismatch(op, args)
    return tuple(a.to(other[0]) if isinstance(a, Tensor) and a._device is not other[0] else a for a in args)


def _device_mismatch(op, args):
    devs = ", ".join(f"{a.device} {list(a.shape)}" for a in args if isinstance(a, Tensor))
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                       f"devices in {op.name}: {devs}. Move them with .to(device) first.")


def _observed(op, args, params):
    """The slow path: the ``__torch_function__`` hook (``set_functions``) may claim the op first;
    then modes take over dispatch; otherwise run eagerly, then check and tell.

    Modes see every op; ``op`` events (tape, profiler) and anomaly checks are about what
    was computed, so factories and random draws run without them."""
    functions = STATE.functions
    if functions is not None:
        out = functions(op, args, params)
        if out is not PASS:
            return out
    local = LOCAL
    modes = local.modes
    if modes:
        return modes[-1].dispatch(op, args, params)
    if op.kind != "compute":
        if _MADE_SUBSCRIBERS:   # the profiler: factories are events of their own, not ``op`` events
            start = time.perf_counter_ns()
            out = eager(op, args, params)
            made = events.Made(op, params, out, start, time.perf_counter_ns() - start)
            for fn in tuple(_MADE_SUBSCRIBERS):
                fn(made)
            return out
        return eager(op, args, params)
    fast = op.fast
    if fast is None:   # an op first run while someone watches (a notebook under %tape on from its start)
        fast = op.fast = _compile(op)
    start = _clock()
    out = fast(args, params) if fast else eager(op, args, params)
    dur = _clock() - start
    res = out[0] if isinstance(out, tuple) else out
    node = res.grad_fn
    path = local.module_path
    module = path[-1] if path else ""
    if fast and module and node is not None:   # the compiled path keeps no module scope (``_result`` does)
        node.module = module
    if STATE.anomaly is not None:
        STATE.anomaly(op, args, res)
    if _OP_SUBSCRIBERS:
        res._uid_ = uid = next(_uids)   # a new op result gets its uid here (no lazy lookup)
        _tell(op, args, res, uid, node, res.requires_grad, start, dur, module)
    return out


def _tell(op, args, res, uid: int, node, requires_grad: bool, start: int, dur: int, module: str) -> None:
    """Emit the ``op`` event of an op that made ``res`` (told as output ``uid``; ``node`` its
    graph node, or None; ``module`` the innermost module scope, or "")."""
    seq = next(STATE._seq)
    if node is not None:
        node._tape_seq = seq  # links backward steps of this node to the recorded op
        try:
            name = node.node_name   # an op's node (``OpNode``): fixed by its type, or None (named by its inputs)
        except AttributeError:      # another kind of node (a tensor-like's ``__torch_function__`` made the result)
            name = None
        if name is None:
            name = node.name()
    else:
        name = ""
    data = res._data
    n = len(args)
    # Operands' uids read inline (Tensor._uid's frame skipped); one never told before (a ``.grad``, a
    # relu's saved output) gets its uid here, as ``Tensor._uid`` gives it
    if n == 2 and isinstance(args[0], Tensor):   # most ops: one to three operands, written out
        a, b = args
        try:
            ua = a._uid_
        except AttributeError:
            a._uid_ = ua = next(_uids)
        if isinstance(b, Tensor):
            try:
                ub = b._uid_
            except AttributeError:
                b._uid_ = ub = next(_uids)
            uids, shapes = (ua, ub), (a._data.shape, b._data.shape)
        else:
            uids, shapes = (ua, None), (a._data.shape, ())
    elif n == 1 and isinstance(args[0], Tensor):
        a = args[0]
        try:
            ua = a._uid_
        except AttributeError:
            a._uid_ = ua = next(_uids)
        uids, shapes = (ua,), (a._data.shape,)
    elif n == 3 and isinstance(args[0], Tensor) and isinstance(args[1], Tensor) and isinstance(args[2], Tensor):
        a, b, c = args   # a linear (input, weight, bias), its vjp, cross-entropy's vjp
        try:
            ua = a._uid_
        except AttributeError:
            a._uid_ = ua = next(_uids)
        try:
            ub = b._uid_
        except AttributeError:
            b._uid_ = ub = next(_uids)
        try:
            uc = c._uid_
        except AttributeError:
            c._uid_ = uc = next(_uids)
        uids, shapes = (ua, ub, uc), (a._data.shape, b._data.shape, c._data.shape)
    else:
        uids, shapes = [], []
        for a in args:
            if isinstance(a, Tensor):
                try:
                    uids.append(a._uid_)
                except AttributeError:
                    a._uid_ = u = next(_uids)
                    uids.append(u)
                shapes.append(a._data.shape)
            else:
                uids.append(None)
                shapes.append(())
        uids, shapes = tuple(uids), tuple(shapes)
    fields = (seq, op.name, uids, shapes, uid, data.shape, _BY_NP[data.dtype].name,   # OpRecorded's order
              res._device._name, requires_grad, dur, start, module, name)
    subs = _OP_SUBSCRIBERS
    if len(subs) == 1:   # events.emit, inlined for the usual one subscriber (a tape or the profiler)
        fn = subs[0]
        if fn in _TAKES_FIELDS:   # a recorder (the tape): no event object
            fn(fields, (args, res))
        else:
            fn(_OpRecorded(*fields, (args, res)))
        return
    ev = None
    for fn in tuple(subs):
        if fn in _TAKES_FIELDS:
            fn(fields, (args, res))
        else:
            if ev is None:
                ev = _OpRecorded(*fields, (args, res))
            fn(ev)


def observed_write(op, target: Tensor, args: tuple, write: Callable[[], bool]) -> bool:
    """An in-place op that needs no autograd, while only ``op`` subscribers or anomaly detection
    watch (no mode, no function hook): ``write()`` puts the result straight into ``target``'s
    memory, as the unobserved path does, instead of a temporary copied back (a tape or profiler
    around an optimizer step used to pay an allocation and a copy per parameter). The op is told
    as ``_observed`` tells the temporary's: inputs ``target`` and ``args``, a fresh output id, no
    node. False (nothing written, nothing told) when ``write`` declines or someone else watches."""
    if LOCAL.modes or STATE.functions is not None:
        return False
    start = _clock()
    if not write():
        return False
    dur = _clock() - start
    operands = (target, *args)
    if STATE.anomaly is not None:
        STATE.anomaly(op, operands, target)
    if _OP_SUBSCRIBERS:
        path = LOCAL.module_path
        _tell(op, operands, target, next(_uids), None, False, start, dur, path[-1] if path else "")
    return True
