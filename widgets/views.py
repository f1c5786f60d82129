"""The anywidget classes: TapeView (a tape's graph, live) and TensorView."""
from __future__ import annotations

import pathlib

import anywidget
import traitlets

from .fallback import within_budget
from .tensor_view import summary_html, tensor_summary
from .viewmodel import MIME, SCHEMA, VERSION, graph_from_grad_fn, graph_from_tape, to_dot, to_html

__all__ = ["TapeView", "TensorView"]

_ESM = pathlib.Path(__file__).parent / "static" / "tapelab.js"


def _empty(title: str = "") -> dict:
    return {"schema": SCHEMA, "version": VERSION, "nodes": [], "edges": [], "groups": [],
            "meta": {"title": title, "forward": 0, "backward": 0, "total": 0, "truncated": False}}


def as_graph(obj, title: str = "", max_nodes: int | None = 5000) -> dict:
    """The view-model graph of what a TapeView is given: a graph dict as is, a ``tapelab.tape``
    (or a list of its records), a live recorder (``LiveTape``: its ``graph()``), a ``grad_fn``
    node, or a tensor (the backward graph behind its ``grad_fn``)."""
    if isinstance(obj, dict):
        return obj
    if callable(getattr(obj, "graph", None)):                       # LiveTape
        return obj.graph()
    if hasattr(obj, "next_functions"):                              # a grad_fn node
        return graph_from_grad_fn(obj, title=title)
    if hasattr(obj, "grad_fn") and not hasattr(obj, "nodes"):       # a tensor
        if obj.grad_fn is None:
            raise ValueError("TapeView: this tensor has no grad_fn (a leaf, or made without gradient)")
        return graph_from_grad_fn(obj.grad_fn, title=title)
    if hasattr(obj, "nodes") or isinstance(obj, (list, tuple)):     # a tape, or its records
        return graph_from_tape(obj, title=title, max_nodes=max_nodes)
    raise TypeError(f"TapeView takes a tapelab.tape, a LiveTape, a grad_fn, a tensor or a graph dict, "
                    f"not {type(obj).__name__}")


class TapeView(anywidget.AnyWidget):
    """The graph of a tape: pan, zoom, module groups to expand, hover cards, search; grows live.

    ``TapeView(t)`` shows a recorded tape (also a LiveTape, a ``grad_fn``, a tensor or a
    view-model graph dict: see ``as_graph``); ``TapeView.from_tape(t)`` is the same;
    ``send_delta`` appends (the ``%%tape`` magic feeds it from a ``LiveTape``).
    """

    _esm = _ESM
    _view = traitlets.Unicode("tape").tag(sync=True)
    graph = traitlets.Dict().tag(sync=True)
    running = traitlets.Bool(False).tag(sync=True)

    def __init__(self, graph=None, title: str = "", max_nodes: int | None = 5000, **kwargs):
        g = as_graph(graph, title=title, max_nodes=max_nodes) if graph is not None else None
        super().__init__(graph=g or _empty(title), **kwargs)

    @classmethod
    def from_tape(cls, t, title: str = "", max_nodes: int | None = 5000) -> "TapeView":
        return cls(graph_from_tape(t, title=title, max_nodes=max_nodes))

    def send_delta(self, delta: dict) -> None:
        self.send({"type": "delta", **delta})

    def set_running(self, on: bool) -> None:
        self.running = on
        self.send({"type": "running", "running": on})

    def to_dot(self) -> str:
        return to_dot(self.graph)

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None and self.graph.get("nodes"):
            # saved notebooks keep this: the labextension's mime renderer draws it without a kernel
            data[MIME] = within_budget(self.graph)
            data["text/html"] = to_html(self.graph)
        return bundle


class TensorView(anywidget.AnyWidget):
    """Shape, dtype, device, statistics, histogram and (2-D) heatmap of a tensor."""

    _esm = _ESM
    _view = traitlets.Unicode("tensor").tag(sync=True)
    data = traitlets.Dict().tag(sync=True)

    def __init__(self, tensor=None, name: str = "", **kwargs):
        super().__init__(data=tensor_summary(tensor, name=name) if tensor is not None else {}, **kwargs)

    def show(self, tensor, name: str = "") -> None:
        self.data = tensor_summary(tensor, name=name)

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None and self.data:
            data["text/html"] = summary_html(self.data)     # saved notebooks keep the summary
        return bundle
