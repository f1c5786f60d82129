"""A recording tape that streams view-model deltas while it records.

Used by the ``%%tape`` magic (to feed a TapeView) and by the kernel's comm bridge (to feed
the JupyterLab side panel): one recorder, several sinks.
"""
from __future__ import annotations

import math
import time

import numpy as np

from tapelab.autograd.engine import running_node
from tapelab.tape import tape

from .viewmodel import GraphBuilder

__all__ = ["LiveTape", "quick_summary"]

SAMPLE = 256
_STAT_KEYS = ("min", "max", "mean", "std", "norm")


def _sample(d, limit: int = SAMPLE):
    """A copy of at most ``limit`` elements of a numpy array, strided over its flat order (no
    copy of the whole of a big array), or None when there is nothing to summarise."""
    size = d.size
    if size == 0 or d.dtype.kind not in "biuf":
        return None
    if size <= limit:
        return d.flatten()
    step = -(-size // limit)
    if d.flags.c_contiguous:
        return d.reshape(-1)[::step].copy()
    return d.flat[::step]


def _stats(a, size: int) -> dict:
    """The summary of a float64 sample ``a`` of a tensor of ``size`` elements (norm scaled up)."""
    n = int(a.size)
    total = float(a.sum())
    nan = inf = 0
    if not math.isfinite(total):             # rare: count and drop non-finite values
        finite = np.isfinite(a)
        nan = int(np.isnan(a).sum())
        inf = n - int(finite.sum()) - nan
        a = a[finite]
        total = float(a.sum())
    m = int(a.size)
    if m == 0:
        out = dict.fromkeys(_STAT_KEYS)
    else:
        sq = float(a @ a)
        mean = total / m
        var = max(sq - m * mean * mean, 0.0) / (m - 1) if m > 1 else None
        out = {"min": float(a.min()), "max": float(a.max()), "mean": mean,
               "std": math.sqrt(var) if var is not None else None, "norm": math.sqrt(sq * size / n)}
    out.update(nan=nan, inf=inf)
    if n < size:
        out["sampled"] = n
    return out


def _batch_stats(samples: list, sizes: list) -> list:
    """``_stats`` of many samples at once: one concatenation and a few segment reductions for
    all of them (a sample with a non-finite value takes ``_stats``' own path)."""
    if len(samples) == 1:
        return [_stats(samples[0].astype(np.float64), sizes[0])]
    lens = np.fromiter(map(len, samples), dtype=np.intp, count=len(samples))
    offs = np.zeros_like(lens)
    np.cumsum(lens[:-1], out=offs[1:])
    arr = np.concatenate(samples, dtype=np.float64, casting="unsafe")
    tot = np.add.reduceat(arr, offs)
    sq = np.add.reduceat(arr * arr, offs)
    n = lens.astype(np.float64)
    mean = tot / n
    with np.errstate(all="ignore"):
        std = np.sqrt(np.maximum(sq - n * mean * mean, 0.0) / (n - 1))
        norm = np.sqrt(sq * np.asarray(sizes, dtype=np.float64) / n)
    rows = zip(np.minimum.reduceat(arr, offs).tolist(), np.maximum.reduceat(arr, offs).tolist(),
               mean.tolist(), std.tolist(), norm.tolist(), lens.tolist(), sizes)
    out = [{"min": lo, "max": hi, "mean": mu, "std": sd if k > 1 else None, "norm": nm, "nan": 0, "inf": 0}
           for lo, hi, mu, sd, nm, k, size in rows]
    for i, (k, size) in enumerate(zip(lens.tolist(), sizes)):
        if k < size:
            out[i]["sampled"] = k
    bad = np.flatnonzero(~np.isfinite(tot))
    for i in bad.tolist():                    # rare: non-finite values, counted and dropped
        o = int(offs[i])
        out[i] = _stats(arr[o:o + int(lens[i])], sizes[i])
    return out


def quick_summary(t, limit: int = SAMPLE) -> dict | None:
    """min/max/mean/std/norm and nan/inf counts of a tensor, from at most about ``limit`` elements
    taken by striding it (``sampled`` says how many when it sampled; the norm is scaled up to the
    full size). A handful of array calls, no copy of a big tensor, no reference kept: cheap
    enough for every op while streaming."""
    d = getattr(t, "_data", None)
    if d is None or t._device.type == "meta":            # meta: no values
        return None
    size = int(d.size)
    if size == 0 or d.dtype.kind not in "biuf":
        return None
    if type(d) is np.ndarray:
        return _stats(_sample(d, limit).astype(np.float64), size)
    xp = t._device.xp
    view = d
    while view.size > limit:                 # stride the longest axis (a view, never a copy)
        ax = max(range(view.ndim), key=lambda i: view.shape[i])
        step = min(view.shape[ax], -(-view.size // limit))
        view = view[(slice(None),) * ax + (slice(None, None, step),)]
    return _stats(np.asarray(xp.asnumpy(view) if hasattr(xp, "asnumpy") else view,
                             dtype=np.float64).reshape(-1), size)


class LiveTape(tape):
    """A ``tapelab.tape`` that turns each record into view-model nodes as it arrives and calls
    every sink with a delta at most ``rate`` times a second (and once more on ``flush()``).

    Args:
        sinks: callables taking a delta dict (see ``GraphBuilder.take``). A sink that raises
            is dropped: a broken view must never break the cell being recorded.
        rate: most deltas per second.
        max_nodes: nodes sent at most; past it only counts go on (``meta.truncated``), and
            recorded records are no longer kept, so a long training loop stays small.
        summaries: add value and gradient summaries to each record (``quick_summary``: sampled,
            so cheap; no tensor is kept alive, unlike ``tapelab.tape(keep_values=True)``).

    A steady training loop (its steps folding, ``GraphBuilder``) is recorded one step per delta:
    the steps between are counted (ops, backward nodes, one folded step each) and make no
    record, so streaming a long loop costs little; a step that differs between two recorded
    ones is counted, not drawn.
    """

    def __init__(self, sinks=(), rate: float = 30.0, max_nodes: int = 5000, summaries: bool = True,
                 title: str = ""):
        self._pending: list = []      # (sample, size, value, ((record, attr), ...)), in order
        self._unbuilt: list = []      # records not given to the builder yet, in order
        self._bound = 0               # most nodes they can make
        super().__init__(keep_values=False)
        self.summaries = summaries
        self.sinks = list(sinks)
        self.interval = 1.0 / rate
        self.builder = GraphBuilder(title=title, max_nodes=max_nodes)
        self.max_nodes = max_nodes
        self._last = 0.0
        self._counting = False        # past the cap: events are counted, no record is made
        self._skip = False            # this step is counted, not recorded (a steady loop between deltas)
        self._after_backward = False
        self._skipped = [0, 0]        # forward ops, backward nodes of the step being counted
        self._recorded_at = 0.0       # when the last recorded step started
        self.sent = 0                 # deltas sent, all sinks counted once

    # Summaries are taken in two halves: per op only a small copy of a strided sample is kept
    # (``_pending``); the statistics of all pending samples are computed together, in a few
    # array calls, before the next delta is taken (``flush``) or the records are read.
    @property
    def nodes(self) -> list:
        if self._pending:
            self._resolve()
        return self._nodes

    @nodes.setter
    def nodes(self, value: list) -> None:
        self._nodes = value

    def _queue(self, t, targets: tuple) -> None:
        d = getattr(t, "_data", None)
        if d is None:
            self._pending.append((None, 0, None, targets))
        elif type(d) is np.ndarray:
            sample = _sample(d)
            self._pending.append((sample, d.size, None, targets))
        else:                                   # a device array: summarised on the spot
            self._pending.append((None, 0, quick_summary(t), targets))

    def _resolve(self) -> None:
        pending, self._pending = self._pending, []
        samples = [p[0] for p in pending if p[0] is not None]
        stats = iter(_batch_stats(samples, [p[1] for p in pending if p[0] is not None]) if samples else ())
        get = self.builder._by_id.get
        for sample, _, value, targets in pending:
            if sample is not None:
                value = next(stats)
            for rec, attr in targets:
                setattr(rec, attr, value)
                alias = self.builder.aliases.get(rec.index)
                if alias is not None:                        # a folded step: the first step's node shows it
                    if value is not None:
                        self.builder._set(alias, attr, value)
                    continue
                nid = "n%d" % rec.index
                node = get(nid)
                if node is None:
                    continue
                if attr == "grad" and rec.kind == "forward":   # an earlier node learns its gradient
                    if value is not None:
                        self.builder._set(nid, "grad", value)
                else:                                        # a node not sent yet
                    node[attr] = value

    # Past the cap (``builder.truncated``) a record would only be counted and dropped, so none
    # is made: each event is one count (ops a vjp runs are no nodes, so not counted).
    def _on_op(self, ev) -> None:
        forward = running_node() is None
        if self._counting:
            if forward:
                self.builder.count("forward")
            self._tick()
            return
        if forward and self._after_backward and ev.requires_grad:
            self._step_starts()
        if self._skip:
            self._skipped[0] += forward
            self._tick()
            return
        tape._on_op(self, ev)
        rec = self._nodes[-1]
        if self.summaries and ev.tensors and rec.phase == "forward" and self._room():
            self._queue(ev.tensors[1], ((rec, "value"),))   # (ops a vjp runs are no nodes: no summary)
        self._added(rec)

    def _on_step(self, step) -> None:
        self._after_backward = True
        if self._counting:
            self.builder.count("backward")
            self._tick()
            return
        if self._skip:
            self._skipped[1] += 1
            self._tick()
            return
        tape._on_step(self, step)
        rec = self._nodes[-1]
        if self.summaries and self._room():
            gouts = step.grad_outputs
            g = None
            for x in gouts:
                if x is not None:
                    g = x
                    break
            seq = step.node.tape_seq
            fwd = self._by_seq.get(seq) if seq is not None else None
            if fwd is not None and gouts:
                if gouts[0] is g:
                    self._queue(g, ((rec, "grad"), (fwd, "grad")))
                else:
                    self._queue(g, ((rec, "grad"),))
                    self._queue(gouts[0], ((fwd, "grad"),))
            else:
                self._queue(g, ((rec, "grad"),))
        self._added(rec)

    def _step_starts(self) -> None:
        """A step starts (the builder's rule): record it, or count it if the loop is steady and
        a step was recorded less than a delta interval ago."""
        self._after_backward = False
        if self._skip:
            self.builder.count_step(*self._skipped)
            self._skipped = [0, 0]
        if self._unbuilt:                    # the builder's fold state, up to the step that ended
            self._build()
        now = time.perf_counter()
        self._skip = self.builder.streak >= 2 and now - self._recorded_at < self.interval
        if not self._skip:
            self._recorded_at = now

    # Records reach the builder in batches too (``_build``: at each delta, or when the cap is
    # near), in order, so a delta holds exactly what adding them one by one would give.
    def _room(self) -> bool:
        """Whether the builder has fewer than ``max_nodes`` nodes counted, all records so far added."""
        total = self.builder.total
        if total >= self.max_nodes:
            return False
        if total + self._bound < self.max_nodes:   # at most 1 + (its inputs) nodes per record
            return True
        self._build()
        return self.builder.total < self.max_nodes

    def _build(self) -> None:
        recs, self._unbuilt, self._bound = self._unbuilt, [], 0
        add = self.builder.add
        for rec in recs:
            add(rec)

    def _added(self, rec) -> None:
        self._unbuilt.append(rec)
        self._bound += 1 + len(rec.inputs)
        if len(self._nodes) > 2 * self.max_nodes or self.builder.truncated:
            self._build()
            if self.builder.truncated:
                if self._pending:
                    self._resolve()
                self._nodes.clear()        # past the cap only counts matter
                self._by_seq.clear()
                self._counting = True
        self._tick()

    def _tick(self) -> None:
        """A delta at most every ``interval`` seconds."""
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self.flush()

    def flush(self) -> None:
        """Send what was recorded since the last delta (if anything)."""
        if self._unbuilt:
            self._build()
        if self._pending:
            self._resolve()
        delta = self.builder.take()
        if not (delta["nodes"] or delta["edges"] or delta["groups"] or delta["updates"]) and not self.builder.truncated:
            return
        self.sent += 1
        for sink in tuple(self.sinks):
            try:
                sink(delta)
            except Exception:
                self.sinks.remove(sink)

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if self._skip:                       # the last step was being counted
            self.builder.count_step(*self._skipped)
            self._skip, self._skipped = False, [0, 0]
        if self._unbuilt:
            self._build()
        self.builder.close()
        self.flush()

    def graph(self) -> dict:
        if self._unbuilt:
            self._build()
        if self._pending:
            self._resolve()
        return self.builder.graph()
