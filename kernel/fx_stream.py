"""Traced FX graphs stream to the JupyterLab side panel, as tapes do.

``install(bridge)`` makes ``tapelab.fx`` emit ``graph_traced`` (``tapelab.widgets.fx_adapter.
install_trace_hook``: the engine itself is not edited) and subscribes to it: every graph traced
while a panel listens is sent as ``begin`` / ``delta`` (the whole view-model graph) / ``end``,
the same messages a cell's tape uses, so the panel needs no new code. A graph that fails to
convert is skipped: showing must never break tracing.
"""
from __future__ import annotations

__all__ = ["install", "uninstall", "send_graph"]

_state: dict = {}


def send_graph(bridge, payload) -> bool:
    """Send one traced graph (a ``GraphTraced``, a GraphModule or a Graph) to the panel."""
    if bridge is None or not bridge.listening:
        return False
    from tapelab.widgets.fx_adapter import graph_from_fx

    graph = getattr(payload, "graph", payload)
    module = getattr(payload, "module", None)
    root = getattr(payload, "root", None)
    name = getattr(payload, "name", "") or type(module or root or graph).__name__
    try:
        g = graph_from_fx(module if module is not None else graph, title=f"fx: {name}", root=root)
    except Exception:
        return False
    bridge.cells += 1
    cell = bridge.cells
    bridge.send({"type": "begin", "cell": cell, "title": g["meta"]["title"]})
    bridge.send({"type": "delta", **g, "updates": []})
    bridge.send({"type": "end", "cell": cell, "meta": g["meta"]})
    return True


def install(bridge) -> None:
    if "sub" in _state:
        return
    from tapelab import events
    from tapelab.widgets.fx_adapter import install_trace_hook

    _state["hooked"] = install_trace_hook()

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
    if _state.pop("hooked", False):
        from tapelab.widgets.fx_adapter import uninstall_trace_hook
        uninstall_trace_hook()
