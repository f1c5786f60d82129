"""Rich display of engine objects, registered with IPython from here (never in the engine):
a Tensor shows a TensorView-style summary, a ``grad_fn`` node its backward graph."""
from __future__ import annotations

__all__ = ["register", "unregister"]


def _tensor_html(t):
    from tapelab.widgets.tensor_view import tensor_html
    return tensor_html(t)


def _node_bundle(node, include=None, exclude=None):
    from tapelab.widgets.fallback import within_budget
    from tapelab.widgets.viewmodel import MIME, graph_from_grad_fn, to_html
    g = graph_from_grad_fn(node)
    return {MIME: within_budget(g), "text/html": to_html(g), "text/plain": repr(node)}


def _graph_module_bundle(gm, include=None, exclude=None):
    """A GraphModule shows its GraphView (graph beside its generated code); without anywidget, the
    view-model graph for the mime renderer and the code as HTML."""
    try:
        from tapelab.widgets.fxview import GraphView
        bundle = GraphView(gm)._repr_mimebundle_()
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data:
            data["text/plain"] = repr(gm)
            return data
    except ImportError:
        pass
    import html
    from tapelab.widgets.fx_adapter import graph_from_fx
    from tapelab.widgets.viewmodel import MIME, to_html
    g = graph_from_fx(gm)
    return {MIME: g, "text/html": f"<pre>{html.escape(gm.code)}</pre>" + to_html(g), "text/plain": repr(gm)}


def _capture_bundle(g, include=None, exclude=None):
    """A captured ``tapelab.graphs.Graph`` shows its CaptureView (never replayed to time it);
    without anywidget, the capture model for the mime renderer and a static summary."""
    from tapelab.widgets.captureview import CAPTURE_MIME, capture_html, capture_model
    try:
        from tapelab.widgets.captureview import CaptureView
        bundle = CaptureView(g)._repr_mimebundle_()
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data:
            data["text/plain"] = repr(g)
            return data
    except ImportError:
        pass
    m = capture_model(g)
    return {CAPTURE_MIME: m, "text/html": capture_html(m), "text/plain": repr(g)}


def register(shell) -> None:
    from tapelab import Tensor
    from tapelab.autograd.graph import Node
    fmt = shell.display_formatter
    fmt.formatters["text/html"].for_type(Tensor, _tensor_html)
    fmt.mimebundle_formatter.for_type(Node, _node_bundle)
    from tapelab.fx import GraphModule
    fmt.mimebundle_formatter.for_type(GraphModule, _graph_module_bundle)
    from tapelab.graphs import Graph as CapturedGraph
    fmt.mimebundle_formatter.for_type(CapturedGraph, _capture_bundle)


def unregister(shell) -> None:
    from tapelab import Tensor
    from tapelab.autograd.graph import Node
    fmt = shell.display_formatter
    from tapelab.fx import GraphModule
    from tapelab.graphs import Graph as CapturedGraph
    for f, cls in ((fmt.formatters["text/html"], Tensor), (fmt.mimebundle_formatter, Node),
                   (fmt.mimebundle_formatter, GraphModule), (fmt.mimebundle_formatter, CapturedGraph)):
        try:
            f.pop(cls)
        except KeyError:
            pass
