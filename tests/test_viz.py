"""tapelab.viz.make_dot: torchviz's signature and conventions, checked structurally on the same
small model built in tapelab and in PyTorch (torchviz's rules applied to torch's graph by the
test itself, so torchviz need not be installed)."""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

graphviz = pytest.importorskip("graphviz")

import tapelab  # noqa: E402
from tapelab.viz import make_dot  # noqa: E402


def _nodes(dot):
    """{node id: (label, fillcolor)} and [(src, dst, attrs)] from the Digraph's body."""
    nodes, edges = {}, []
    for line in dot.body:
        line = line.strip()
        m = re.match(r'^(\S+) -> (\S+)(?: \[(.*)\])?$', line)
        if m:
            edges.append((m.group(1), m.group(2), m.group(3) or ""))
            continue
        m = re.match(r'^(\S+) \[label="?(.*?)"?(?: fillcolor=(\S+))?\]$', line, re.S)
        if m:
            nodes[m.group(1)] = (m.group(2), m.group(3))
    return nodes, edges


def _mlp(m):
    rng = np.random.default_rng(0)
    w1 = m.tensor(rng.standard_normal((4, 3)).astype("float32"), requires_grad=True)
    b1 = m.tensor(rng.standard_normal(4).astype("float32"), requires_grad=True)
    w2 = m.tensor(rng.standard_normal((1, 4)).astype("float32"), requires_grad=True)
    x = m.tensor(rng.standard_normal((2, 3)).astype("float32"))
    h = m.tanh(x @ w1.t() + b1)
    y = (h @ w2.t()).sum()
    return y, {"fc1.weight": w1, "fc1.bias": b1, "fc2.weight": w2}


def _torch_reference(y, params):
    """The node kinds and colours torchviz would draw for torch's graph of ``y``."""
    names = {id(v): k for k, v in params.items()}
    fns, leaves, seen, edges = [], [], set(), 0
    stack = [y.grad_fn]
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        fns.append(type(fn).__name__)
        if hasattr(fn, "variable"):
            leaves.append(names.get(id(fn.variable), ""))
            edges += 1
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                edges += 1
                stack.append(nxt)
    return sorted(fns), sorted(leaves), edges + 1


def test_signature_is_torchviz():
    sig = inspect.signature(make_dot)
    assert list(sig.parameters) == ["var", "params", "show_attrs", "show_saved", "max_attr_chars"]
    assert [sig.parameters[k].default for k in ("params", "show_attrs", "show_saved", "max_attr_chars")] == \
        [None, False, False, 50]


def test_structure_matches_torchviz_conventions_on_the_same_model():
    torch = pytest.importorskip("torch")
    y, params = _mlp(tapelab)
    dot = make_dot(y, params=params)
    assert isinstance(dot, graphviz.Digraph)
    assert dot.node_attr["style"] == "filled" and dot.node_attr["shape"] == "box"
    assert dot.node_attr["fontname"] == "monospace" and dot.graph_attr["size"].startswith("12")
    nodes, edges = _nodes(dot)
    fns = sorted(label for label, color in nodes.values() if color is None)
    blue = sorted(label.split("\n")[0] for label, color in nodes.values() if color == "lightblue")
    green = [label for label, color in nodes.values() if color == "darkolivegreen1"]
    ty, tparams = _mlp(torch)
    t_fns, t_leaves, t_edges = _torch_reference(ty, tparams)
    # same function nodes (torch's names: TBackward0 is PermuteBackward0 here), same leaves, same edges
    canon = {"PermuteBackward0": "TBackward0"}
    assert len(fns) == len(t_fns)
    assert {"TanhBackward0", "SumBackward0", "AddBackward0", "AccumulateGrad"} <= set(fns)
    assert sorted(canon.get(f, f) for f in fns if canon.get(f, f) in t_fns) == sorted(
        f for f in t_fns if f in {canon.get(x, x) for x in fns})
    assert blue == sorted(t_leaves) == ["fc1.bias", "fc1.weight", "fc2.weight"]
    assert len(green) == 1 and green[0].strip() == "()"                 # the output: a scalar
    assert all(label.endswith(")") for label, color in nodes.values() if color == "lightblue")
    assert sorted(label.split("\n")[1] for label, c in nodes.values() if c == "lightblue") == [" (1, 4)", " (4)", " (4, 3)"]
    assert len(edges) == t_edges
    assert not any(color == "orange" for _, color in nodes.values())   # built-in saved tensors hidden


def test_show_saved_and_show_attrs():
    x = tapelab.randn(3, 4, requires_grad=True)
    y = x.tanh().sum(dim=1)
    plain = _nodes(make_dot(y))[0]
    saved_nodes, saved_edges = _nodes(make_dot(y, show_saved=True))
    orange = [label for label, color in saved_nodes.values() if color == "orange"]
    assert orange and len(saved_nodes) == len(plain) + len(orange)
    assert any(label.startswith("result") for label in orange)          # tanh reads its output
    assert any('dir=none' in a for _, _, a in saved_edges)
    attrs = make_dot(y, show_attrs=True)
    assert any("dim" in line and "SumBackward0" in line for line in attrs.body)


def test_custom_function_saved_tensors_always_shown_and_views_and_tuples():
    class Sq(tapelab.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = tapelab.randn(3, requires_grad=True)
    y = Sq.apply(x * 1)          # saves a non-leaf (a saved leaf is drawn as its leaf, as torchviz does)
    nodes, _ = _nodes(make_dot(y, params={"x": x}))
    assert [c for _, c in nodes.values()].count("orange") == 1
    assert any(label.startswith("x\n") for label, c in nodes.values() if c == "lightblue")
    v = (x * 2).view(3, 1)
    nodes, edges = _nodes(make_dot((v, y)))
    colors = [c for _, c in nodes.values()]
    assert colors.count("darkolivegreen1") == 2 and colors.count("darkolivegreen3") == 1
    assert any("style=dotted" in a for _, _, a in edges)
