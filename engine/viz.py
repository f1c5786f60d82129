"""Python-side Graphviz: ``make_dot`` draws the backward graph behind a tensor as torchviz does.

Conventions (torchviz's ``make_dot``, same signature): one ``graphviz.Digraph`` with box nodes
(``style=filled``, ``fontname=monospace``, ``fontsize=10``), graph size "12,12" grown with the
content; function nodes are grey (Graphviz's default fill) labelled with the grad_fn's name
(``MulBackward0``); leaf tensors that accumulate a gradient are ``lightblue``, labelled with
their name from ``params`` (``{name: tensor}``, e.g. ``dict(model.named_parameters())``) and
size; the output(s) ``darkolivegreen1`` (a view's base ``darkolivegreen3``, dotted edge);
saved tensors ``orange`` with undirected edges: a custom Function's always, a built-in node's
when ``show_saved``. ``show_attrs`` adds each node's non-tensor parameters under its name.
Edges run from producer to consumer (the forward direction), as torchviz draws them.

The ``graphviz`` Python package is needed (``pip install graphviz``); rendering to an image
also needs Graphviz's ``dot`` program, building the Digraph does not.
"""
from __future__ import annotations

__all__ = ["make_dot"]


def _size_str(size) -> str:
    return "(" + ", ".join("%d" % v for v in size) + ")"


def _fn_name(fn, show_attrs: bool, max_attr_chars: int) -> str:
    name = fn.name() if callable(getattr(fn, "name", None)) else type(fn).__name__
    if not show_attrs:
        return name
    params = getattr(fn, "params", None) or {}
    attrs = {str(k): str(v) for k, v in params.items()}
    if not attrs:
        return name
    width = max(max_attr_chars, 3)
    c1 = max(len(k) for k in attrs)
    c2 = min(max(len(v) for v in attrs.values()), width)
    sep = "-" * max(c1 + c2 + 2, len(name))
    cut = (lambda s: s[:c2 - 3] + "..." if len(s) > c2 else s)
    rows = "\n".join(f"{k:<{c1}}: {cut(v):>{c2}}" for k, v in attrs.items())
    return name + "\n" + sep + "\n" + rows


def _saved(fn, show_saved: bool):
    """(name, tensor) pairs of the tensors ``fn``'s backward reads: a custom Function's always
    (torchviz shows those regardless), a built-in op node's only with ``show_saved``."""
    custom = not hasattr(fn, "versions") and not hasattr(fn, "fn")   # op nodes and CopySlices are built in
    if not (custom or show_saved):
        return []
    try:
        saved = tuple(fn.saved_tensors)
    except RuntimeError:          # freed by a backward pass without retain_graph
        return []
    versions = getattr(fn, "versions", None)
    out = []
    for k, t in enumerate(saved):
        if t is None:
            continue
        if custom or not versions or k >= len(versions):
            name = ""
        else:
            i = versions[k][0]
            name = "result" if i < 0 else ("self", "other")[i] if i < 2 else f"input{i}"
        out.append((name, t))
    return out


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    """A ``graphviz.Digraph`` of the autograd graph that produced ``var`` (a tensor or a tuple
    of tensors), torchviz's conventions (module docstring).

    >>> dot = make_dot(model(x).sum(), params=dict(model.named_parameters()))
    >>> dot.render("graph", format="svg")      # needs Graphviz's dot program
    """
    from graphviz import Digraph   # imported here: tapelab itself does not need graphviz

    if params is not None:
        if not all(hasattr(p, "grad_fn") and hasattr(p, "shape") for p in params.values()):
            raise TypeError("make_dot: params must map names to tensors")
        param_map = {id(v): k for k, v in params.items()}
    else:
        param_map = {}
    node_attr = dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1",
                     height="0.2", fontname="monospace")
    dot = Digraph(node_attr=node_attr, graph_attr=dict(size="12,12"))
    seen: set = set()
    keep: list = []               # tensors made while walking (saved outputs): ids stay unique

    def var_name(t, name=None):
        if not name:
            name = param_map.get(id(t), "")
        return "%s\n %s" % (name, _size_str(t.shape))

    def add_nodes(fn):
        if id(fn) in seen:
            return
        seen.add(id(fn))
        for name, t in _saved(fn, show_saved):
            keep.append(t)
            seen.add(id(t))
            dot.edge(str(id(fn)), str(id(t)), dir="none")
            dot.node(str(id(t)), var_name(t, name), fillcolor="orange")
        v = getattr(fn, "variable", None)
        if v is not None:                                # AccumulateGrad: the leaf it fills
            seen.add(id(v))
            dot.node(str(id(v)), var_name(v), fillcolor="lightblue")
            dot.edge(str(id(v)), str(id(fn)))
        dot.node(str(id(fn)), _fn_name(fn, show_attrs, max_attr_chars))
        for nxt, _ in getattr(fn, "next_functions", ()):
            if nxt is not None:
                dot.edge(str(id(nxt)), str(id(fn)))
                add_nodes(nxt)

    def add_base_tensor(t, color="darkolivegreen1"):
        if id(t) in seen:
            return
        seen.add(id(t))
        dot.node(str(id(t)), var_name(t), fillcolor=color)
        if t.grad_fn is not None:
            add_nodes(t.grad_fn)
            dot.edge(str(id(t.grad_fn)), str(id(t)))
        base = getattr(t, "_base", None)
        if base is not None:
            add_base_tensor(base, color="darkolivegreen3")
            dot.edge(str(id(base)), str(id(t)), style="dotted")

    for t in (var if isinstance(var, tuple) else (var,)):
        add_base_tensor(t)
    size = max(12, len(dot.body) * 0.15)           # torchviz's resize: grows with the content
    dot.graph_attr.update(size=f"{size},{size}")
    return dot
