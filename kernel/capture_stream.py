"""Captured graphs stream to the JupyterLab side panel.

``install(bridge)`` subscribes to the engine's ``capture_done`` event: every graph captured
while a panel listens is sent as ``{"type": "capture", "capture": <capture model>}``
(``tapelab.widgets.captureview.capture_model``: steps with shapes, buffers, pool). The event's
payload is the graph's summary with the Graph itself under ``"graph"`` (``Graph.buffers()``
gives shapes and buffer roles); a payload without it still shows the steps. After each cell, if the last captured graph was replayed since, the panel gets
``{"type": "capture", "update": true, ...}`` with the new replay count. Showing never breaks
capturing: any error here is swallowed.
"""
from __future__ import annotations

import weakref

__all__ = ["install", "uninstall", "send_capture"]

_state: dict = {}


def send_capture(bridge, g=None, summary: dict | None = None, update: bool = False) -> bool:
    if bridge is None or not bridge.listening:
        return False
    from tapelab.widgets.captureview import capture_model, model_from_summary
    try:
        title = f"capture on {g.device}" if g is not None else "capture"
        m = capture_model(g, title=title) if g is not None else model_from_summary(summary or {}, title=title)
    except Exception:
        return False
    return bridge.send({"type": "capture", "capture": m, "update": update})


def install(bridge) -> None:
    if "sub" in _state:
        return
    from tapelab import events

    def on_capture(summary, bridge=bridge):
        try:
            if not bridge.listening:
                return
            g = summary.get("graph")
            _state["last"] = (weakref.ref(g), g.replays) if g is not None else None
            send_capture(bridge, g, {k: v for k, v in summary.items() if k != "graph"})
        except Exception:
            pass

    def post(result=None, bridge=bridge):
        try:
            last = _state.get("last")
            if not last:
                return
            g = last[0]()
            if g is None or not g.captured:
                _state["last"] = None
                return
            if g.replays != last[1]:
                _state["last"] = (last[0], g.replays)
                send_capture(bridge, g, update=True)
        except Exception:
            pass

    _state["sub"] = events.subscribe("capture_done", on_capture)
    _state["post"] = post
    _state["shell"] = bridge.shell
    bridge.shell.events.register("post_run_cell", post)


def uninstall() -> None:
    sub = _state.pop("sub", None)
    if sub is not None:
        sub.unsubscribe()
    post, shell = _state.pop("post", None), _state.pop("shell", None)
    if post is not None and shell is not None:
        try:
            shell.events.unregister("post_run_cell", post)
        except ValueError:
            pass
    _state.pop("last", None)
