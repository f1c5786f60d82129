"""The notebook side of tapelab.fx: the view-model adapter (graph_from_fx), code line <-> node
mapping, DOT from the same model, the before/after diff, the engine's graph_traced events,
the GraphView widget, and (in a real kernel) the rich display of a GraphModule and the panel stream."""
from __future__ import annotations

import operator
import time

import pytest

import tapelab
from tapelab import events, fx, nn
from tapelab.fx.passes import ShapeProp
from tapelab.widgets.fx_adapter import code_lines, diff_graphs, graph_from_fx
from tapelab.widgets.viewmodel import SCHEMA, VERSION, to_dot, to_html


class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.scale = nn.Parameter(tapelab.ones(d))

    def forward(self, x):
        return tapelab.relu(self.fc(x)) * self.scale + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x).softmax(-1)


def traced(shapes=True):
    tapelab.manual_seed(0)
    gm = fx.symbolic_trace(Net())
    if shapes:
        ShapeProp(gm).propagate(tapelab.randn(4, 8))
    return gm


def by_name(g):
    return {n["name"]: n for n in g["nodes"]}


def test_nodes_opcodes_shapes_and_edges():
    gm = traced()
    g = graph_from_fx(gm)
    assert g["schema"] == SCHEMA and g["version"] == VERSION and g["meta"]["kind"] == "fx"
    assert [n["name"] for n in g["nodes"]] == [n.name for n in gm.graph.nodes]
    assert {n["opcode"] for n in g["nodes"]} == {"placeholder", "get_attr", "call_function", "call_module", "call_method",
                                                 "output"}
    n = by_name(g)
    assert n["x"]["kind"] == "leaf" and n["x"]["op"] == "input" and n["x"]["shape"] == [4, 8]
    assert n["blocks_0_fc"]["op"] == "Linear" and n["blocks_0_fc"]["target"] == "blocks.0.fc"
    assert n["relu"]["target"] == "tapelab.relu" and n["relu"]["dtype"] == "float32"
    assert n["softmax"]["opcode"] == "call_method" and n["softmax"]["shape"] == [4, 3]
    assert n["output"]["kind"] == "forward"
    # one edge per use, carrying the source's shape
    uses = sum(len(x.all_input_nodes) for x in gm.graph.nodes)
    assert len(g["edges"]) == uses
    e = next(e for e in g["edges"] if e["source"] == "fx:head")
    assert e["target"] == "fx:softmax" and e["shape"] == [4, 3]
    assert g["meta"]["forward"] == sum(x.op not in ("placeholder", "get_attr") for x in gm.graph.nodes)


def test_without_shape_prop_shapes_are_none():
    g = graph_from_fx(traced(shapes=False))
    assert all(n["shape"] is None for n in g["nodes"]) and all(e["shape"] is None for e in g["edges"])


def test_module_hierarchy_as_groups():
    g = graph_from_fx(traced())
    groups = {x["id"]: x for x in g["groups"]}
    assert {"g:blocks", "g:blocks.0", "g:blocks.1"} <= set(groups)
    assert groups["g:blocks.0"]["parent"] == "g:blocks"
    n = by_name(g)
    assert n["blocks_0_fc"]["group"] == "g:blocks.0"          # a call_module sits in its parent
    assert n["blocks_0_scale"]["group"] == "g:blocks.0"       # a get_attr in its owner
    assert n["relu"]["group"] == "g:blocks.0" and n["relu_1"]["group"] == "g:blocks.1"   # nn_module_stack
    assert n["head"]["group"] is None and n["softmax"]["group"] is None
    # repeated blocks have equal signatures (the renderer folds them)
    assert groups["g:blocks.0"]["signature"] == groups["g:blocks.1"]["signature"]


def test_groups_from_targets_without_module_stacks():
    gm = traced()
    for node in gm.graph.nodes:
        node.meta.pop("nn_module_stack", None)       # e.g. a graph built by hand
    n = by_name(graph_from_fx(gm))
    assert n["blocks_1_fc"]["group"] == "g:blocks.1" and n["relu"]["group"] is None


def test_each_code_line_maps_to_the_node_it_defines():
    gm = traced()
    g = graph_from_fx(gm)
    lines = gm.code.split("\n")
    assert g["meta"]["code"] == gm.code
    for n in g["nodes"]:
        text = lines[n["line"]].strip()
        if n["opcode"] == "placeholder":
            assert text.startswith("def forward(") and n["name"] in text
        elif n["opcode"] == "output":
            assert text.startswith("return ")
        else:
            assert text.startswith(n["name"] + " = "), (n["name"], text)
    per_line = code_lines(gm.code, [x.name for x in gm.graph.nodes])
    assert len(per_line) == len(lines)
    assert sum(len(ids) for ids in per_line) == len(g["nodes"])


def test_code_lines_edge_cases():
    code = "\n\ndef forward(self, x, y = None):\n    add = x + y;  x = y = None\n    z == 1\n    return add\n"
    assert code_lines(code, ["x", "y", "add", "output"]) == [[], [], ["x", "y"], ["add"], [], ["output"], []]


def test_dot_from_the_same_model():
    g = graph_from_fx(traced())
    dot = to_dot(g)
    assert dot.startswith("digraph") and '"fx:blocks_0_fc"' in dot and "cluster_g:blocks.0" in dot
    assert dot.count("->") == len(g["edges"])
    assert "(4, 3)" in dot


def test_user_strings_are_data():
    def f(x):
        return x + 1
    gm = fx.symbolic_trace(f)
    g = graph_from_fx(gm, title='<img src=x onerror="boom">')
    assert g["meta"]["title"] == '<img src=x onerror="boom">'   # kept as data; views escape it
    page = to_html(g)
    assert "<img" not in page and "&lt;img src=x onerror=&quot;boom&quot;&gt;" in page


def relu_to_gelu(gm):
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is tapelab.relu:
            n.target = tapelab.nn.functional.gelu
    gm.recompile()


def test_diff_marks_changed_added_removed():
    before = traced()
    after = traced()
    relu_to_gelu(after)
    g = after.graph
    # remove the softmax, add a negation before the output
    soft = next(n for n in g.nodes if n.name == "softmax")
    head = soft.args[0]
    with g.inserting_after(soft):
        neg = g.call_function(operator.neg, (head,))
    soft.replace_all_uses_with(neg)
    g.erase_node(soft)
    after.recompile()
    a, b, count = diff_graphs(before, after)
    na, nb = by_name(a), by_name(b)
    assert na["relu"]["diff"] == nb["relu"]["diff"] == "changed"     # same name, target changed in place
    assert na["softmax"]["diff"] == "removed" and nb["neg"]["diff"] == "added"
    assert nb["head"]["diff"] == "same"
    assert nb["output"]["diff"] == "changed"                          # returns neg instead of softmax
    assert count == {"added": 1, "removed": 1, "changed": 3, "same": len(b["nodes"]) - 4}
    assert a["meta"]["title"] == "before" and b["meta"]["diff"] == count
    # the inputs are not modified; view-model graphs work as snapshots
    a2, b2, count2 = diff_graphs(graph_from_fx(before), b)
    assert count2 == count and "diff" not in graph_from_fx(before)["nodes"][0]


def test_graph_traced_events_come_from_the_engine():
    seen = []
    with events.subscribe("graph_traced", seen.append):
        gm = fx.symbolic_trace(Net())
        fx.trace_from_tape(lambda x: x * 2, tapelab.randn(3))
    fx.symbolic_trace(Net())            # nobody listens: nothing emitted
    assert [p.how for p in seen] == ["symbolic_trace", "trace_from_tape"]
    assert isinstance(seen[0], events.GraphTraced) and seen[0].name == "Net" and seen[1].module is not None
    g = graph_from_fx(seen[0].module, root=seen[0].root)
    assert by_name(g)["head"]["op"] == "Linear" and g["meta"]["title"] == "Net"
    assert [n.name for n in seen[0].graph.nodes] == [n.name for n in gm.graph.nodes]


class FakeBridge:
    listening = True
    cells = 0

    def __init__(self):
        self.sent = []

    def send(self, data):
        self.sent.append(data)
        return True


def test_traced_graphs_stream_to_the_panel():
    from tapelab.kernel import fx_stream
    bridge = FakeBridge()
    fx_stream.install(bridge)
    try:
        gm = fx.symbolic_trace(Net())
    finally:
        fx_stream.uninstall()
    assert [m["type"] for m in bridge.sent] == ["begin", "delta", "end"]
    delta = bridge.sent[1]
    assert delta["meta"]["title"] == "fx: Net" and len(delta["nodes"]) == len(list(gm.graph.nodes))
    fx.symbolic_trace(Net())
    assert len(bridge.sent) == 3                                       # uninstalled: no more
    bridge.listening = False
    assert not fx_stream.send_graph(bridge, gm)


def test_graph_view_widget():
    pytest.importorskip("anywidget")
    from tapelab.widgets import GraphView, MIME
    gm = traced()
    v = GraphView(gm)
    assert v._view == "fx" and len(v.panes) == 1 and v.panes[0]["code"] == gm.code
    assert v.panes[0]["title"] == "Net" and v.graph["nodes"]
    assert v.to_dot().startswith("digraph")
    data = v._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert MIME in data and "def forward" in data["text/html"]
    before = graph_from_fx(gm)
    relu_to_gelu(gm)
    d = GraphView.diff(before, gm)
    assert len(d.panes) == 2 and d.summary["changed"] == 2
    assert [p["title"] for p in d.panes] == ["before", "after"]
    assert "gelu" in d.panes[1]["code"] and "gelu" not in d.panes[0]["code"]


# ---------------------------------------------------------------------- a real kernel
def test_in_a_kernel_graph_module_displays_its_graph_view_and_streams():
    pytest.importorskip("ipykernel")
    pytest.importorskip("anywidget")
    pytest.importorskip("jupyter_client")
    from kernel_session import comm_data, run, tapelab_kernel
    from test_kernel import open_panel

    with tapelab_kernel() as (_, kc):     # its own kernel, shut down with the panel in it
        comm_id = open_panel(kc, close=False)
        reply, msgs = run(kc, "import tapelab\nfrom tapelab import nn, fx\n"
                              "gm = fx.symbolic_trace(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))\ngm")
        assert reply["content"]["status"] == "ok", reply["content"]
        result = next(m for m in msgs if m["msg_type"] == "execute_result")["content"]["data"]
        assert "application/vnd.jupyter.widget-view+json" in result
        assert "application/vnd.tapelab.graph+json" in result and "def forward" in result["text/html"]
        deadline = time.time() + 5
        sent = [d for d in comm_data(msgs, comm_id) if d["type"] != "hello"]
        while not sent and time.time() < deadline:    # the panel's comm may open late
            _, msgs = run(kc, "gm2 = fx.symbolic_trace(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))")
            sent = [d for d in comm_data(msgs, comm_id) if d["type"] != "hello"]
        assert [d["type"] for d in sent] == ["begin", "delta", "end"], sent
        delta = sent[1]
        assert [n["opcode"] for n in delta["nodes"]] == ["placeholder", "call_module", "call_module", "output"]
