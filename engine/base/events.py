"""Engine events: the only way the engine talks to anything above it.

Payloads are plain dataclasses. ``emit`` is called behind one flag test in the
dispatcher (``dispatch.STATE.slow``), so with no subscriber the hot path is unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable

__all__ = ["subscribe", "subscribe_group", "unsubscribe_group", "emit", "has_subscribers", "Subscription", "OpRecorded",
           "op_fields", "BackwardStep", "BackwardPass", "GraphTraced", "Collective", "Made", "KINDS"]

KINDS = ("op", "backward_step", "backward_pass", "graph_traced", "capture_done", "profile_ready", "collective", "made")
_subscribers: dict[str, list[Callable]] = {k: [] for k in KINDS}
_takes_fields: set = set()   # ``op`` subscribers that take the event's fields, not an ``OpRecorded`` (``subscribe``)
_on_change: list[Callable[[], None]] = []


@dataclass(slots=True)
class OpRecorded:
    """One op dispatched: what the tape, profiler and live views see."""
    seq: int
    op: str
    inputs: tuple          # ids of input tensors (None for Python numbers)
    input_shapes: tuple
    output: int
    shape: tuple
    dtype: str
    device: str
    requires_grad: bool
    duration_ns: int
    start_ns: int
    module: str = ""
    grad_fn: str = ""      # name of the node the output got ("" when it needs no gradient)
    tensors: tuple = field(default=(), repr=False)   # (inputs, output) Tensor objects, for keepers


# An ``OpRecorded``'s fields but ``tensors``, in order, as one tuple: what a ``fields=True`` subscriber gets
op_fields = attrgetter("seq", "op", "inputs", "input_shapes", "output", "shape", "dtype", "device", "requires_grad",
                       "duration_ns", "start_ns", "module", "grad_fn")


class Made:
    """One factory or random draw run (``zeros``, ``randn``, ``uniform_``): the ``made`` event, emitted
    while anyone listens (the profiler names these as PyTorch's factories). Not an ``op`` event:
    the tape and the views record computations only. ``params`` are the op's; ``result`` its output."""

    __slots__ = ("op", "params", "result", "start_ns", "duration_ns")

    def __init__(self, op, params: dict, result, start_ns: int, duration_ns: int):
        self.op, self.params, self.result, self.start_ns, self.duration_ns = op, params, result, start_ns, duration_ns


class BackwardStep:
    """One node executed by the backward walk (a plain slotted class: one is made per node)."""

    __slots__ = ("index", "node", "grad_outputs", "grad_inputs", "start_ns", "duration_ns")

    def __init__(self, index: int, node, grad_outputs: tuple, grad_inputs: tuple,
                 start_ns: int = 0, duration_ns: int = 0):
        self.index, self.node, self.grad_outputs, self.grad_inputs = index, node, grad_outputs, grad_inputs
        self.start_ns, self.duration_ns = start_ns, duration_ns  # timed only while someone listens

    @property
    def name(self) -> str:
        return self.node.name()

    def __repr__(self) -> str:
        return f"BackwardStep(index={self.index}, name={self.name!r})"


class BackwardPass:
    """One backward walk (``backward()``, ``autograd.grad``, a ``backward_steps`` run to its end) done:
    the ``backward_pass`` event, emitted while anyone listens. ``steps`` is how many nodes it ran, as
    many as the ``backward_step`` events it emits while those have listeners. A listener that needs
    only where a pass ends (``LiveTape`` counting a step it does not record) takes this one event
    instead of one per node, so the walk keeps the paths it takes while nobody watches."""

    __slots__ = ("steps",)

    def __init__(self, steps: int):
        self.steps = steps

    def __repr__(self) -> str:
        return f"BackwardPass(steps={self.steps})"


@dataclass(slots=True)
class GraphTraced:
    """A graph ``tapelab.fx`` just traced: the ``graph_traced`` event, emitted by
    ``symbolic_trace`` / ``Tracer.trace`` and ``trace_from_tape`` while anyone listens.

    ``graph`` is the ``fx.Graph``; ``module`` the ``GraphModule`` built from it (None when
    ``Tracer.trace`` was called directly, which builds none); ``root`` what was traced (the
    ``nn.Module`` or function); ``name`` the root's name; ``how`` ``"symbolic_trace"`` or
    ``"trace_from_tape"``.
    """
    graph: Any
    module: Any
    root: Any
    name: str
    how: str


@dataclass(slots=True)
class Collective:
    """One collective or point-to-point transfer of ``tapelab.distributed``, done: the
    ``collective`` event, emitted by the group's communication thread (``tid``) while anyone listens.
    ``nbytes`` is what this rank put on the wire; times are ``time.perf_counter_ns`` values."""
    name: str
    nbytes: int
    start_ns: int
    duration_ns: int
    group_size: int
    tid: int
    shape: tuple = ()
    dtype: str = ""


class Subscription:
    """Handle returned by ``subscribe``; call it (or ``.unsubscribe()``) to stop listening."""

    __slots__ = ("kind", "fn", "fields")

    def __init__(self, kind: str, fn: Callable, fields: bool = False):
        self.kind, self.fn, self.fields = kind, fn, fields

    def unsubscribe(self) -> None:
        if self._remove():
            _changed()

    def _remove(self) -> bool:
        """Stop listening, without telling the dispatcher (the caller does): whether it listened."""
        subs = _subscribers[self.kind]
        if self.fn not in subs:
            return False
        subs.remove(self.fn)
        if self.fn not in subs:
            _takes_fields.discard(self.fn)
        return True

    __call__ = unsubscribe

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unsubscribe()


def subscribe(kind: str, fn: Callable, fields: bool = False) -> Subscription:
    """Call ``fn(payload)`` for every event of ``kind`` (one of ``events.KINDS``).

    ``fields=True`` (``op`` only) calls ``fn(fields, tensors)`` instead: the event's fields but
    ``tensors`` as one plain tuple, in ``OpRecorded``'s order (``op_fields``), and its tensors. While
    such a subscriber listens alone the dispatcher makes no event object per op: a recorder that
    stores what it keeps (the tape) pays for a tuple only."""
    sub = _add(kind, fn, fields)
    _changed()
    return sub


def subscribe_group(*specs: tuple) -> list[Subscription]:
    """``subscribe(*spec)`` for each ``(kind, fn)`` or ``(kind, fn, fields)``, with the dispatcher told
    once: a scope opened around every step (``tapelab.tape()``) pays its subscriptions there, where its
    code runs cold after the step's kernels. All or none: a spec refused undoes the ones before it."""
    subs: list[Subscription] = []
    try:
        for spec in specs:
            subs.append(_add(*spec))
    except BaseException:
        for sub in subs:
            sub._remove()
        raise
    finally:
        if subs:
            _changed()
    return subs


def unsubscribe_group(subs) -> None:
    """``unsubscribe`` each of ``subs``, with the dispatcher told once."""
    removed = False
    for sub in subs:
        removed = sub._remove() or removed
    if removed:
        _changed()


def _add(kind: str, fn: Callable, fields: bool = False) -> Subscription:
    """``subscribe``'s checks and listening, without telling the dispatcher (the caller does)."""
    if kind not in _subscribers:
        raise ValueError(f"unknown event kind {kind!r}; expected one of {', '.join(KINDS)}")
    if fields:
        if kind != "op":
            raise ValueError(f"subscribe: fields=True is for 'op' events only, got {kind!r}")
        if fn in _subscribers[kind]:
            raise ValueError("subscribe: this function already listens to 'op' events for OpRecorded payloads")
        _takes_fields.add(fn)
    elif fn in _takes_fields:
        raise ValueError("subscribe: this function already listens to 'op' events for their fields")
    _subscribers[kind].append(fn)
    return Subscription(kind, fn, fields)


def has_subscribers(kind: str) -> bool:
    return bool(_subscribers[kind])


def emit(kind: str, payload) -> None:
    for fn in tuple(_subscribers[kind]):
        if fn in _takes_fields:
            fn(op_fields(payload), payload.tensors)
        else:
            fn(payload)


def on_change(fn: Callable[[], None]) -> None:
    """Internal: the dispatcher recomputes its fast-path flag when subscriptions change."""
    _on_change.append(fn)


def _changed() -> None:
    for fn in _on_change:
        fn()
