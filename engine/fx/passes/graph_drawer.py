"""``FxGraphDrawer``: an FX graph as a ``pydot.Dot``, with PyTorch's conventions.

As ``torch.fx.passes.graph_drawer``: one record-shaped node per graph node named after it
(``name=%x|op_code=...|target=...|num_users=...``, and dtype/shape/requires_grad/stride after
``ShapeProp``), one edge per use, a node per parameter and buffer of each called module
(``<node>.<param>``, salmon) with an edge into the call, colours by opcode (call targets hashed
to a colour). Fusion groups, when a pass marked them, become clusters. ``pydot`` is optional
(the ``viz`` extra); without it the drawer raises, as PyTorch's does.

>>> FxGraphDrawer(gm, "mlp").get_dot_graph().write_svg("mlp.svg")     # needs Graphviz's dot
>>> print(FxGraphDrawer(gm, "mlp").get_dot_graph().to_string())
"""
from __future__ import annotations

import hashlib

from ..graph_module import GraphModule
from ..node import Node, qualified_name

__all__ = ["FxGraphDrawer"]

_OP_COLORS = {"placeholder": '"AliceBlue"', "call_module": "LemonChiffon1", "get_attr": "LightGrey",
              "output": "PowderBlue"}
_TARGET_COLORS = ("CadetBlue1", "Coral", "DarkOliveGreen1", "DarkSeaGreen1", "GhostWhite", "Khaki1",
                  "LavenderBlush1", "LightSkyBlue", "MistyRose1", "MistyRose2", "PaleTurquoise2", "PeachPuff1",
                  "Salmon", "Thistle1", "Thistle3", "Wheat1")
_ROUNDED = '"filled,rounded"'


def _pydot():
    try:
        import pydot
    except ModuleNotFoundError:
        raise RuntimeError("FxGraphDrawer requires the pydot package to be installed "
                           "(pip install pydot, or tapelab's viz extra)") from None
    return pydot


def _record_escape(s: str) -> str:
    """Braces, bars and angle brackets delimit fields in a record label."""
    for c in "{}|<>":
        s = s.replace(c, "\\" + c)
    return s


def _target_name(target) -> str:
    return _record_escape(target if isinstance(target, str) else qualified_name(target))


def _arg(a) -> str:
    if isinstance(a, Node):
        return "%" + a.name
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_arg(x) for x in a[:8]) + (", ..." if len(a) > 8 else "")
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    return repr(a)


def _module_at(root, path: str):
    obj = root
    for atom in path.split("."):
        if not hasattr(obj, atom):
            raise RuntimeError(f"{type(obj).__name__} has no attribute {atom!r} (FxGraphDrawer: call_module {path!r})")
        obj = getattr(obj, atom)
    return obj


class FxGraphDrawer:
    """Draws a GraphModule's graph (and each GraphModule it calls) as ``pydot.Dot`` graphs.

    Args:
        graph_module: the GraphModule to draw. name: the Dot graph's name.
        ignore_getattr: leave ``get_attr`` nodes out.
        ignore_parameters_and_buffers: no nodes for called modules' parameters and buffers.
        skip_node_names_in_args: leave node references out of the args/kwargs fields.
        dot_graph_shape: the Graphviz node shape (``record`` by default).
    """

    def __init__(self, graph_module: GraphModule, name: str, ignore_getattr: bool = False,
                 ignore_parameters_and_buffers: bool = False, skip_node_names_in_args: bool = True,
                 dot_graph_shape: str | None = None):
        self._pydot = _pydot()
        self._name = name
        self.dot_graph_shape = dot_graph_shape or "record"
        opts = (ignore_getattr, ignore_parameters_and_buffers, skip_node_names_in_args)
        self._dot_graphs = {name: self._to_dot(graph_module, name, *opts)}
        for node in graph_module.graph.nodes:
            if node.op == "call_module":
                sub = _module_at(graph_module, node.target)
                if isinstance(sub, GraphModule):
                    self._dot_graphs[f"{name}_{node.target}"] = self._to_dot(sub, f"{name}_{node.target}", *opts)

    def get_dot_graph(self, submod_name: str | None = None):
        """The ``pydot.Dot`` of the graph (or of the called GraphModule ``submod_name``)."""
        return self.get_main_dot_graph() if submod_name is None else self.get_submod_dot_graph(submod_name)

    def get_main_dot_graph(self):
        return self._dot_graphs[self._name]

    def get_submod_dot_graph(self, submod_name: str):
        return self._dot_graphs[f"{self._name}_{submod_name}"]

    def get_all_dot_graphs(self) -> dict:
        return self._dot_graphs

    # ------------------------------------------------------------------ building
    def _style(self, node: Node) -> dict:
        color = _OP_COLORS.get(node.op)
        if color is None:
            digest = hashlib.md5(_target_name(node.target).encode(), usedforsecurity=False).hexdigest()
            color = _TARGET_COLORS[int(digest[:8], 16) % len(_TARGET_COLORS)]
        return {"shape": self.dot_graph_shape, "fillcolor": color, "style": _ROUNDED, "fontcolor": "#000000"}

    @staticmethod
    def _fields(prefix: str, items: list, close: str, skip_nodes: bool) -> str:
        """``|args=(...)``: one item inline, several one per line (left-aligned)."""
        if skip_nodes:
            items = [s for s in items if "%" not in s]
        if not items:
            return ""
        if len(items) == 1:
            return "|" + _record_escape(prefix + items[0] + close)
        return ("|" + _record_escape(prefix) + "\\l" + ",\\n".join(map(_record_escape, items)) + ",\\n"
                + _record_escape(close) + "\\l")

    @staticmethod
    def _tensor_label(meta) -> str:
        if meta is None or not hasattr(meta, "shape"):
            return ""
        return "".join(f"|{k}={v}\\n" for k, v in (("dtype", meta.dtype), ("shape", tuple(meta.shape)),
                                                   ("requires_grad", meta.requires_grad),
                                                   ("stride", getattr(meta, "stride", None))))

    def _label(self, gm, node: Node, skip_nodes: bool) -> str:
        label = "{" + f"name=%{node.name}|op_code={node.op}\n"
        if node.op == "call_module":
            leaf = _module_at(gm, node.target)
            label += "\\n" + _record_escape(f"{type(leaf).__module__}.{type(leaf).__qualname__}") + "\\n|"
            label += "\\n".join(f"{c}: {getattr(leaf, c)}" for c in getattr(leaf, "__constants__", ())) + "\\n"
        else:
            label += f"|target={_target_name(node.target)}\\n"
            if node.args:
                label += self._fields("args=(", [_arg(a) for a in node.args], ")", skip_nodes)
            if node.kwargs:
                label += self._fields("kwargs={", [f"{k}: {_arg(v)}" for k, v in node.kwargs.items()], "}", skip_nodes)
            label += f"|num_users={len(node.users)}\\n"
        return label + self._tensor_label(node.meta.get("tensor_meta")) + "}"

    def _to_dot(self, gm, name: str, ignore_getattr: bool, ignore_params: bool, skip_nodes: bool):
        pydot = self._pydot
        dot = pydot.Dot(name, rankdir="TB")
        clusters: dict = {}
        for node in gm.graph.nodes:
            if ignore_getattr and node.op == "get_attr":
                continue
            dnode = pydot.Node(node.name, label=self._label(gm, node, skip_nodes), **self._style(node))
            group = node.meta.get("fusion_group")
            if group is None:
                dot.add_node(dnode)
            else:
                if group not in clusters:
                    clusters[group] = pydot.Cluster(f"fusion_{group}", label=f"fusion group {group}", style="dashed")
                clusters[group].add_node(dnode)
            if node.op == "call_module" and not ignore_params:
                leaf = _module_at(gm, node.target)
                if not isinstance(leaf, GraphModule):
                    self._weights(dot, node, leaf)
        for c in clusters.values():
            dot.add_subgraph(c)
        for node in gm.graph.nodes:
            if ignore_getattr and node.op == "get_attr":
                continue
            for user in node.users:
                dot.add_edge(pydot.Edge(node.name, user.name))
        return dot

    def _weights(self, dot, node: Node, leaf) -> None:
        pydot = self._pydot
        params = list(leaf.named_parameters())
        for pname, t in params + list(leaf.named_buffers()):
            wname = f"{node.name}.{pname}"
            kind = "get_parameter" if any(t is p for _, p in params) else "buffer"
            label = "{" + f"{wname}|op_code={kind}" + f"|dtype={t.dtype}\\n|shape={tuple(t.shape)}\\n" + "}"
            dot.add_node(pydot.Node(wname, label=label, fillcolor="Salmon", style=_ROUNDED, fontcolor="#000000",
                                    shape=self.dot_graph_shape))
            dot.add_edge(pydot.Edge(wname, node.name))
