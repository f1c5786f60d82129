"""Traced FX graphs stream to the JupyterLab side panel, as tapes do.

``install(bridge)`` subscribes to the engine's ``graph_traced`` event (``tapelab.fx`` emits it
for every ``symbolic_trace`` and ``trace_from_tape``): every graph traced while a panel listens
is sent as ``begin`` / ``delta`` (the whole view-model graph) / ``end``, the same messages a
cell's tape uses, so the panel needs no new code. A graph that fails to convert is skipped:
showing must never break tracing.
"""
from __future__ import annotations

from tapelab import events

__all__ = ["install", "uninstall", "send_graph"]

_state: dict = {}


def send_graph(bridge, payload) -> bool:
    """Send one traced graph (an ``events.GraphTraced``, a GraphModule or a Graph) to the panel."""
    if bridge is None or not bridge.listening:
        return False
    from tapelab.widgets.fx_adapter import graph_from_fx

    if isinstance(payload, events.GraphTraced):
        graph, module, root, name = payload.graph, payload.module, payload.root, payload.name
    else:
        graph, module, root, name = payload, None, None, type(payload).__name__
    try:
        g = graph_from_fx(module if module is not None else graph, title=f"fx: {name}",
                          root=root if hasattr(root, "named_modules") else None)
    except Exception:
        return False
    bridge.cells += 1
    cell = bridge.cells
    bridge.send({"type": "begin", "cell": cell, "title": g["meta"]["title"]})
    bridge.send({"type": "delta", **g, "updates": []})
    bridge.send({"type": "end", "cell": cell, "meta": g["meta"]})
    return True


def install(bridge) -> None:
    """Stream every graph traced from now on to ``bridge`` (idempotent)."""
    if "sub" in _state:
        return

    def on_traced(payload, bridge=bridge):
        try:
            send_graph(bridge, payload)
        except Exception:
            pass
    _state["sub"] = events.subscribe("graph_traced", on_traced)


def uninstall() -> None:
    sub = _state.pop("sub", None)
    if sub is not None:
        sub.unsubscribe()
