"""make_dot against torchviz itself (skipped without torchviz): on the same model, the same
node and graph attributes, the same leaves by colour and label, the same number of function
nodes, edges and saved-tensor nodes."""
from __future__ import annotations

import pytest

pytest.importorskip("graphviz")
torch = pytest.importorskip("torch")
torchviz = pytest.importorskip("torchviz")

import tapelab  # noqa: E402
from tapelab.viz import make_dot  # noqa: E402

from test_viz import _mlp, _nodes  # noqa: E402


def _shape(dot):
    nodes, edges = _nodes(dot)
    by_color: dict = {}
    for label, color in nodes.values():
        by_color.setdefault(color, []).append(label)
    return by_color, edges


@pytest.mark.parametrize("show_saved", [False, True])
def test_same_drawing_as_torchviz(show_saved):
    y, params = _mlp(tapelab)
    ours = make_dot(y, params=params, show_saved=show_saved)
    ty, tparams = _mlp(torch)
    theirs = torchviz.make_dot(ty, params=tparams, show_saved=show_saved)
    assert ours.node_attr == theirs.node_attr
    assert ours.graph_attr.keys() == theirs.graph_attr.keys()
    a, ea = _shape(ours)
    b, eb = _shape(theirs)
    assert set(a) == set(b)                                           # the same colours are used
    assert sorted(a["lightblue"]) == sorted(b["lightblue"])           # leaves: "name\n (shape)"
    assert sorted(a["darkolivegreen1"]) == sorted(b["darkolivegreen1"])
    assert len(a[None]) == len(b[None])                               # function nodes
    assert len(ea) == len(eb)
    if show_saved:
        assert len(a["orange"]) == len(b["orange"])
        assert sum("dir=none" in x for *_, x in ea) == sum("dir=none" in x for *_, x in eb)
