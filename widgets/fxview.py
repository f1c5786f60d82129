"""GraphView: an FX graph drawn by the tape view's renderer, with its generated code beside it.

Hovering a node highlights the line of code that defines it, hovering a line highlights its
node (``def forward(...)`` its placeholders, ``return`` the output). ``GraphView.diff(before,
after)`` puts two graphs side by side, coloured by what a pass did: added (green), removed
(red), changed (amber); hovering a node highlights it (and its code line) in both panes.

>>> gm = tapelab.fx.symbolic_trace(model)
>>> ShapeProp(gm).propagate(x)        # optional: shapes on the edges
>>> GraphView(gm)
>>> before = graph_from_fx(gm)        # a snapshot: passes edit the graph in place
>>> my_pass(gm); GraphView.diff(before, gm)
"""
from __future__ import annotations

import html
import pathlib

import anywidget
import traitlets

from .fx_adapter import diff_graphs, graph_from_fx
from .fallback import graph_svg, within_budget
from .viewmodel import MIME, to_dot

__all__ = ["GraphView"]

_ESM = pathlib.Path(__file__).parent / "static" / "tapelab.js"


def _pane(graph: dict) -> dict:
    return {"title": graph.get("meta", {}).get("title", ""), "graph": graph,
            "code": graph.get("meta", {}).get("code", "")}


class GraphView(anywidget.AnyWidget):
    """An FX graph (or two, as a diff) with its generated code; see the module docstring.

    Args:
        gm: a ``GraphModule``, ``Graph`` or a view-model graph from ``graph_from_fx``.
        title: shown above the pane (defaults to the module's class name).
    """

    _esm = _ESM
    _view = traitlets.Unicode("fx").tag(sync=True)
    panes = traitlets.List().tag(sync=True)
    summary = traitlets.Dict().tag(sync=True)
    hovered = traitlets.Unicode("").tag(sync=True)   # the node name under the cursor (from the view)

    def __init__(self, gm=None, title: str = "", **kwargs):
        if gm is not None:
            g = gm if isinstance(gm, dict) else graph_from_fx(gm, title=title)
            kwargs["panes"] = [_pane(g)]
        super().__init__(**kwargs)

    @classmethod
    def diff(cls, before, after, titles=("before", "after")) -> "GraphView":
        """Two graphs side by side, nodes matched by name and target (see ``diff_graphs``)."""
        a, b, count = diff_graphs(before, after, titles)
        return cls(panes=[_pane(a), _pane(b)], summary=count)

    @property
    def graph(self) -> dict:
        """The view-model graph shown (the ``after`` one of a diff)."""
        return self.panes[-1]["graph"] if self.panes else {}

    def to_dot(self) -> str:
        return to_dot(self.graph)

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None and self.panes:
            # saved notebooks keep a kernel-free picture: the graph for the mime renderer, the
            # code (and the diff summary) as static HTML
            data[MIME] = within_budget(self.graph)
            parts = []
            if self.summary:
                parts.append("<p>" + html.escape(" · ".join(f"{k} {v}" for k, v in self.summary.items())) + "</p>")
            for p in self.panes:       # each pane drawn (a diff keeps its colours), its code folded
                parts.append(f"<div style='display:inline-block;vertical-align:top;margin-right:16px'>"
                             f"<b>{html.escape(p['title'])}</b>{graph_svg(p['graph'])}"
                             f"<details><summary>code</summary><pre>{html.escape(p['code'])}</pre></details></div>")
            data["text/html"] = "<div class='tapelab-static'>" + "".join(parts) + "</div>"
        return bundle
