"""Notebook views of tapelab: the view model (engine objects -> one JSON graph schema, DOT) and
the anywidget classes ``TapeView`` and ``TensorView`` (imported on first use, so the view model
works without anywidget installed)."""
from .viewmodel import MIME, SCHEMA, VERSION, GraphBuilder, graph_from_grad_fn, graph_from_tape, to_dot

__all__ = ["MIME", "SCHEMA", "VERSION", "GraphBuilder", "graph_from_tape", "graph_from_grad_fn", "to_dot",
           "TapeView", "TensorView", "LiveTape",
           "GraphView", "graph_from_fx", "diff_graphs"]


def __getattr__(name):
    if name in ("TapeView", "TensorView"):
        from . import views
        return getattr(views, name)
    if name == "GraphView":
        from .fxview import GraphView
        return GraphView
    if name in ("graph_from_fx", "diff_graphs"):
        from . import fx_adapter
        return getattr(fx_adapter, name)
    if name == "LiveTape":
        from .live import LiveTape
        return LiveTape
    raise AttributeError(name)
