"""``%%profile``: profile a cell and show a ProfileView below it; every finished profile also goes
to the inspector panel.

    %%profile [--no-memory] [--no-shapes] [--stack] [--rows N] [--table] [-o NAME] [title...]

The cell runs under ``tapelab.profiler.profile`` (shapes, memory, FLOPs and module paths on), the
profiler is kept as ``_prof`` (and ``NAME`` with ``-o``), ``--table`` also prints
``key_averages().table()``. The ``ProfileStreamer`` subscribes to the engine's ``profile_ready``
event, so any ``with profile():`` in the kernel (this magic's, or the user's own, each schedule
cycle) reaches the panel as a ``profile`` message on the bridge's comm, at most one every
``MIN_INTERVAL_S`` seconds (the latest one waiting is sent when the cell ends). Nothing is built
when no panel listens.
"""
from __future__ import annotations

import argparse
import shlex
import time

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.display import display

__all__ = ["ProfileMagics", "ProfileStreamer", "PANEL_MAX_EVENTS"]

PANEL_MAX_EVENTS = 5000
MIN_INTERVAL_S = 0.5


class ProfileStreamer:
    """Sends finished profiles to the panel through the bridge."""

    def __init__(self, bridge):
        self.bridge = bridge
        self.sent = 0
        self._pending = None
        self._last = 0.0
        self._sub = None
        self.title = ""              # the running %%profile cell's title, sent with its profile

    def start(self) -> None:
        from tapelab import events
        self._sub = events.subscribe("profile_ready", self._ready)
        self.bridge.shell.events.register("post_run_cell", self._post)

    def stop(self) -> None:
        if self._sub is not None:
            self._sub.unsubscribe()
            self._sub = None
        try:
            self.bridge.shell.events.unregister("post_run_cell", self._post)
        except ValueError:
            pass

    def _ready(self, ev) -> None:
        if not self.bridge.listening:
            return
        self._pending = (ev.trace, ev.step_num, self.title)
        if time.monotonic() - self._last >= MIN_INTERVAL_S:
            self.flush()

    def _post(self, result=None) -> None:
        self.flush()

    def flush(self) -> None:
        if self._pending is None:
            return
        prof, step, title = self._pending
        self._pending = None
        try:
            self.send(prof, title or f"step {step}")
        except Exception:            # a broken view must never break the cell
            pass

    def send(self, prof, title: str = "") -> bool:
        from tapelab.widgets.profileview import profile_model
        if not self.bridge.listening:
            return False
        self._last = time.monotonic()
        model = profile_model(prof, title=title, max_events=PANEL_MAX_EVENTS)
        ok = self.bridge.send({"type": "profile", "profile": model})
        self.sent += ok
        return ok


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%profile", add_help=False)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--no-shapes", action="store_true")
    p.add_argument("--stack", action="store_true")
    p.add_argument("--table", action="store_true")
    p.add_argument("--rows", type=int, default=15)
    p.add_argument("-o", dest="out", default=None)
    p.add_argument("title", nargs="*")
    return p


@magics_class
class ProfileMagics(Magics):
    def __init__(self, shell, bridge=None, streamer: ProfileStreamer | None = None):
        super().__init__(shell)
        self.bridge = bridge
        self.streamer = streamer

    @cell_magic
    def profile(self, line: str = "", cell: str = ""):
        """Profile the cell with ``tapelab.profiler`` and show a ProfileView below it.

        Options: ``--no-memory``, ``--no-shapes``, ``--stack`` (keep Python frames), ``--table``
        (also print the ``key_averages`` table, ``--rows N`` rows), ``-o NAME`` (keep the profiler
        as ``NAME`` too; it is always ``_prof``); the rest of the line is the title.
        """
        from tapelab.profiler import profile
        from tapelab.widgets.profileview import ProfileView

        try:
            a = _parser().parse_args(shlex.split(line))
        except SystemExit:
            print(_parser().format_usage().replace("usage: ", "usage: %"))
            return
        title = " ".join(a.title) or "%%profile"
        prof = profile(record_shapes=not a.no_shapes, profile_memory=not a.no_memory, with_stack=a.stack,
                       with_flops=True, with_modules=True)
        if self.streamer is not None:
            self.streamer.title = title
        try:
            with prof:
                self.shell.run_cell(cell, store_history=False)
        finally:
            if self.streamer is not None:
                self.streamer.title = ""
        self.shell.user_ns["_prof"] = prof
        if a.out:
            self.shell.user_ns[a.out] = prof
        if prof.trace is None:
            print("%%profile: nothing was recorded")
            return
        if a.table:
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.rows))
        display(ProfileView(prof, title=title))
