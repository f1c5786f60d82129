"""DOT export of a graph: text that Graphviz (or any DOT viewer) draws; no binary needed.

One box per node labelled with its name, opcode and target (and shape/dtype after
``ShapeProp``), one edge per use; fusion groups, when marked, become clusters.

>>> print(FxGraphDrawer(gm, "mlp").get_dot_graph())
digraph "mlp" { ... }
"""
from __future__ import annotations

from ..node import Node, qualified_name

__all__ = ["FxGraphDrawer"]

_COLORS = {"placeholder": "#cfe8fc", "get_attr": "#e8e8e8", "call_function": "#fde4c8",
           "call_method": "#fdf3c8", "call_module": "#d8f0d2", "output": "#cfe8fc"}


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class FxGraphDrawer:
    """Draws ``graph_module.graph`` as DOT.

    Args:
        graph_module: the GraphModule to draw. name: the graph's name in the DOT text.

    Unlike PyTorch's (which returns ``pydot.Dot``), ``get_dot_graph`` returns the DOT text.
    """

    def __init__(self, graph_module, name: str):
        self.graph_module = graph_module
        self.name = name

    def _label(self, node: Node) -> str:
        target = qualified_name(node.target) if node.op == "call_function" else str(node.target)
        parts = [node.name, f"{node.op}: {target}"]
        meta = node.meta.get("tensor_meta")
        if meta is not None and hasattr(meta, "shape"):
            parts.append(f"{list(meta.shape)} {getattr(meta.dtype, 'name', meta.dtype)}")
        return _escape("\n".join(parts))

    def get_dot_graph(self) -> str:
        """The graph as DOT text."""
        lines = [f'digraph "{_escape(self.name)}" {{', '  rankdir=TB;',
                 '  node [shape=box, style="rounded,filled", fontname="monospace"];']
        clusters: dict[int, list[Node]] = {}
        for node in self.graph_module.graph.nodes:
            line = f'  "{node.name}" [label="{self._label(node)}", fillcolor="{_COLORS[node.op]}"];'
            group = node.meta.get("fusion_group")
            if group is None:
                lines.append(line)
            else:
                clusters.setdefault(group, []).append(node)
        for k, nodes in clusters.items():
            lines.append(f'  subgraph "cluster_fusion_{k}" {{ label="fusion group {k}"; style=dashed;')
            lines += [f'    "{n.name}" [label="{self._label(n)}", fillcolor="{_COLORS[n.op]}"];' for n in nodes]
            lines.append("  }")
        for node in self.graph_module.graph.nodes:
            for inp in node.all_input_nodes:
                lines.append(f'  "{inp.name}" -> "{node.name}";')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def get_main_dot_graph(self) -> str:
        """Same as ``get_dot_graph`` (submodules are not drawn separately)."""
        return self.get_dot_graph()
