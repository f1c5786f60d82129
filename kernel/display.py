"""Rich display of engine objects, registered with IPython from here (never in the engine):
a Tensor shows a TensorView-style summary, a ``grad_fn`` node its backward graph."""
from __future__ import annotations

__all__ = ["register", "unregister"]


def _tensor_html(t):
    from tapelab.widgets.tensor_view import tensor_html
    return tensor_html(t)


def _node_bundle(node, include=None, exclude=None):
    from tapelab.widgets.viewmodel import MIME, graph_from_grad_fn, to_html
    g = graph_from_grad_fn(node)
    return {MIME: g, "text/html": to_html(g), "text/plain": repr(node)}


def register(shell) -> None:
    from tapelab import Tensor
    from tapelab.autograd.graph import Node
    fmt = shell.display_formatter
    fmt.formatters["text/html"].for_type(Tensor, _tensor_html)
    fmt.mimebundle_formatter.for_type(Node, _node_bundle)


def unregister(shell) -> None:
    from tapelab import Tensor
    from tapelab.autograd.graph import Node
    fmt = shell.display_formatter
    for f, cls in ((fmt.formatters["text/html"], Tensor), (fmt.mimebundle_formatter, Node)):
        try:
            f.pop(cls)
        except KeyError:
            pass
