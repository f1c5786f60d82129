"""FX graphs in the view model: ``graph_from_fx`` (a ``Graph``/``GraphModule`` -> the schema of
``viewmodel``), ``code_lines`` (each line of the generated code -> the node it defines) and
``diff_graphs`` (before/after a pass). Traced graphs arrive through the engine's own
``graph_traced`` event (``tapelab.events.GraphTraced``), which ``tapelab.kernel`` subscribes to.

An FX graph uses the schema of ``viewmodel`` (so the tape renderer, the side panel, the mime
renderer and ``to_dot`` draw it unchanged), one node per FX node, in graph order:

- ``id`` ``"fx:<name>"``, ``label`` the node name, ``op`` a short target (``Linear`` for a
  ``call_module`` of a Linear, ``relu``, ``add``, ``input`` for a placeholder, ``output``),
  ``kind`` ``leaf`` for placeholders and ``get_attr``, ``forward`` for the rest.
- FX fields: ``name``, ``opcode`` (one of the six), ``target`` (qualified, as a string),
  ``args`` (the node's IR line, ``format_node`` without the user count), ``line`` (0-based line
  of the generated code that defines it, or None), and in diffs ``diff`` (``same``, ``added``,
  ``removed``, ``changed``).
- ``shape``/``dtype`` from ShapeProp's ``meta['tensor_meta']`` when present (``shapes`` lists
  each element's shape for a tuple value); every edge (one per use) carries its source's shape.
- groups: the module hierarchy. A ``call_module`` node sits in its module's parent (the node *is*
  the module), a ``get_attr`` in the module owning the attribute, any other node in the innermost
  module of ``meta['nn_module_stack']``, which ``tapelab.fx.Tracer`` records for the modules it
  traces through (and ``tapelab.fx.trace_from_tape`` writes from the module scope each op ran in),
  so an op's ``module`` is its module path, as on the tape.
- ``param``: on a ``get_attr`` leaf that reads a parameter of the root module, its qualified name.
- ``fused``: on a node ``tapelab.compile`` made of a fusion group (``meta['fused']``): ``name``
  (``fused(mul, add, tanh)``, also the node's ``op``), ``members`` (the FX names it replaced),
  ``source`` (the generated cpu kernel) and ``cuda_source``.
- ``meta`` adds ``code`` (the generated Python source) and ``kind: "fx"``.

>>> gm = tapelab.fx.symbolic_trace(model)
>>> ShapeProp(gm).propagate(x)
>>> g = graph_from_fx(gm)
>>> to_dot(g)   # DOT from the same model
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

from tapelab.fx.node import qualified_name

from .viewmodel import SCHEMA, VERSION

__all__ = ["graph_from_fx", "code_lines", "diff_graphs", "fx_code"]


# ---------------------------------------------------------------------- helpers

class ModuleGroups:
    """The module-path groups of a graph payload (``layers.0.attn`` inside ``layers.0`` inside
    ``layers``), with their sizes and signatures: equal for groups holding the same ops in the same
    order (``layers.0`` == ``layers.1``), so views can fold repeated blocks alike."""

    def __init__(self) -> None:
        self.groups: dict[str, dict] = {}
        self._tokens: dict[str, list[str]] = {}

    def group(self, path: str) -> str | None:
        """The id of the group for a dotted module path (made with its parents), None for the root."""
        if not path:
            return None
        gid = "g:" + path
        if gid not in self.groups:
            parent, _, label = path.rpartition(".")
            self.groups[gid] = {"id": gid, "label": label, "path": path,
                                "parent": self.group(parent) if parent else None, "signature": "", "size": 0,
                                "collapsed": False}
            self._tokens[gid] = []
        return gid

    def count(self, gid: str | None, token: str) -> None:
        """Count one node (``token`` names its op) in group ``gid`` and every group above it."""
        while gid is not None:
            g = self.groups[gid]
            g["size"] += 1
            self._tokens[gid].append(token)
            token = g["label"] + "/" + token
            gid = g["parent"]

    def payload(self) -> list[dict]:
        for gid, g in self.groups.items():
            g["signature"] = hashlib.blake2b("|".join(self._tokens[gid]).encode(), digest_size=6).hexdigest()
        return list(self.groups.values())

def _graph_and_module(obj):
    """(graph, graph module or None) of a Graph or GraphModule."""
    g = getattr(obj, "graph", None)
    if g is not None and hasattr(g, "nodes") and hasattr(obj, "code"):
        return g, obj
    if hasattr(obj, "nodes") and hasattr(obj, "python_code"):
        return obj, getattr(obj, "owning_module", None)
    raise TypeError(f"expected a tapelab.fx Graph or GraphModule, got {type(obj).__name__}")


def fx_code(obj) -> str:
    """The generated Python source of a GraphModule (``gm.code``) or of a bare Graph."""
    g, gm = _graph_and_module(obj)
    if gm is not None and hasattr(gm, "code"):
        try:
            return gm.code
        except Exception:
            pass
    return g.python_code("self").src


def _target_str(node) -> str:
    return qualified_name(node.target) if node.op == "call_function" else str(node.target)


_USERS = re.compile(r" : \[num_users=\d+\]")


def _ir(node) -> str:
    try:
        return _USERS.sub("", node.format_node())
    except Exception:
        return f"{node.op}[{_target_str(node)}]"


def _short_op(node, root) -> str:
    op, t = node.op, node.target
    if op == "placeholder":
        return "input"
    if op == "output":
        return "output"
    if op == "get_attr":
        return "get_attr"
    if op == "call_module":
        mod = None
        if root is not None:
            try:
                mod = root.get_submodule(t) if hasattr(root, "get_submodule") else None
            except Exception:
                mod = None
        return type(mod).__name__ if mod is not None else str(t).rpartition(".")[2]
    if op == "call_method":
        return str(t)
    name = getattr(t, "__name__", None) or str(t)
    return name.strip("_") if name.startswith("__") and name.endswith("__") else name


def _meta_shape(meta) -> tuple[Any, str, list | None]:
    """(shape, dtype, shapes of a tuple value) from a ShapeProp ``tensor_meta``."""
    if meta is None:
        return None, "", None
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        dt = getattr(meta.dtype, "name", None) or str(meta.dtype)
        return [int(d) for d in meta.shape], dt, None
    if isinstance(meta, (tuple, list)):
        shapes, first, dtype = [], None, ""
        for m in meta:
            s, d, _ = _meta_shape(m) if (m is not None and hasattr(m, "shape")) else (None, "", None)
            shapes.append(s)
            if first is None and s is not None:
                first, dtype = s, d
        return first, dtype, shapes
    return None, "", None


def _module_path(node) -> str:
    """The module scope of a node (see the module docstring)."""
    if node.op == "call_module":
        return str(node.target).rpartition(".")[0]
    if node.op == "get_attr":
        return str(node.target).rpartition(".")[0]
    stack = node.meta.get("nn_module_stack") if isinstance(getattr(node, "meta", None), dict) else None
    if stack:
        last = list(stack.keys())[-1] if isinstance(stack, dict) else stack[-1]
        if isinstance(last, tuple):
            last = last[0]
        return str(last)
    return ""


def _is_parameter(root, target: str) -> bool:
    try:
        root.get_parameter(target)
    except (AttributeError, TypeError):
        return False
    return True


def code_lines(code: str, names) -> list[list[str]]:
    """For each line of generated ``code``, the names of the nodes it defines: ``x = ...`` defines
    ``x``, the ``def forward(self, a, b)`` line the placeholders ``a`` and ``b``, ``return`` the
    output node (its name is given as ``"output"`` or whatever the graph calls it)."""
    names = list(names)
    known = set(names)
    out_name = next((n for n in names if n == "output"), None)
    result: list[list[str]] = []
    assign = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")
    for line in code.split("\n"):
        s = line.strip()
        ids: list[str] = []
        if s.startswith("def forward("):
            inner = s[len("def forward("):s.rfind(")")]
            for part in inner.split(","):
                p = part.strip().lstrip("*").split("=")[0].split(":")[0].strip()
                if p in known and p != "self":
                    ids.append(p)
        elif s.startswith("return ") or s == "return":
            if out_name is not None:
                ids.append(out_name)
        else:
            m = assign.match(line)
            if m and m.group(1) in known:
                ids.append(m.group(1))
        result.append(ids)
    return result


# ---------------------------------------------------------------------- the adapter
def graph_from_fx(obj, title: str = "", code: str | None = None, root=None) -> dict:
    """The view-model graph of an FX ``Graph`` or ``GraphModule`` (see the module docstring).

    Args:
        obj: the graph or graph module (run ``ShapeProp`` on it first to get shapes on edges).
        title: ``meta.title``; defaults to the module's class name.
        code: the generated code to map lines against (defaults to ``gm.code``).
        root: the module ``call_module`` targets are looked up in (defaults to the GraphModule).
    """
    graph, gm = _graph_and_module(obj)
    root = gm if root is None else root
    if code is None:
        code = fx_code(obj)
    fx_nodes = list(graph.nodes)
    names = [n.name for n in fx_nodes]
    line_of: dict[str, int] = {}
    for i, ids in enumerate(code_lines(code, names)):
        for name in ids:
            line_of.setdefault(name, i)
    groups = ModuleGroups()
    nodes, edges = [], []
    shape_of: dict[str, Any] = {}
    forward = 0
    for i, n in enumerate(fx_nodes):
        meta = n.meta if isinstance(getattr(n, "meta", None), dict) else {}
        shape, dtype, shapes = _meta_shape(meta.get("tensor_meta"))
        shape_of[n.name] = shape if shapes is None else shapes
        path = _module_path(n)
        gid = groups.group(path)
        kind = "leaf" if n.op in ("placeholder", "get_attr") else "forward"
        forward += kind == "forward"
        op = _short_op(n, root)
        node = {"id": "fx:" + n.name, "kind": kind, "label": n.name, "op": op, "index": i, "seq": None,
                "forward_seq": None, "group": gid, "module": path, "shape": shape,
                "input_shapes": [shape_of.get(a.name) for a in n.all_input_nodes],
                "dtype": dtype, "device": "", "requires_grad": False, "start_ns": 0, "time_ns": 0,
                "value": None, "grad": None, "grad_ops": 0,
                "name": n.name, "opcode": n.op, "target": _target_str(n), "args": _ir(n),
                "line": line_of.get(n.name)}
        if shapes is not None:
            node["shapes"] = shapes
        if n.op == "get_attr" and _is_parameter(root, str(n.target)):
            node["param"] = str(n.target)
        if "fusion_group" in meta:
            node["fusion_group"] = meta["fusion_group"]
        if "fused" in meta:            # a tapelab.compile kernel: its members and generated source
            node["op"] = meta["fused"]["name"]
            node["fused"] = dict(meta["fused"])
        nodes.append(node)
        for a in n.all_input_nodes:
            s = shape_of.get(a.name)
            edges.append({"source": "fx:" + a.name, "target": "fx:" + n.name, "kind": "data",
                          "shape": s if (s is None or all(isinstance(d, int) for d in s)) else None})
        groups.count(gid, f"{n.op}:{op}")
    if not title:
        title = type(gm).__name__ if gm is not None else (type(root).__name__ if root is not None else "Graph")
    return {"schema": SCHEMA, "version": VERSION, "nodes": nodes, "edges": edges, "groups": groups.payload(),
            "meta": {"title": title, "forward": forward, "backward": 0, "total": len(nodes), "truncated": False,
                     "kind": "fx", "code": code}}


def _as_view_graph(obj, title: str = "") -> dict:
    if isinstance(obj, dict) and "nodes" in obj:
        return obj
    return graph_from_fx(obj, title=title)


def diff_graphs(before, after, titles=("before", "after")) -> tuple[dict, dict, dict]:
    """Compare two graphs (GraphModules, Graphs or view-model graphs from ``graph_from_fx``).

    Nodes are matched by name and target; a name left unmatched on both sides (a pass changed
    its target in place) is matched by name alone and counts as ``changed``. A matched node whose
    IR line differs (arguments, target) or whose shape differs is ``changed``, else ``same``;
    unmatched nodes are ``removed`` (before) or ``added`` (after). Returns copies of both graphs
    with ``diff`` set on every node, and a summary ``{"added", "removed", "changed", "same"}``.
    """
    a = _as_view_graph(before, titles[0])
    b = _as_view_graph(after, titles[1])
    a = {**a, "nodes": [dict(n) for n in a["nodes"]], "meta": {**a.get("meta", {}), "title": titles[0]}}
    b = {**b, "nodes": [dict(n) for n in b["nodes"]], "meta": {**b.get("meta", {}), "title": titles[1]}}
    key = lambda n: (n.get("name", n["label"]), n.get("target", n["op"]))  # noqa: E731
    left = {key(n): n for n in a["nodes"]}
    right = {key(n): n for n in b["nodes"]}
    pairs = [(left[k], right[k]) for k in left if k in right]
    lonely_a = {n.get("name", n["label"]): n for k, n in left.items() if k not in right}
    lonely_b = {n.get("name", n["label"]): n for k, n in right.items() if k not in left}
    for name in [x for x in lonely_a if x in lonely_b]:
        pairs.append((lonely_a.pop(name), lonely_b.pop(name)))
    count = {"added": 0, "removed": 0, "changed": 0, "same": 0}
    for x, y in pairs:
        same = x.get("args") == y.get("args") and x.get("target") == y.get("target") and \
            x.get("shape") == y.get("shape") and x.get("opcode") == y.get("opcode")
        status = "same" if same else "changed"
        x["diff"] = y["diff"] = status
        count[status] += 1
    for n in lonely_a.values():
        n["diff"] = "removed"
        count["removed"] += 1
    for n in lonely_b.values():
        n["diff"] = "added"
        count["added"] += 1
    a["meta"]["diff"] = b["meta"]["diff"] = dict(count)
    return a, b, count
