"""The tape: a recording scope over dispatch and backward events.

``with tapelab.tape() as t:`` subscribes to the ``op`` and ``backward_step`` events and
keeps one plain record per op dispatched (and per backward node executed) inside the
scope, in order. Records refer to tensors and graph nodes only weakly, so recording
never keeps a graph alive; ``keep_values=True`` adds value/gradient summaries and keeps
the tensors themselves.

>>> with tapelab.tape() as t:
...     loss = (x * w).sum()
...     loss.backward()
>>> [(n.kind, n.op) for n in t.nodes]
[('forward', 'mul'), ('forward', 'sum'), ('backward', 'SumBackward0'), ...]
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field, fields

from . import events
from .autograd.engine import running_node

__all__ = ["tape", "TapeNode", "summarize"]

_weakref = weakref.ref


@dataclass(slots=True)
class TapeNode:
    """One recorded step.

    ``kind`` is ``"forward"`` for a dispatched op and ``"backward"`` for a node run by the
    backward walk. Forward records carry the op's global ``seq`` (equal to the created
    node's ``grad_fn.tape_seq``); a backward record's ``forward_seq`` names the forward
    record of the node it ran, and so does that of an op dispatched *by* a vjp
    (``phase == "backward"``). For backward records ``input_shapes`` are the incoming
    gradients' shapes and ``output_shapes`` the produced ones.
    """
    index: int
    kind: str
    op: str
    seq: int | None = None
    forward_seq: int | None = None
    phase: str = "forward"
    inputs: tuple = ()
    output: int | None = None
    input_shapes: tuple = ()
    shape: tuple = ()
    output_shapes: tuple = ()
    dtype: str = ""
    device: str = ""
    requires_grad: bool = False
    start_ns: int = 0
    duration_ns: int = 0
    module: str = ""
    grad_fn: str = ""
    value: dict | None = None
    grad: dict | None = None
    _refs: tuple = field(default=(), repr=False, compare=False)

    @property
    def tensor(self):
        """The output tensor (forward records) if it is still alive (or kept), else None."""
        if not self._refs:
            return None
        ref = self._refs[0]
        return ref() if isinstance(ref, weakref.ref) else ref

    @property
    def node(self):
        """The graph node (``grad_fn`` of the output, or the node a backward step ran), if alive."""
        if len(self._refs) < 2:
            return None
        ref = self._refs[1]
        return ref() if isinstance(ref, weakref.ref) else ref

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (tuples become lists)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "_refs"}


def _plain(v):
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def summarize(t) -> dict | None:
    """min/max/mean/std/norm of a tensor over its finite values, plus nan/inf counts.

    Computed on the backend array directly: summarising must not dispatch ops (it would
    record itself).
    """
    if t is None or not hasattr(t, "_data") or t._device.type == "meta":    # meta: no values
        return None
    d = t._data
    xp = t._device.xp
    if d.size == 0:
        return {"min": None, "max": None, "mean": None, "std": None, "norm": None, "nan": 0, "inf": 0}
    a = d.astype(xp.float64) if d.dtype.kind in "biuf" else d
    finite = xp.isfinite(a)
    nan = int(xp.isnan(a).sum())
    vals = a[finite]
    if vals.size == 0:
        stats = dict.fromkeys(("min", "max", "mean", "std", "norm"))
    else:
        stats = {"min": float(vals.min()), "max": float(vals.max()), "mean": float(vals.mean()),
                 "std": float(vals.std(ddof=1)) if vals.size > 1 else math.nan,
                 "norm": float(xp.sqrt((vals * vals).sum()))}
        stats = {k: (v if math.isfinite(v) else None) for k, v in stats.items()}
    stats.update(nan=nan, inf=int(a.size - finite.sum()) - nan)
    return stats


def _ref(obj, keep: bool):
    if obj is None:
        return None
    return obj if keep else weakref.ref(obj)


class tape:
    """Record every op dispatched, and every backward node run, inside a ``with`` block.

    Args:
        keep_values: also store value summaries of outputs and gradient summaries, and keep
            the tensors (and nodes) alive; by default only weak references are held.

    ``t.nodes`` is the list of ``TapeNode`` records in order; ``len(t)``, iteration,
    ``t.to_dict()`` (JSON-serialisable), ``t.clear()``. Tapes nest: each records what
    happens in its own scope. Leaving the scope stops recording, also on an exception.
    """

    def __init__(self, keep_values: bool = False):
        self.keep_values = keep_values
        self._nodes: list[TapeNode] = []
        self._by_seq: dict[int, TapeNode] = {}
        self._subs: list = []

    def __enter__(self) -> "tape":
        if self._subs:
            raise RuntimeError("this tape is already recording; nest a new tapelab.tape() instead")
        self._subs = [events.subscribe("op", self._on_op),
                      events.subscribe("backward_step", self._on_step)]
        return self

    def __exit__(self, *exc) -> None:
        for sub in self._subs:
            sub.unsubscribe()
        self._subs = []

    @property
    def nodes(self) -> list:
        """The ``TapeNode`` records, in order."""
        return self._nodes

    @nodes.setter
    def nodes(self, value: list) -> None:
        self._nodes = value

    @property
    def recording(self) -> bool:
        return bool(self._subs)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __getitem__(self, i):
        return self.nodes[i]

    def clear(self) -> None:
        self.nodes.clear()
        self._by_seq.clear()

    def to_dict(self) -> dict:
        return {"version": 1, "keep_values": self.keep_values, "nodes": [n.to_dict() for n in self.nodes]}

    def __repr__(self) -> str:
        fwd = sum(n.kind == "forward" for n in self.nodes)
        return f"<tapelab.tape: {fwd} forward, {len(self.nodes) - fwd} backward records>"

    # ------------------------------------------------------------ event handlers
    # Records are built positionally (TapeNode's field order): keyword calls of a 21-field
    # dataclass cost several times more, and this runs once per op while recording.
    def _on_op(self, ev: events.OpRecorded) -> None:
        nodes = self._nodes
        running = running_node()
        res = ev.tensors[1] if ev.tensors else None
        if self.keep_values:
            args = ev.tensors[0] if ev.tensors else ()
            refs = (res, res.grad_fn if res is not None else None,
                    tuple(a for a in args if hasattr(a, "_data")))
            value = summarize(res)
        else:
            value = None
            if res is None:
                refs = (None, None)
            else:
                fn = res.grad_fn
                refs = (_weakref(res), _weakref(fn) if fn is not None else None)
        shape = ev.shape
        rec = TapeNode(
            len(nodes), "forward", ev.op, ev.seq,
            running.tape_seq if running is not None else None,
            "forward" if running is None else "backward",
            ev.inputs, ev.output, ev.input_shapes, shape, (shape,), ev.dtype, ev.device, ev.requires_grad,
            ev.start_ns, ev.duration_ns, ev.module, ev.grad_fn, value, None, refs)
        nodes.append(rec)
        self._by_seq[ev.seq] = rec

    def _on_step(self, step: events.BackwardStep) -> None:
        node = step.node
        seq = node.tape_seq
        fwd = self._by_seq.get(seq) if seq is not None else None
        gouts = step.grad_outputs
        first = None
        for g in gouts:
            if g is not None:
                first = g
                break
        name = node.name()
        # shapes straight from the arrays (plain tuples of ints, as tuple(t.shape) gives)
        rec = TapeNode(
            len(self._nodes), "backward", name, None, seq, "backward", (), None,
            tuple([tuple(g._data.shape) if g is not None else None for g in gouts]),
            tuple(first._data.shape) if first is not None else (),
            tuple([tuple(g._data.shape) if g is not None else None for g in step.grad_inputs]),
            first.dtype.name if first is not None else "",
            str(first._device) if first is not None else "",
            False, step.start_ns, step.duration_ns, fwd.module if fwd is not None else "",
            name, None, None, (None, node if self.keep_values else _weakref(node)))
        if self.keep_values:
            rec.grad = summarize(first)
            if fwd is not None:  # an op's node has one output: its incoming gradient is the op's
                fwd.grad = summarize(step.grad_outputs[0])
        self._nodes.append(rec)

