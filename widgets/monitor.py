"""Monitor: live loss/metric curves and step time while a training loop runs.

    mon = tapelab.widgets.Monitor(title="digits")
    display(mon)
    for step in range(n):
        ...
        mon.log(step, loss=loss.item(), acc=acc)

``log`` costs a few list appends; the frontend hears of new points at most ``rate`` times a
second, as small custom messages that go out while the cell still runs. Every
``snapshot_s`` seconds (and when the cell ends) the full history is set on the ``data`` trait,
so a view created later, or a saved notebook, shows everything. Past ``max_points`` points the
history is thinned by half (every other point kept), so a long loop stays small.
"""
from __future__ import annotations

import math
import time

import anywidget
import traitlets

from .views import _ESM

__all__ = ["Monitor"]


def _clean(v):
    if v is None:
        return None
    try:
        f = float(v.item() if hasattr(v, "item") else v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class Monitor(anywidget.AnyWidget):
    """Live curves of the metrics passed to ``log`` and of the time per step.

    Args:
        title: shown above the curves.
        rate: most updates sent to the frontend per second.
        max_points: points kept per series before the history is thinned.
        snapshot_s: seconds between full-history syncs (also done when the cell ends).
    """

    _esm = _ESM
    _view = traitlets.Unicode("monitor").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    data = traitlets.Dict().tag(sync=True)

    def __init__(self, title: str = "", rate: float = 10.0, max_points: int = 2000, snapshot_s: float = 2.0,
                 **kwargs):
        super().__init__(title=title, data={"steps": [], "step_ms": [], "series": {}}, **kwargs)
        self.interval = 1.0 / rate
        self.max_points = int(max_points)
        self.snapshot_s = snapshot_s
        self.steps: list = []
        self.step_ms: list = []
        self.series: dict = {}
        self.sent = 0                 # messages sent (deltas and snapshots), for tests
        self.logged = 0
        self._pending: list = []
        self._last_log: float | None = None
        self._last_send = 0.0
        self._last_snapshot = time.perf_counter()
        self._hooked = False
        self._stride = 1              # after thinning, keep one logged point in _stride

    # ------------------------------------------------------------------ logging
    def log(self, step: int | None = None, **metrics) -> None:
        """Record ``metrics`` (numbers or 0-d tensors) at ``step`` (default: the next one)."""
        now = time.perf_counter()
        dt = None if self._last_log is None else (now - self._last_log) * 1e3
        self._last_log = now
        self.logged += 1
        if step is None:
            step = self.steps[-1] + 1 if self.steps else 0
        if self._stride > 1 and self.logged % self._stride:
            self._maybe_send(now)
            return
        point = {"step": int(step), "step_ms": None if dt is None else round(dt, 3),
                 "values": {k: _clean(v) for k, v in metrics.items()}}
        self._append(point)
        self._pending.append(point)
        self._hook()
        self._maybe_send(now)

    def _append(self, p: dict) -> None:
        n = len(self.steps)
        self.steps.append(p["step"])
        self.step_ms.append(p["step_ms"])
        for k, v in p["values"].items():
            if k not in self.series:
                self.series[k] = [None] * n
            self.series[k].append(v)
        for k, s in self.series.items():
            if len(s) < n + 1:
                s.append(None)
        if len(self.steps) > self.max_points:          # thin: keep every other point
            self.steps = self.steps[::2]
            self.step_ms = self.step_ms[::2]
            self.series = {k: s[::2] for k, s in self.series.items()}
            self._stride *= 2
            self._last_snapshot = 0.0                  # the frontend must get the thinned history

    def _maybe_send(self, now: float) -> None:
        if now - self._last_send < self.interval:
            return
        self._last_send = now
        if now - self._last_snapshot >= self.snapshot_s:
            self._snapshot(now)
        elif self._pending:
            self.send({"type": "points", "points": self._pending})
            self._pending = []
            self.sent += 1

    def _snapshot(self, now: float | None = None) -> None:
        self._last_snapshot = now if now is not None else time.perf_counter()
        self._pending = []
        self.data = {"steps": list(self.steps), "step_ms": list(self.step_ms),
                     "series": {k: list(v) for k, v in self.series.items()}}
        self.sent += 1

    def flush(self) -> None:
        """Send everything logged so far (the full history)."""
        self._snapshot()

    def _hook(self) -> None:
        """Flush when the running cell ends (the last points fall between two throttled sends)."""
        if self._hooked:
            return
        try:
            from IPython import get_ipython
            ip = get_ipython()
        except ImportError:
            ip = None
        if ip is None:
            return

        def done(result=None):
            self._hooked = False
            try:
                ip.events.unregister("post_run_cell", done)
            except ValueError:
                pass
            self.flush()

        ip.events.register("post_run_cell", done)
        self._hooked = True

    def reset(self) -> None:
        self.steps, self.step_ms, self.series = [], [], {}
        self._pending, self._last_log, self._stride, self.logged = [], None, 1, 0
        self._snapshot()

    def history(self) -> dict:
        """``{"steps": [...], "step_ms": [...], "series": {name: [...]}}`` (thinned as sent)."""
        return {"steps": list(self.steps), "step_ms": list(self.step_ms),
                "series": {k: list(v) for k, v in self.series.items()}}
