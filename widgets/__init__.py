"""Notebook views of tapelab: the view model (engine objects -> one JSON graph schema, DOT) and
the anywidget classes ``TapeView`` and ``TensorView`` (imported on first use, so the view model
works without anywidget installed)."""
from .viewmodel import MIME, SCHEMA, VERSION, GraphBuilder, graph_from_grad_fn, graph_from_tape, to_dot

__all__ = ["MIME", "SCHEMA", "VERSION", "GraphBuilder", "graph_from_tape", "graph_from_grad_fn", "to_dot",
           "TapeView", "TensorView", "LiveTape", "ProfileView", "Monitor", "profile_model", "plots",
           "GraphView", "graph_from_fx", "diff_graphs", "graph_from_onnx", "Debugger", "CaptureView", "capture_model"]


def __getattr__(name):
    if name in ("TapeView", "TensorView"):
        from . import views
        return getattr(views, name)
    if name in ("ProfileView", "profile_model"):
        from . import profileview
        return getattr(profileview, name)
    if name == "Monitor":
        from .monitor import Monitor
        return Monitor
    if name == "plots":              # matplotlib is imported by the plotting functions, not here
        import importlib
        return importlib.import_module(__name__ + ".plots")
    if name == "GraphView":
        from .fxview import GraphView
        return GraphView
    if name in ("graph_from_fx", "diff_graphs"):
        from . import fx_adapter
        return getattr(fx_adapter, name)
    if name == "graph_from_onnx":      # the onnx package is imported when a model is read
        from .onnx_adapter import graph_from_onnx
        return graph_from_onnx
    if name == "Debugger":
        from .debugger import Debugger
        return Debugger
    if name in ("CaptureView", "capture_model"):
        from . import captureview
        return getattr(captureview, name)
    if name == "LiveTape":
        from .live import LiveTape
        return LiveTape
    raise AttributeError(name)
