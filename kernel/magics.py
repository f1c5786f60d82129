"""``%%tape`` (record a cell and show its TapeView below it) and ``%tape on|off|clear|status``."""
from __future__ import annotations

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

__all__ = ["TapeMagics"]

USAGE = "usage: %tape on | off | clear | status   (or %%tape as a cell magic)"


@magics_class
class TapeMagics(Magics):
    def __init__(self, shell, bridge):
        super().__init__(shell)
        self.bridge = bridge

    @line_cell_magic
    def tape(self, line: str = "", cell: str | None = None):
        """Record the tape of a cell (``%%tape``) or steer streaming to the inspector panel.

        ``%%tape`` runs the cell under a live tape: a TapeView is shown below the cell and grows
        while the cell runs (the side panel too, when one listens); the tape is kept as ``_tape``.
        ``%tape on`` streams every following cell's tape to the panel, ``%tape off`` stops,
        ``%tape clear`` clears the panel and ``_tape``, ``%tape status`` prints the state.
        """
        if cell is not None:
            return self._record(line.strip(), cell)
        arg = line.strip()
        if arg == "on":
            self.bridge.set_recording(True)
        elif arg == "off":
            self.bridge.set_recording(False)
        elif arg == "clear":
            self.bridge.clear()
        elif arg in ("", "status"):
            b = self.bridge     # connected = messages go out to a panel (listening), as send() decides
            panel = ("connected" if b.confirmed else "connected (it has not answered yet)") if b.listening \
                else "not connected"
            print(f"tape streaming {'on' if b.recording else 'off'}; panel {panel}; {b.sent} messages sent")
        else:
            print(USAGE)

    def _record(self, title: str, cell: str):
        from tapelab.widgets.views import TapeView

        view = TapeView(title=title)
        handle = display(view, display_id=True)
        rec = self.bridge.live(title=title or "%%tape", sinks=[view.send_delta])
        view.set_running(True)
        try:
            with rec:
                self.shell.run_cell(cell, store_history=False)
        finally:
            self.bridge.finish(rec)
            view.graph = rec.graph()
            view.set_running(False)
            if handle is not None:
                handle.update(view)   # the saved output now carries the final graph
            self.shell.user_ns["_tape"] = rec
