"""A recording tape that streams view-model deltas while it records.

Used by the ``%%tape`` magic (to feed a TapeView) and by the kernel's comm bridge (to feed
the JupyterLab side panel): one recorder, several sinks.
"""
from __future__ import annotations

import time

from tapelab.tape import tape

from .viewmodel import GraphBuilder

__all__ = ["LiveTape"]


class LiveTape(tape):
    """A ``tapelab.tape`` that turns each record into view-model nodes as it arrives and calls
    every sink with a delta at most ``rate`` times a second (and once more on ``flush()``).

    Args:
        sinks: callables taking a delta dict (see ``GraphBuilder.take``). A sink that raises
            is dropped: a broken view must never break the cell being recorded.
        rate: most deltas per second.
        max_nodes: nodes sent at most; past it only counts go on (``meta.truncated``), and
            recorded records are no longer kept, so a long training loop stays small.
        keep_values: record value and gradient summaries too (see ``tapelab.tape``).
    """

    def __init__(self, sinks=(), rate: float = 30.0, max_nodes: int = 5000, keep_values: bool = False,
                 title: str = ""):
        super().__init__(keep_values=keep_values)
        self.sinks = list(sinks)
        self.interval = 1.0 / rate
        self.builder = GraphBuilder(title=title, max_nodes=max_nodes)
        self.max_nodes = max_nodes
        self._last = 0.0
        self.sent = 0                 # deltas sent, all sinks counted once

    def _on_op(self, ev) -> None:
        super()._on_op(ev)
        self._added()

    def _on_step(self, step) -> None:
        super()._on_step(step)
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
