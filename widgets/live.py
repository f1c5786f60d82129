"""A recording tape that streams view-model deltas while it records.

Used by the ``%%tape`` magic (to feed a TapeView) and by the kernel's comm bridge (to feed
the JupyterLab side panel): one recorder, several sinks.
"""
from __future__ import annotations

import math
import time

from tapelab.tape import tape

from .viewmodel import GraphBuilder

__all__ = ["LiveTape", "quick_summary"]

SAMPLE = 4096


def quick_summary(t, limit: int = SAMPLE) -> dict | None:
    """min/max/mean/std/norm and nan/inf counts of a tensor, from at most about ``limit`` elements
    taken by striding its longest axes (``sampled`` says how many when it sampled; the norm is
    scaled up to the full size). A handful of array calls, no copy of a big tensor, no reference
    kept: cheap enough for every op while streaming."""
    d = getattr(t, "_data", None)
    if d is None:
        return None
    size = int(d.size)
    if size == 0 or d.dtype.kind not in "biuf":
        return None
    xp = t._device.xp
    view = d
    while view.size > limit:                 # stride the longest axis (a view, never a copy)
        ax = max(range(view.ndim), key=lambda i: view.shape[i])
        step = min(view.shape[ax], -(-view.size // limit))
        view = view[(slice(None),) * ax + (slice(None, None, step),)]
    a = view.astype(xp.float64).reshape(-1)
    n = int(a.size)
    total = float(a.sum())
    nan = inf = 0
    if not math.isfinite(total):             # rare: count and drop non-finite values
        finite = xp.isfinite(a)
        nan = int(xp.isnan(a).sum())
        inf = n - int(finite.sum()) - nan
        a = a[finite]
        total = float(a.sum())
    m = int(a.size)
    if m == 0:
        out = dict.fromkeys(("min", "max", "mean", "std", "norm"))
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
    """

    def __init__(self, sinks=(), rate: float = 30.0, max_nodes: int = 5000, summaries: bool = True,
                 title: str = ""):
        super().__init__(keep_values=False)
        self.summaries = summaries
        self.sinks = list(sinks)
        self.interval = 1.0 / rate
        self.builder = GraphBuilder(title=title, max_nodes=max_nodes)
        self.max_nodes = max_nodes
        self._last = 0.0
        self.sent = 0                 # deltas sent, all sinks counted once

    def _on_op(self, ev) -> None:
        super()._on_op(ev)
        rec = self.nodes[-1]
        if self.summaries and ev.tensors and rec.phase == "forward" and self.builder.total < self.max_nodes:
            rec.value = quick_summary(ev.tensors[1])   # (ops a vjp runs are no nodes: no summary)
        self._added()

    def _on_step(self, step) -> None:
        super()._on_step(step)
        if self.summaries and self.builder.total < self.max_nodes:
            rec = self.nodes[-1]
            g = next((g for g in step.grad_outputs if g is not None), None)
            rec.grad = quick_summary(g)
            seq = step.node.tape_seq
            fwd = self._by_seq.get(seq) if seq is not None else None
            if fwd is not None and step.grad_outputs:
                fwd.grad = quick_summary(step.grad_outputs[0]) if step.grad_outputs[0] is not g else rec.grad
        self._added()

    def _added(self) -> None:
        self.builder.add(self.nodes[-1])
        if self.builder.truncated and len(self.nodes) > 2 * self.max_nodes:
            self.nodes.clear()        # past the cap only counts matter
            self._by_seq.clear()
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self.flush()

    def flush(self) -> None:
        """Send what was recorded since the last delta (if anything)."""
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
        self.flush()

    def graph(self) -> dict:
        return self.builder.graph()
