"""The view model: schema, module grouping and folding signatures, escaping, DOT export, deltas."""
from __future__ import annotations

import json

import pytest

import tapelab as torch
from tapelab import nn
from tapelab.widgets.viewmodel import (MIME, SCHEMA, VERSION, GraphBuilder, dot_quote, graph_from_grad_fn,
                                       graph_from_tape, to_dot, to_html)

NODE_KEYS = {"id", "kind", "label", "op", "index", "seq", "forward_seq", "group", "module", "shape", "input_shapes",
             "dtype", "device", "requires_grad", "start_ns", "time_ns", "value", "grad", "grad_ops", "source"}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        return self.fc(x).relu()


class Net(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList([Block() for _ in range(n)])
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def record(keep_values=True, n=3):
    torch.manual_seed(0)
    net = Net(n)
    with torch.tape(keep_values=keep_values) as t:
        loss = net(torch.randn(4, 6)).pow(2).mean()
        loss.backward()
    return t


def test_schema_keys_and_json_roundtrip():
    g = graph_from_tape(record(), title="net")
    assert g["schema"] == SCHEMA == "tapelab.graph" and g["version"] == VERSION == 1
    assert MIME == "application/vnd.tapelab.graph+json"
    assert set(g) == {"schema", "version", "nodes", "edges", "groups", "meta"}
    assert all(set(n) == NODE_KEYS for n in g["nodes"])
    assert all(set(e) == {"source", "target", "kind", "shape"} for e in g["edges"])
    assert json.loads(json.dumps(g)) == g
    m = g["meta"]
    assert m["title"] == "net" and m["forward"] > 0 and m["backward"] > 0 and not m["truncated"]
    ids = {n["id"] for n in g["nodes"]}
    assert len(ids) == len(g["nodes"])
    assert all(e["source"] in ids and e["target"] in ids for e in g["edges"])
    kinds = {n["kind"] for n in g["nodes"]}
    assert kinds == {"forward", "backward", "leaf"}


def test_node_attributes_shapes_dtype_device_time_and_summaries():
    g = graph_from_tape(record())
    mm = next(n for n in g["nodes"] if n["op"] == "linear")
    assert mm["shape"] == [4, 6] and mm["dtype"] == "float32" and mm["device"] == "cpu"
    assert mm["input_shapes"] == [[4, 6], [6, 6], [6]] and mm["time_ns"] > 0
    assert mm["value"]["mean"] is not None and mm["grad"]["norm"] is not None   # keep_values: both
    bwd = [n for n in g["nodes"] if n["kind"] == "backward"]
    assert any(n["grad_ops"] > 0 for n in bwd)   # vjp ops are counted on their backward node
    plain = graph_from_tape(record(keep_values=False))
    assert all(n["value"] is None and n["grad"] is None for n in plain["nodes"])


def test_module_groups_nest_and_repeated_blocks_share_a_signature():
    g = graph_from_tape(record())
    groups = {gr["path"]: gr for gr in g["groups"]}
    assert {"layers", "layers.0", "layers.1", "layers.2", "layers.0.fc", "head"} <= set(groups)
    assert groups["layers.0.fc"]["parent"] == "g:layers.0" and groups["layers.0"]["parent"] == "g:layers"
    assert groups["layers"]["parent"] is None and groups["layers.1"]["label"] == "1"
    # layers.0 sees the network input as a leaf; 1 and 2 are identical blocks: equal signatures
    assert groups["layers.1"]["signature"] == groups["layers.2"]["signature"]
    assert groups["layers.1"]["signature"] != groups["head"]["signature"]
    mm = [n for n in g["nodes"] if n["op"] == "linear"]
    assert [n["module"] for n in mm] == ["layers.0.fc", "layers.1.fc", "layers.2.fc", "head"]
    assert groups["layers"]["size"] == sum(1 for n in g["nodes"] if (n["module"] or "").startswith("layers"))


def test_edges_forward_data_and_backward_grad():
    g = graph_from_tape(record())
    by = {n["id"]: n for n in g["nodes"]}
    data = [e for e in g["edges"] if e["kind"] == "data"]
    grad = [e for e in g["edges"] if e["kind"] == "grad"]
    assert all(by[e["target"]]["kind"] == "forward" for e in data)
    assert all(by[e["source"]]["kind"] == "backward" for e in grad)
    # every parameter leaf gets its gradient from an AccumulateGrad node
    acc = [e for e in grad if by[e["source"]]["op"] == "AccumulateGrad"]
    assert len(acc) == 8 and all(by[e["target"]]["kind"] == "leaf" for e in acc)


def test_deltas_add_up_to_the_graph():
    t = record()
    b = GraphBuilder()
    deltas = []
    for i, rec in enumerate(t.nodes):
        b.add(rec)
        if i % 7 == 0:
            deltas.append(b.take())
    deltas.append(b.take())
    full = graph_from_tape(t)
    assert [n["id"] for d in deltas for n in d["nodes"]] == [n["id"] for n in full["nodes"]]
    assert sum(len(d["edges"]) for d in deltas) == len(full["edges"])
    assert {g["id"] for d in deltas for g in d["groups"]} == {g["id"] for g in full["groups"]}


def test_max_nodes_truncates_but_keeps_counting():
    t = record()
    g = graph_from_tape(t, max_nodes=10)
    assert len(g["nodes"]) == 10 and g["meta"]["truncated"] and g["meta"]["total"] > 10


def test_grad_fn_graph():
    x = torch.ones(3, requires_grad=True)
    y = (x * 2).exp().sum()
    g = graph_from_grad_fn(y.grad_fn)
    assert [n["op"] for n in g["nodes"]] == ["SumBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad"]
    assert len(g["edges"]) == 3 and all(e["kind"] == "grad" for e in g["edges"])


EVIL = '"><script>alert(1)</script>\\'


class Evil(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module(EVIL, nn.Linear(2, 2))

    def forward(self, x):
        return getattr(self, EVIL)(x)


def test_user_strings_are_escaped_in_dot_and_html():
    try:
        net = Evil()
    except (KeyError, ValueError, TypeError):
        pytest.skip("nn.Module refuses such a name")
    with torch.tape() as t:
        net(torch.ones(1, 2)).sum()
    g = graph_from_tape(t)
    assert any(EVIL in gr["path"] for gr in g["groups"])   # the model keeps the string as data
    dot = to_dot(g)
    assert dot_quote(EVIL) in dot
    import re
    for line in dot.splitlines():   # every line has balanced unescaped quotes: no string breaks out
        assert len(re.findall(r'(?<!\\)(?:\\\\)*"', line)) % 2 == 0, line
    assert dot_quote(EVIL) == '"\\"><script>alert(1)</script>\\\\"'
    h = to_html(g)
    assert "<script>" not in h and "&lt;script&gt;" in h


def test_dot_export_clusters_and_styles():
    g = graph_from_tape(record())
    dot = to_dot(g)
    assert dot.startswith("digraph tape {") and dot.rstrip().endswith("}")
    assert 'subgraph "cluster_g:layers" {' in dot and 'subgraph "cluster_g:layers.0.fc" {' in dot
    assert dot.count("->") == len(g["edges"])
    assert "style=dashed" in dot                      # gradient edges
    assert 'label="linear\\n(4, 6)"' in dot
    flat = to_dot(g, groups=False)
    assert "subgraph" not in flat and flat.count("[label=") == len(g["nodes"])
    depth = 0
    for ch in dot:                                    # braces balance: parsable nesting
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0


def test_the_optimizer_step_is_one_collapsed_group():
    """The engine runs ``Optimizer.step`` in the scope ``optimizer.step (SGD)``: one group of that
    path (not split at its dot), collapsed, holding every op of the update."""
    torch.manual_seed(0)
    net = nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    with torch.tape() as t:
        for _ in range(3):
            opt.zero_grad()
            net(torch.ones(4, 3)).sum().backward()
            opt.step()
    g = graph_from_tape(t)
    step = [gr for gr in g["groups"] if gr["path"].startswith("optimizer.")]
    assert [(gr["id"], gr["label"], gr["parent"], gr["collapsed"]) for gr in step] == [
        ("g:optimizer.step (SGD)", "optimizer.step (SGD)", None, True)]
    inside = [n for n in g["nodes"] if n["group"] == "g:optimizer.step (SGD)"]
    assert len([n for n in inside if n["kind"] == "forward"]) >= 4
    assert all(not n["requires_grad"] for n in inside if n["kind"] == "forward")
    assert not any(gr["id"].startswith("g:~") for gr in g["groups"])    # no "no-grad ops" boxes left
    assert not any(gr["collapsed"] for gr in g["groups"] if gr not in step)
    assert g["meta"]["steps"] == 3 and g["meta"]["folded"] >= 1
    assert {n.module for n in t.nodes if n.kind == "forward" and not n.requires_grad
            and n.phase == "forward"} <= {"optimizer.step (SGD)", ""}


def test_adamw_under_a_tape_is_one_group_and_a_profile_span():
    from tapelab.profiler import profile

    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = torch.optim.AdamW(net.parameters())
    with torch.tape() as t:
        net(torch.ones(2, 3)).sum().backward()
        opt.step()
    g = graph_from_tape(t)
    assert [gr["id"] for gr in g["groups"] if gr["collapsed"]] == ["g:optimizer.step (AdamW)"]
    with profile(with_modules=True) as prof:
        net(torch.ones(2, 3)).sum().backward()
        opt.step()
    spans = [e.name for e in prof.events() if e.kind == "module"]
    # the profiler's module span of the same scope (it prefixes module spans with "nn.Module: ")
    assert "nn.Module: optimizer.step (AdamW)" in spans, spans


def test_loose_no_grad_ops_of_a_backward_pass_are_one_group():
    """Gradient accumulation runs between backward nodes, outside any vjp and module: one group
    per backward pass ("no-grad ops in backward"), not a box per accumulation."""
    x = torch.ones(3, requires_grad=True)
    with torch.tape() as t:
        y = x * 2
        ((y * y).sum() + (y * 3).sum() + y.exp().sum()).backward()
    g = graph_from_tape(t)
    loose = [gr for gr in g["groups"] if gr["id"].startswith("g:~")]
    assert len([gr for gr in loose if gr["label"] == "no-grad ops in backward"]) <= 1
    assert all(gr["collapsed"] and gr["parent"] is None for gr in loose)


def test_live_tape_past_its_cap_only_counts():
    """Past ``max_nodes`` a LiveTape makes no records (each event is a count), and its counts
    equal those of an uncapped LiveTape over the same steps."""
    from tapelab.widgets.live import LiveTape
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 1, 0, 1])

    def steps(live):
        deltas = []
        live.sinks.append(deltas.append)
        with live:
            for _ in range(30):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        return deltas
    capped, full = LiveTape(max_nodes=20), LiveTape(max_nodes=100_000)   # (a step: 8 forward ops, 4 of them SGD's)
    deltas = steps(capped)
    steps(full)
    cm, fm = capped.graph()["meta"], full.graph()["meta"]
    assert cm["truncated"] and not fm["truncated"] and len(capped.graph()["nodes"]) == 20
    assert (cm["forward"], cm["backward"]) == (fm["forward"], fm["backward"]) and fm["forward"] >= 30 * 8
    assert capped._counting and not capped.nodes                # no records kept past the cap
    assert deltas[-1]["meta"]["forward"] == fm["forward"]      # the last delta carries the counts


def _loop(steps, vary=False):
    """A tape of ``steps`` training steps (``vary``: every step a different batch size)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(12, 4), torch.tensor([0, 1, 1, 0, 1, 0] * 2)
    with torch.tape(keep_values=True) as t:
        prep = torch.zeros(1) + 1                       # a prelude before the first step
        for i in range(steps):
            n = 2 + i if vary else 12
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[:n]), y[:n])
            loss.backward()
            opt.step()
    return t, prep


def test_repeated_steps_fold_into_the_first_with_the_latest_values():
    t, _ = _loop(10)
    folded = graph_from_tape(t)
    b = GraphBuilder(fold_steps=False)
    for rec in t.nodes:
        b.add(rec)
    flat = b.graph()
    m = folded["meta"]
    # the first step creates the momentum buffers (other ops), so it shows, and steps 3-10 fold into step 2
    assert (m["steps"], m["folded"]) == (10, 8)
    assert (m["forward"], m["backward"]) == (flat["meta"]["forward"], flat["meta"]["backward"])
    shown = [n["op"] for n in folded["nodes"] if n["kind"] != "leaf"]
    assert shown == [n["op"] for n in flat["nodes"] if n["kind"] != "leaf"][:len(shown)]   # steps 1 and 2
    assert len(folded["nodes"]) < len(flat["nodes"]) / 3
    # the first step's nodes show the last step's values: the loss node's value is the final loss
    loss_nodes = [n for n in folded["nodes"] if n["op"] == "cross_entropy"]
    last = [r for r in t.nodes if r.kind == "forward" and r.op == loss_nodes[-1]["op"] and r.phase == "forward"][-1]
    assert loss_nodes[-1]["value"] == last.value


def test_steps_that_differ_are_shown_as_they_are():
    t, _ = _loop(6, vary=True)
    g = graph_from_tape(t)
    assert (g["meta"]["steps"], g["meta"]["folded"]) == (6, 0)
    assert sum(n["op"] == "linear" or n["op"] == "matmul" for n in g["nodes"]) >= 12


def test_live_tape_folds_steps_and_updates_values():
    from tapelab.widgets.live import LiveTape
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 1, 0, 1, 0])
    deltas = []
    with LiveTape(sinks=[deltas.append], rate=1e9) as live:   # a delta at every record
        for _ in range(8):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    g = live.graph()
    assert (g["meta"]["steps"], g["meta"]["folded"]) == (8, 7)       # plain SGD: no state, step 1 repeats
    ids = [n["id"] for d in deltas for n in d["nodes"]]
    assert len(ids) == len(set(ids)) == len(g["nodes"])           # folded steps sent no nodes
    updated = {u["id"] for d in deltas for u in d["updates"] if "value" in u}
    assert updated                                                   # ...but updated the first step's values
    assert deltas[-1]["meta"]["folded"] == 7


def test_live_tape_records_one_step_per_delta_in_a_steady_loop():
    """Once steps fold, a step between two deltas is only counted: the counts match a LiveTape
    that sends a delta after every record, and records are made for a few steps only (a plain
    tape of the same loop makes a record per op)."""
    from tapelab.widgets.live import LiveTape

    def run(rate, make=LiveTape):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        x, y = torch.randn(6, 4), torch.tensor([0, 1, 1, 0, 1, 0])
        with (make(rate=rate) if rate else make()) as live:
            for _ in range(30):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        return live
    every, sampled = run(rate=1e9), run(rate=0.001)      # a delta after every record / none in the loop
    em, sm = every.graph()["meta"], sampled.graph()["meta"]
    assert (sm["steps"], sm["folded"], sm["forward"], sm["backward"]) == \
        (em["steps"], em["folded"], em["forward"], em["backward"]) == (30, 29, em["forward"], em["backward"])
    plain = len(run(None, torch.tape).nodes)
    per_step = plain // 30
    made = [t.dropped + len(t.nodes) for t in (sampled, every)]
    assert made[0] * 5 < plain and made[1] * 2 < plain     # records made: a few steps' worth
    assert len(every.nodes) <= every.window * per_step     # records kept: the last `window` steps
