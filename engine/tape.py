"""The tape: a recording scope over dispatch and backward events, and the engine's one
tensor summary.

``with tapelab.tape() as t:`` subscribes to the ``op`` and ``backward_step`` events and
keeps one plain record per op dispatched (and per backward node executed) inside the
scope, in order. Records refer to tensors and graph nodes only weakly, so recording
never keeps a graph alive; ``keep_values=True`` adds value/gradient summaries and keeps
the tensors themselves.

The tape's handlers are its public sink API: ``record_op(event)`` and
``record_step(step)`` receive every event while the tape records and return the record
they append; a subclass overrides them to filter or stream records (the notebook's
``LiveTape`` does), calling the base method for each record it keeps.

``summarize(t)`` is the tensor summary every view shows (min/max/mean/std/norm over the
finite values, nan/inf/zero counts): the tape's ``keep_values`` records, the debugger's
frames and the widgets all use it. ``sample``/``summarize_samples`` split it in two for
streaming: a small snapshot per op, the statistics of many snapshots in a few array calls.

>>> with tapelab.tape() as t:
...     loss = (x * w).sum()
...     loss.backward()
>>> [(n.kind, n.op) for n in t.nodes]
[('forward', 'mul'), ('forward', 'sum'), ('backward', 'SumBackward0'), ...]
"""
from __future__ import annotations

import linecache
import math
import os
import sys
import threading
import warnings
import weakref
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Sequence

import numpy as np

from .base import events
from .base.dtype import _BY_NP
from .autograd.engine import _RUNNING
from .core.dispatch import _tell
from .core.tensor import Tensor

__all__ = ["tape", "TapeNode", "summarize", "sample", "summarize_samples", "Sample", "tensor_id", "SAMPLE",
           "source_line"]

_weakref = weakref.ref
_get_ident = threading.get_ident
_getframe = sys._getframe
_DISPATCH = _tell.__code__   # the dispatcher's frame that emits ``op`` events: the user's code is above it

SAMPLE = 256   # values a streamed summary reads (``sample``'s usual limit)
_STATS = ("min", "max", "mean", "std", "norm")


@dataclass(slots=True)
class TapeNode:
    """One recorded step.

    ``kind`` is ``"forward"`` for a dispatched op and ``"backward"`` for a node run by the
    backward walk. Forward records carry the op's global ``seq`` (equal to the created
    node's ``grad_fn.tape_seq``); a backward record's ``forward_seq`` names the forward
    record of the node it ran, and so does that of an op dispatched *by* a vjp
    (``phase == "backward"``). For backward records ``input_shapes`` are the incoming
    gradients' shapes and ``output_shapes`` the produced ones. ``source`` is the user's line
    that ran a forward op (``file:line  code``, the first frame outside tapelab).
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
    source: str = ""
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


def tensor_id(t: Tensor) -> int:
    """The id tape records and ``op`` events use for ``t`` (``TapeNode.inputs``/``output``)."""
    return t._uid()


# ---------------------------------------------------------------- the tensor summary
# Summaries read the backend arrays directly: summarising must not dispatch ops (it would
# record itself, and a mode might refuse it).
class Sample:
    """Values of one tensor copied to the host (all, or a strided subset) and its size."""

    __slots__ = ("values", "size")

    def __init__(self, values, size: int):
        self.values, self.size = values, size


def sample(t, limit: int | None = SAMPLE) -> Sample | None:
    """A snapshot of ``t`` for ``summarize_samples``: at most about ``limit`` values taken by
    striding it (all of them when ``limit`` is None), copied, so later in-place writes do not
    change it. None when there is nothing to summarise (not a Tensor, a meta tensor, a
    non-numeric dtype)."""
    return _sample(t, limit, True)


def _sample(t, limit: int | None, copy: bool) -> Sample | None:
    if not isinstance(t, Tensor):
        return None
    d = t._data
    if type(d) is np.ndarray:                        # the host: no meta, no transfer
        if d.dtype.kind not in "biufV":
            return None
        size = d.size
        if limit is None or size <= limit:
            return Sample(d.flatten() if copy else d.reshape(-1), size)
        step = -(-size // limit)
        return Sample(d.reshape(-1)[::step].copy() if d.flags.c_contiguous else d.flat[::step], size)
    if t._device.type == "meta" or d.dtype.kind not in "biufV":    # meta: no values
        return None
    xp = t._device.xp
    view = d
    while limit is not None and view.size > limit:   # stride the longest axis (a view, never a copy)
        ax = max(range(view.ndim), key=lambda i: view.shape[i])
        step = min(view.shape[ax], -(-view.size // limit))
        view = view[(slice(None),) * ax + (slice(None, None, step),)]
    host = xp.asnumpy(view) if hasattr(xp, "asnumpy") else view
    return Sample(np.asarray(host).reshape(-1), int(d.size))


def summarize(t, limit: int | None = None) -> dict | None:
    """min/max/mean/std/norm of a tensor over its finite values, plus nan/inf/zero counts
    (``zero``: values exactly 0, of the values read).

    All values by default; with ``limit``, about that many taken by striding (``sampled``
    then says how many, and ``norm`` is scaled up to the full size). ``std`` is the sample
    standard deviation (None for fewer than two finite values); statistics that are not
    finite numbers are None, so the result is JSON. None for anything ``sample`` refuses.
    """
    s = _sample(t, limit, False)
    return None if s is None else _stats(s.values.astype(np.float64, copy=False), s.size)


def summarize_samples(samples: Sequence[Sample]) -> list[dict]:
    """``summarize`` of many samples at once: one concatenation and a few segment reductions
    for all of them (a sample holding a non-finite value takes the one-sample path)."""
    if len(samples) == 1:
        s = samples[0]
        return [_stats(s.values.astype(np.float64, copy=False), s.size)]
    full = [s for s in samples if s.values.size]
    if len(full) < len(samples):                     # empty tensors: counts only
        stats = iter(_batch_stats(full) if full else ())
        return [next(stats) if s.values.size else _stats(s.values, s.size) for s in samples]
    return _batch_stats(full) if full else []


# The variance is computed in one pass (sum and sum of squares) and, where that loses more
# than about six of float64's sixteen digits to cancellation (values far from zero relative
# to their spread, e.g. large integers), again from the deviations from the mean.
_CANCELLATION = 1e-6


def _stats(a, size: int) -> dict:
    """The summary of ``a`` (float64), a sample of a tensor of ``size`` values."""
    n = int(a.size)
    nan = inf = 0
    total = float(a.sum())
    sq = float(a @ a)
    if not (math.isfinite(total) and math.isfinite(sq)):   # count and drop non-finite values
        finite = np.isfinite(a)
        nan = int(np.isnan(a).sum())
        inf = n - int(finite.sum()) - nan
        a = a[finite]
        total = float(a.sum())
        sq = float(a @ a)
    m = int(a.size)
    if m == 0:
        out = dict.fromkeys(_STATS)
    else:
        mean = total / m
        std = None
        if m > 1:
            ss = sq - m * mean * mean
            if ss < _CANCELLATION * sq:
                dev = a - mean
                ss = float(dev @ dev)
            std = math.sqrt(max(ss, 0.0) / (m - 1))
        out = {"min": float(a.min()), "max": float(a.max()), "mean": mean, "std": std,
               "norm": math.sqrt(sq * size / n)}
        if not (math.isfinite(total) and math.isfinite(sq) and math.isfinite(out["norm"])):
            out = {k: (v if v is not None and math.isfinite(v) else None) for k, v in out.items()}
    out["nan"] = nan
    out["inf"] = inf
    out["zero"] = n - nan - inf - int(np.count_nonzero(a))
    if n < size:
        out["sampled"] = n
    return out


def _batch_stats(samples: list) -> list:
    """``_stats`` of several non-empty samples, by segment reductions over their concatenation."""
    lens = np.fromiter([s.values.size for s in samples], dtype=np.intp, count=len(samples))
    offs = np.zeros_like(lens)
    np.cumsum(lens[:-1], out=offs[1:])
    arr = np.concatenate([s.values for s in samples], dtype=np.float64, casting="unsafe")
    sizes = [s.size for s in samples]
    n = lens.astype(np.float64)
    with np.errstate(all="ignore"):
        tot = np.add.reduceat(arr, offs)
        sq = np.add.reduceat(arr * arr, offs)
        mean = tot / n
        ss = sq - n * mean * mean
        std = np.sqrt(np.maximum(ss, 0.0) / np.maximum(n - 1, 1))
        norm = np.sqrt(sq * np.asarray(sizes, dtype=np.float64) / n)
    klist = lens.tolist()
    zeros = np.add.reduceat(arr == 0, offs, dtype=np.intp).tolist()
    out = [{"min": lo, "max": hi, "mean": mu, "std": sd if k > 1 else None, "norm": nm, "nan": 0, "inf": 0, "zero": z}
           for lo, hi, mu, sd, nm, k, z in zip(np.minimum.reduceat(arr, offs).tolist(),
                                               np.maximum.reduceat(arr, offs).tolist(), mean.tolist(), std.tolist(),
                                               norm.tolist(), klist, zeros)]
    for i, (k, size) in enumerate(zip(klist, sizes)):
        if k < size:
            out[i]["sampled"] = k
    redo = ~(np.isfinite(tot) & np.isfinite(sq) & np.isfinite(norm)) | ((ss < _CANCELLATION * sq) & (lens > 1))
    for i in np.flatnonzero(redo).tolist():          # rare: non-finite values, or cancellation
        o = int(offs[i])
        out[i] = _stats(arr[o:o + klist[i]], sizes[i])
    return out


# ---------------------------------------------------------------- source lines
# Taken by the tape's handler, so only a recording pays for it: a walk up the stack to the first
# frame whose module is not tapelab's. A frame is told apart by its code's file name, one set test:
# a str caches its hash, where keying by the code object took an ``id`` call and a dict lookup per
# frame, and hashing a code object hashes its bytecode and constants (0.3-0.7 us a frame). A file's
# verdict is its module's, taken the first time a frame of it is seen; code compiled from a string
# (``<string>``, ``<stdin>``) has no file of its own and is judged per code object (by id, the entry
# holding the code so the id stays its own). The text per call site (code and instruction:
# ``f_lasti`` is a slot where ``f_lineno`` decodes the line table) is cached the same way.
_OUR_FILES: set = set()
_THEIR_FILES: set = set()
_OURS: dict = {}
_LINES: dict = {}


def source_line(frame) -> str:
    """``file:line  code`` of the first frame at or above ``frame`` outside tapelab ("" if none)."""
    ours, theirs = _OUR_FILES, _THEIR_FILES
    while frame is not None:
        code = frame.f_code
        file = code.co_filename
        if file in ours or (file not in theirs and _is_ours(frame, code, file)):
            frame = frame.f_back
            continue
        key = (id(code), frame.f_lasti)
        hit = _LINES.get(key)
        if hit is None:
            if len(_LINES) > 65536:
                _LINES.clear()
            lineno = frame.f_lineno
            line = linecache.getline(file, lineno).strip()
            hit = _LINES[key] = (code, f"{os.path.basename(file)}:{lineno}" + (f"  {line}" if line else ""))
        return hit[1]
    return ""


def _is_ours(frame, code, file: str) -> bool:
    """Whether ``frame`` runs tapelab's code (its module is ``tapelab`` or below), first seen in ``file``:
    the verdict is kept for the file, or for the code object where the file is no file (``<string>``)."""
    if file.startswith("<"):
        seen = _OURS.get(id(code))
        if seen is None:
            seen = _OURS[id(code)] = (code, _in_tapelab(frame))
        return seen[1]
    ours = _in_tapelab(frame)
    (_OUR_FILES if ours else _THEIR_FILES).add(file)
    return ours


def _in_tapelab(frame) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return name == "tapelab" or name.startswith("tapelab.")


def _dispatch_caller(frame):
    """The frame that called the dispatcher, at or above ``frame``: an op handler starts its
    source walk there, past the handler frames (``record_op`` and any overrides of it, which
    may live outside tapelab), in a few identity tests. ``frame`` itself when no dispatcher
    frame is found (an event not emitted by the dispatcher)."""
    f = frame
    while f is not None:
        if f.f_code is _DISPATCH:
            return f.f_back
        f = f.f_back
    return frame


def _shapes(grads: tuple) -> tuple:
    """The arrays' shapes of a step's gradients (None for a missing one), no loop for up to three
    (a linear's node sends three)."""
    n = len(grads)
    if n == 1:
        g = grads[0]
        return (g._data.shape if g is not None else None,)
    if n == 2:
        a, b = grads
        return (a._data.shape if a is not None else None, b._data.shape if b is not None else None)
    if n == 3:
        a, b, c = grads
        return (a._data.shape if a is not None else None, b._data.shape if b is not None else None,
                c._data.shape if c is not None else None)
    return tuple([g._data.shape if g is not None else None for g in grads])


def _ref(obj, keep: bool):
    if obj is None:
        return None
    return obj if keep else weakref.ref(obj)


class tape:
    """Record every op dispatched, and every backward node run, inside a ``with`` block.

    Args:
        keep_values: also store value summaries of outputs and gradient summaries, and keep
            the tensors (and nodes) alive; by default only weak references are held.
        max_records: keep at most this many records, the latest (None: no cap). A tape left
            open around a long loop otherwise grows by one record per op (a small MLP step
            makes about a hundred). Past the cap the oldest record is dropped for each new
            one: ``t.dropped`` counts them and the first drop warns (``RuntimeWarning``).

    ``t.nodes`` is the list of ``TapeNode`` records in order; ``len(t)``, iteration,
    ``t.to_dict()`` (JSON-serialisable), ``t.clear()``. Tapes nest: each records what
    happens in its own scope. Leaving the scope stops recording, also on an exception.
    A record's ``index`` counts every record made, dropped ones included.

    A tape records the thread that opened it: ops and backward nodes other threads run
    meanwhile are not its records (``events`` subscriptions are process-wide; the tape's
    handlers pass on only its own thread's events to ``record_op``/``record_step``).
    """

    def __init__(self, keep_values: bool = False, max_records: int | None = None):
        if max_records is not None and (type(max_records) is not int or max_records < 1):
            raise ValueError(f"tapelab.tape: max_records must be a positive int or None, got {max_records!r}")
        self.keep_values = keep_values
        self.max_records = max_records
        self.dropped = 0              # records dropped past max_records (or by a streaming subclass)
        self._nodes = [] if max_records is None else deque(maxlen=max_records)
        self._by_seq: dict[int, TapeNode] = {}
        self._subs: list = []
        # Lazy: the handlers append each event's fields (a tuple) and the records are made when read
        # (``_make_records``): a tape nobody reads costs no ``TapeNode``. Only where the base handlers
        # record every event with no summary and no cap (a sink that overrides them gets records).
        cls = type(self)
        self._lazy = (not keep_values and max_records is None
                      and cls.record_op is tape.record_op and cls.record_step is tape.record_step)
        self._made = 0                # records at the head of ``_nodes`` made so far (lazy tapes)

    def __enter__(self) -> "tape":
        if self._subs:
            raise RuntimeError("this tape is already recording; nest a new tapelab.tape() instead")
        tid = _get_ident()
        if self._lazy:
            append = self._nodes.append

            def on_fields(fields, tensors):
                if _get_ident() == tid:
                    append(_op_raw(fields, tensors, False, _getframe(1)))

            def on_raw_step(step):
                if _get_ident() == tid:
                    append(_step_raw(step))

            self._subs = events.subscribe_group(("op", on_fields, True), ("backward_step", on_raw_step))
            return self
        record_op, record_step = self.record_op, self.record_step

        def on_op(ev):
            if _get_ident() == tid:
                record_op(ev)

        def on_step(step):
            if _get_ident() == tid:
                record_step(step)

        self._subs = events.subscribe_group(("op", on_op), ("backward_step", on_step))
        return self

    def __exit__(self, *exc) -> None:
        events.unsubscribe_group(self._subs)
        self._subs = []

    def _settle(self) -> None:
        """Complete the records before they are read (a streaming subclass fills summaries late)."""

    def _make_records(self) -> None:
        """A lazy tape's records from the fields its handlers kept, in order (``_by_seq`` as
        ``record_op``/``record_step`` fill it, so a backward record finds its op's module)."""
        nodes = self._nodes
        i, n = self._made, len(nodes)
        if i == n or not self._lazy:
            return
        by_seq, base = self._by_seq, self.dropped
        while i < n:
            raw = nodes[i]
            if raw[0] is None:    # a backward step's
                fwd = by_seq.get(raw[1]) if raw[1] is not None else None
                nodes[i] = _step_record(base + i, raw, fwd.module if fwd is not None else "")
            else:
                nodes[i] = rec = _op_record(base + i, raw)
                by_seq[rec.seq] = rec
            i += 1
        self._made = n

    @property
    def nodes(self) -> list:
        """The ``TapeNode`` records, in order (a copy when ``max_records`` is set)."""
        self._make_records()
        self._settle()
        nodes = self._nodes
        return nodes if type(nodes) is list else list(nodes)

    @property
    def recording(self) -> bool:
        return bool(self._subs)

    def listen_ops(self, on: bool) -> None:
        """Stop (``False``) or resume receiving ``op`` events while recording, backward steps
        still arriving: a subclass that needs no record of the next ops (a streaming one between
        the steps it records) lets the dispatcher take its fast path meanwhile."""
        self._listen(0, on)

    def listen_steps(self, on: bool) -> None:
        """As ``listen_ops``, for ``backward_step`` events: while none is wanted the backward walk
        takes its unwatched paths (a subclass that only counts a pass's nodes takes the
        ``backward_pass`` event instead)."""
        self._listen(1, on)

    def _listen(self, i: int, on: bool) -> None:
        if not self._subs:
            return
        sub = self._subs[i]
        sub.unsubscribe()
        if on:
            self._subs[i] = events.subscribe(sub.kind, sub.fn, sub.fields)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __getitem__(self, i):
        if type(i) is slice:
            return self.nodes[i]
        self._make_records()
        self._settle()
        return self._nodes[i]

    def clear(self) -> None:
        self._nodes.clear()
        self._by_seq.clear()
        self.dropped = 0
        self._made = 0

    def _drop_oldest(self) -> None:
        """Make room for one record under ``max_records``: forget the oldest (and warn, once)."""
        old = self._nodes[0]
        if old.seq is not None and self._by_seq.get(old.seq) is old:
            del self._by_seq[old.seq]
        if not self.dropped:
            warnings.warn(f"tapelab.tape: max_records={self.max_records} reached; the oldest records are "
                          f"dropped from now on (tape.dropped counts them)", RuntimeWarning, stacklevel=2)
        self.dropped += 1

    def forward_record(self, seq: int | None) -> TapeNode | None:
        """The forward record of the op with this ``seq`` (a node's ``tape_seq``), if recorded."""
        self._make_records()
        return self._by_seq.get(seq) if seq is not None else None

    def to_dict(self) -> dict:
        return {"version": 1, "keep_values": self.keep_values, "nodes": [n.to_dict() for n in self.nodes]}

    def counts(self) -> dict[str, int]:
        """Records by phase, the one definition every view's header uses: ``forward`` counts the
        ops of the forward pass (and optimizer steps); ``backward`` counts the backward walk's
        nodes and the ops they (or gradient accumulation) dispatched."""
        fwd = sum(n.phase == "forward" for n in self.nodes)
        return {"forward": fwd, "backward": len(self.nodes) - fwd}

    def __repr__(self) -> str:
        c = self.counts()
        dropped = f", {self.dropped} dropped" if self.dropped else ""
        return f"<tapelab.tape: {c['forward']} forward, {c['backward']} backward records{dropped}>"

    # ------------------------------------------------------------ the sink API
    def record_op(self, ev: events.OpRecorded) -> TapeNode:
        """The ``op`` event handler: append the op's record and return it. Override to decide
        per event (call this to record), e.g. to stream records or only count them."""
        nodes = self._nodes
        if len(nodes) == self.max_records:
            self._drop_oldest()
        rec = _op_record(self.dropped + len(nodes),
                         _op_raw(events.op_fields(ev), ev.tensors, self.keep_values, _getframe(1)))
        nodes.append(rec)
        self._by_seq[ev.seq] = rec
        return rec

    def record_step(self, step: events.BackwardStep) -> TapeNode:
        """The ``backward_step`` event handler: append the node's record and return it (the
        op's forward record, with ``keep_values``, also gets its gradient summary)."""
        if len(self._nodes) == self.max_records:
            self._drop_oldest()
        raw = _step_raw(step)
        fwd = self._by_seq.get(raw[1]) if raw[1] is not None else None
        rec = _step_record(self.dropped + len(self._nodes), raw, fwd.module if fwd is not None else "")
        if self.keep_values:
            rec._refs = (None, step.node)
            rec.grad = summarize(next((g for g in step.grad_outputs if g is not None), None))
            if fwd is not None:  # an op's node has one output: its incoming gradient is the op's
                fwd.grad = summarize(step.grad_outputs[0])
        self._nodes.append(rec)
        return rec


# What a record keeps of its event, taken while the event is told (the stack, the running node and the
# tensors are the event's own), and the record made from it, at once or when a lazy tape is read. Records
# are made positionally (TapeNode's field order): keyword calls of a 22-field dataclass cost several times more.
def _op_raw(fields: tuple, tensors: tuple, keep: bool, caller) -> tuple:
    """An op event's record but its index: (fields, forward_seq, phase, source, refs, value). ``caller`` is
    the handler's caller's frame: the dispatcher's own (``_tell``) when the lazy tape's handler was told
    directly, so the source walk starts above it without a search; else the walk finds it."""
    running = _RUNNING.nodes   # running_node(), inlined: the backward node running, if any
    if running:
        try:   # Node.tape_seq inlined (a property's frame per op a vjp runs), as _step_raw reads it
            forward_seq = running[-1]._tape_seq
        except AttributeError:
            forward_seq = None
        phase, source = "backward", ""
    else:
        forward_seq, phase = None, "forward"
        source = source_line(caller.f_back if caller.f_code is _DISPATCH else _dispatch_caller(caller))
    res = tensors[1] if tensors else None
    value = None
    if keep:
        args = tensors[0] if tensors else ()
        refs = (res, res.grad_fn if res is not None else None, tuple(a for a in args if isinstance(a, Tensor)))
        value = summarize(res)
    elif res is None:
        refs = (None, None)
    else:
        fn = res.grad_fn
        refs = (_weakref(res), _weakref(fn) if fn is not None else None)
    return fields, forward_seq, phase, source, refs, value


def _op_record(index: int, raw: tuple) -> TapeNode:
    (seq, op, inputs, input_shapes, output, shape, dtype, device, requires_grad, duration_ns, start_ns, module,
     grad_fn), forward_seq, phase, source, refs, value = raw
    return TapeNode(index, "forward", op, seq, forward_seq, phase, inputs, output, input_shapes, shape, (shape,),
                    dtype, device, requires_grad, start_ns, duration_ns, module, grad_fn, value, None, source, refs)


def _step_raw(step: events.BackwardStep) -> tuple:
    """A backward step's record but its index and module: (None, forward_seq, name, input_shapes, shape,
    output_shapes, dtype, device, (start_ns, duration_ns), node ref); the leading None tells it from an op's.
    No tensor is kept: a lazy tape holds nothing alive."""
    node = step.node
    try:   # Node.tape_seq inlined (a property's frame per step): set where an op was told, else unset
        seq = node._tape_seq
    except AttributeError:
        seq = None
    gouts = step.grad_outputs
    if len(gouts) == 1 and gouts[0] is not None:   # an op's node: one incoming gradient
        first = gouts[0]
        shape = first._data.shape
        in_shapes = (shape,)
    else:
        first = None
        for g in gouts:
            if g is not None:
                first = g
                break
        shape = first._data.shape if first is not None else ()
        in_shapes = _shapes(gouts)
    try:   # OpNode.name inlined where the name is fixed by the node's type
        name = node.node_name
    except AttributeError:
        name = None
    if name is None:
        name = node.name()
    # shapes straight from the arrays (plain tuples of ints, as tuple(t.shape) gives)
    if first is not None:
        dtype, device = _BY_NP[first._data.dtype].name, first._device._name
    else:
        dtype = device = ""
    return (None, seq, name, in_shapes, shape, _shapes(step.grad_inputs), dtype, device,
            (step.start_ns, step.duration_ns), _weakref(node))


def _step_record(index: int, raw: tuple, module: str) -> TapeNode:
    _, seq, name, in_shapes, shape, out_shapes, dtype, device, (start_ns, duration_ns), ref = raw
    return TapeNode(index, "backward", name, None, seq, "backward", (), None, in_shapes, shape, out_shapes,
                    dtype, device, False, start_ns, duration_ns, module, name, None, None, "", (None, ref))
