"""The comm bridge: streams the live tape of each cell to the JupyterLab side panel.

The panel and the bridge find each other through comm target ``"tapelab"``: the bridge opens a
comm when it loads, and registers the target so the panel can open one (after a kernel restart,
or when it meets a kernel that already runs). A frontend's answer reaches the kernel only when
the shell is idle (behind every queued cell of a "run all"), so a comm the bridge opened counts
as listened to for ``PROVISIONAL_S`` seconds without an answer; after that only a frontend that
has spoken (or opened the comm) is sent to. A kernel with no panel (nbclient, a console) thus
stops recording and sending on its own, and a comm the frontend closes stops it at once.
Deltas are batched and sent at most ``RATE`` times a second; at most ``MAX_NODES`` nodes a cell.
A send that fails drops the comm, never the cell.

Messages, kernel -> panel: ``hello``/``state`` {recording}, ``begin`` {cell, title}, ``delta``
(a view-model delta), ``end`` {cell, meta}, ``clear``, ``error`` {error, received}. Panel ->
kernel: ``hello``, ``set`` {recording: bool}, ``clear``.

Every panel -> kernel message is checked against ``SCHEMA`` before it acts: the payload must be
a JSON object whose ``type`` is one of the schema's, and each field the schema names must be
present with exactly its type (``{"type": "set", "recording": "no"}`` is refused, never read as
``bool("no")``); fields the schema does not name are ignored, so a newer panel still works. A
refused message is logged (logger ``tapelab.kernel.bridge``) and answered with ``error``.
"""
from __future__ import annotations

import logging
import time

from tapelab.widgets.live import LiveTape

__all__ = ["Bridge", "RATE", "MAX_NODES", "PROVISIONAL_S", "SCHEMA", "validate"]

log = logging.getLogger(__name__)

# panel -> kernel: message type -> {required field: its exact type}
SCHEMA: dict[str, dict[str, type]] = {
    "hello": {},
    "set": {"recording": bool},
    "clear": {},
}


def validate(data) -> str | None:
    """Why ``data`` is not a valid panel -> kernel message, or None when it is."""
    if not isinstance(data, dict):
        return f"a message must be a JSON object, got {type(data).__name__}"
    kind = data.get("type")
    if type(kind) is not str:
        return f"'type' must be a string, got {type(kind).__name__}"
    fields = SCHEMA.get(kind)
    if fields is None:
        return f"unknown message type {kind!r} (expected one of {', '.join(sorted(SCHEMA))})"
    for name, typ in fields.items():
        if name not in data:
            return f"{kind!r} needs the field {name!r}"
        if type(data[name]) is not typ:
            return f"{kind!r}: field {name!r} must be {typ.__name__}, got {type(data[name]).__name__} " \
                   f"{_short(data[name])}"
    return None


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."

TARGET = "tapelab"
RATE = 30
MAX_NODES = 5000
PROVISIONAL_S = 30.0


class Bridge:
    def __init__(self, shell):
        self.shell = shell
        self.comm = None
        self.confirmed = False       # a frontend has spoken on (or opened) the current comm
        self._opened = 0.0
        self.recording = False       # %tape on: every cell streams its tape
        self.recorder: LiveTape | None = None
        self.cells = 0
        self.sent = 0                # messages sent, for tests and %tape status
        self._depth = 0
        self._registered = False

    @property
    def listening(self) -> bool:
        if self.comm is None:
            return False
        return self.confirmed or time.monotonic() - self._opened < PROVISIONAL_S

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.shell.events.register("pre_run_cell", self._pre)
        self.shell.events.register("post_run_cell", self._post)
        try:
            from comm import get_comm_manager
            get_comm_manager().register_target(TARGET, self._on_open)
            self._registered = True
        except Exception:            # no kernel (plain IPython): nothing to stream to
            return
        self._open()

    def stop(self) -> None:
        for name, fn in (("pre_run_cell", self._pre), ("post_run_cell", self._post)):
            try:
                self.shell.events.unregister(name, fn)
            except ValueError:
                pass
        if self.recorder is not None and self.recorder.recording:
            self.recorder.__exit__(None, None, None)
        if self._registered:
            try:
                from comm import get_comm_manager
                get_comm_manager().unregister_target(TARGET, self._on_open)
            except Exception:
                pass
        if self.comm is not None:
            try:
                self.comm.close()
            except Exception:
                pass
        self.comm = None

    def _open(self) -> None:
        try:
            from comm import create_comm
            comm = create_comm(target_name=TARGET, data={"type": "hello", "recording": self.recording})
        except Exception:
            return
        self._adopt(comm, listening=False)

    def _on_open(self, comm, open_msg) -> None:
        """The panel opened a comm to us: it listens."""
        self._adopt(comm, listening=True)
        self.send({"type": "hello", "recording": self.recording})

    def _adopt(self, comm, listening: bool) -> None:
        self.comm = comm
        self.confirmed = listening
        self._opened = time.monotonic()
        comm.on_msg(self._on_msg)
        comm.on_close(lambda msg, c=comm: self._closed(c))

    def _closed(self, comm) -> None:
        if self.comm is comm:
            self.comm = None
            self.confirmed = False

    def _on_msg(self, msg) -> None:
        """Handle a panel message: validated against ``SCHEMA``; a bad one is logged and answered
        with an ``error`` message, and nothing it carries ever raises out of the handler."""
        self.confirmed = True        # whatever it sent, a peer is there to read the answer
        content = msg.get("content") if isinstance(msg, dict) else None
        data = content.get("data") if isinstance(content, dict) else None
        problem = validate(data)
        if problem is not None:
            self._refuse(problem, data)
            return
        kind = data["type"]
        try:
            if kind == "set":
                self.set_recording(data["recording"])
            elif kind == "clear":
                self.clear()
            elif kind == "hello":
                self.send({"type": "hello", "recording": self.recording})
        except Exception as e:       # a handler failure is reported, never lost in the comm layer
            log.exception("tapelab bridge: handling %r failed", kind)
            self.send({"type": "error", "error": f"handling {kind!r} failed: {type(e).__name__}: {e}",
                       "received": kind})

    def _refuse(self, problem: str, data) -> None:
        log.warning("tapelab bridge: refused a panel message: %s (payload %s)", problem, _short(data, 200))
        kind = data.get("type") if isinstance(data, dict) else None
        self.send({"type": "error", "error": f"invalid message: {problem}",
                   "received": kind if type(kind) is str else None})

    # ------------------------------------------------------------------ sending
    def send(self, data: dict) -> bool:
        """Send to the panel if one listens; never raises."""
        if self.comm is None or not self.listening:
            return False
        try:
            self.comm.send(data)
        except Exception:
            self.comm = None
            self.confirmed = False
            return False
        self.sent += 1
        return True

    def _send_delta(self, delta: dict) -> None:
        self.send({"type": "delta", **delta})

    def set_recording(self, on: bool) -> None:
        self.recording = on
        self.send({"type": "state", "recording": on})

    def clear(self) -> None:
        self.shell.user_ns.pop("_tape", None)
        self.send({"type": "clear"})

    # ------------------------------------------------------------------ recording
    def live(self, title: str = "", sinks=(), summaries: bool = True) -> LiveTape:
        """A LiveTape feeding ``sinks`` and, if a panel listens, the panel. The panel's ``begin``
        goes out with the first delta, so a cell that records nothing leaves the panel as it was."""
        sinks = list(sinks)
        rec = LiveTape(sinks, rate=RATE, max_nodes=MAX_NODES, summaries=summaries, title=title)
        rec.panel_cell = None
        if self.listening:
            def to_panel(delta, rec=rec):
                if rec.panel_cell is None:
                    self.cells += 1
                    rec.panel_cell = self.cells
                    self.send({"type": "begin", "cell": self.cells, "title": title})
                self._send_delta(delta)
            rec.sinks.append(to_panel)
        return rec

    def finish(self, rec: LiveTape) -> None:
        if rec.recording:
            rec.__exit__(None, None, None)
        if getattr(rec, "panel_cell", None) is not None:
            self.send({"type": "end", "cell": rec.panel_cell, "meta": rec.builder.meta()})

    def _pre(self, info=None) -> None:
        self._depth += 1
        if self._depth != 1 or not (self.recording and self.listening):
            return
        raw = getattr(info, "raw_cell", "") or ""
        if raw.lstrip().startswith("%%tape"):
            return                   # the cell magic streams this cell itself
        self.recorder = self.live(title=f"cell {self.cells + 1}")
        self.recorder.__enter__()

    def _post(self, result=None) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self.recorder is not None:
            rec, self.recorder = self.recorder, None
            self.finish(rec)
            self.shell.user_ns["_tape"] = rec
