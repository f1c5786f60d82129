"""What a saved notebook keeps (widgets/fallback.py): an SVG of the collapsed graph with or
without Graphviz's dot, tables folded at ROWS, graph and profile JSON within the budget."""
from __future__ import annotations

import json

import pytest

import tapelab as torch
from tapelab import nn
from tapelab.widgets import fallback
from tapelab.widgets.fallback import ROWS, collapse, details, graph_svg, within_budget
from tapelab.widgets.viewmodel import graph_from_tape, to_html


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return x + self.fc2(self.fc1(x).relu())


class Net(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(n)])

    def forward(self, x):
        return self.blocks(x)


def _graph(n=4):
    net = Net(n)
    opt = torch.optim.AdamW(net.parameters())
    with torch.tape() as t:
        net(torch.randn(2, 8)).sum().backward()
        opt.step()
    return graph_from_tape(t)


def test_collapse_opens_sibling_layers_together():
    boxes, edges = collapse(_graph(4), max_boxes=12)
    groups = [b["label"] for b in boxes if b["kind"] == "group"]
    assert [g for g in groups if g.startswith("blocks.")] == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
    assert "optimizer.step (AdamW)" in groups
    ids = {b["id"] for b in boxes}
    assert all(s in ids and t in ids and s != t for s, t, _ in edges)
    assert ("g:blocks.0", "g:blocks.1", "data") in edges
    boxes, _ = collapse(_graph(4), max_boxes=3)           # too few boxes for the layers: the root stays shut
    assert [b["label"] for b in boxes if b["kind"] == "group"][0] == "blocks"


@pytest.mark.parametrize("dot", [True, False])
def test_svg_with_and_without_dot(monkeypatch, dot):
    if dot and not fallback.has_dot():
        pytest.skip("Graphviz's dot is not installed")
    monkeypatch.setattr(fallback, "has_dot", lambda: dot)
    svg = graph_svg(_graph(3))
    assert "<svg" in svg and "blocks" in svg and "optimizer.step (AdamW)" in svg
    assert "<script" not in svg


def test_strings_are_escaped_in_the_picture(monkeypatch):
    monkeypatch.setattr(fallback, "has_dot", lambda: False)
    g = {"nodes": [{"id": "a", "kind": "forward", "label": "<script>x</script>", "op": "x", "group": None}],
         "edges": [], "groups": []}
    assert "<script>" not in graph_svg(g) and "&lt;script&gt;" in graph_svg(g)


def test_tables_are_folded_and_capped():
    html = details("200 rows", ["a"], [[str(i)] for i in range(200)])
    assert html.startswith("<details>") and html.count("<tr>") == ROWS + 1 and f"{200 - ROWS} more rows" in html
    page = to_html(_graph(6))
    assert "<details>" in page and "<svg" in page


def test_graph_json_is_cut_to_the_budget():
    g = _graph(8)
    size = len(json.dumps(g, separators=(",", ":")))
    small = within_budget(g, budget=size // 3)
    assert len(json.dumps(small, separators=(",", ":"))) <= size // 3
    assert small["meta"]["truncated"] and "JSON budget" in small["meta"]["note"]
    ids = {n["id"] for n in small["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in small["edges"])
    assert within_budget(g) is g                       # 256 KB: a small graph is kept whole


def test_profile_json_is_cut_to_the_budget():
    from tapelab.profiler import profile
    from tapelab.widgets.profileview import profile_html, profile_model
    from tapelab.widgets.profileview import within_budget as profile_budget
    net = Net(4)
    with profile() as prof:
        for _ in range(5):
            net(torch.randn(2, 8)).sum().backward()
    m = profile_model(prof)
    size = len(json.dumps(m, separators=(",", ":")))
    cut = profile_budget(m, budget=size // 4)
    assert len(json.dumps(cut, separators=(",", ":"))) <= size // 4 and cut["meta"]["truncated"]
    assert "<svg" in profile_html(m) and "<details>" in profile_html(m)


def test_tensor_view_keeps_its_summary():
    pytest.importorskip("anywidget")
    from tapelab.widgets import TensorView
    bundle = TensorView(torch.arange(6.0).reshape(2, 3), name="w")._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "shape" in data["text/html"] and "<svg" in data["text/html"]
