"""What the cards show on a real model (issue 15): parameter names on tape leaves and the ops that
read them, module paths on FX ops from ``trace_from_tape`` and on captured steps, with their
source line. A 2-layer Transformer encoder trained with AdamW."""
from __future__ import annotations

import inspect
import os

import pytest

import tapelab as T
from tapelab import nn
from tapelab.graphs import Graph, graph
from tapelab.tape import tensor_id
from tapelab.widgets.captureview import capture_model
from tapelab.widgets.fx_adapter import graph_from_fx
from tapelab.widgets.viewmodel import GraphBuilder, graph_from_tape

D, HEADS, FF = 16, 2, 32


def _encoder():
    T.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=D, nhead=HEADS, dim_feedforward=FF, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2)


@pytest.fixture(scope="module")
def trained_tape():
    model = _encoder()
    opt = T.optim.AdamW(model.parameters(), lr=1e-3)
    x = T.randn(3, 5, D)
    with T.tape() as t:
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return model, t


def test_tape_leaves_carry_their_parameter_names(trained_tape):
    model, t = trained_tape
    g = graph_from_tape(t)
    params = dict(model.named_parameters())
    leaves = {n["id"]: n for n in g["nodes"] if n["kind"] == "leaf"}
    named = {n["param"]: n for n in leaves.values() if "param" in n}
    assert set(named) == set(params)                      # every parameter the step read, by its real name
    w = params["layers.1.linear1.weight"]
    leaf = named["layers.1.linear1.weight"]
    assert leaf["id"] == f"l{tensor_id(w)}" and leaf["shape"] == list(w.shape) == [FF, D]
    assert leaf["module"] == "layers.1.linear1"
    # inputs and optimizer state are leaves without a name
    assert any("param" not in n for n in leaves.values())
    # the ops that read it list it; an op reading no parameter has no ``params``
    readers = [n for n in g["nodes"] if "layers.1.linear1.weight" in n.get("params", ())]
    assert readers and all(n["kind"] == "forward" for n in readers)
    assert any(n["module"] == "layers.1.linear1" for n in readers)
    norm = [n for n in g["nodes"] if n["kind"] == "forward" and n["module"] == "layers.0.norm1"
            and n.get("params")]
    assert norm and norm[0]["params"] == ["layers.0.norm1.weight", "layers.0.norm1.bias"]
    edges_from_params = {(e["source"], e["target"]) for e in g["edges"] if e["source"] in leaves
                         and "param" in leaves[e["source"]] and e["kind"] == "data"}
    assert sum(len(n.get("params", ())) for n in g["nodes"]) == len(edges_from_params)


def test_streamed_deltas_name_parameters_too(trained_tape):
    model, t = trained_tape
    b = GraphBuilder(fold_steps=False)
    nodes = []
    for i, rec in enumerate(t.nodes):
        b.add(rec)
        if i % 7 == 0:
            nodes += b.take()["nodes"]
    nodes += b.take()["nodes"]
    assert {n["param"] for n in nodes if "param" in n} == {n for n, _ in model.named_parameters()}


def test_trace_from_tape_ops_carry_their_module_path():
    model = _encoder().eval()
    x = T.randn(2, 4, D)
    gm = T.fx.trace_from_tape(model, x)
    fx = {n.name: n for n in gm.graph.nodes}
    g = graph_from_fx(gm)
    by_id = {n["id"]: n for n in g["nodes"]}
    weight = [n for n in g["nodes"] if n.get("param") == "layers.1.linear1.weight"]
    assert len(weight) == 1 and weight[0]["kind"] == "leaf"
    users = [by_id[e["target"]] for e in g["edges"] if e["source"] == weight[0]["id"]]
    assert users and all(u["module"] == "layers.1.linear1" for u in users)
    stack = fx[users[0]["name"]].meta["nn_module_stack"]
    assert stack == {"layers.1": "TransformerEncoderLayer", "layers.1.linear1": "Linear"}
    ops = [n for n in g["nodes"] if n["kind"] == "forward" and n["opcode"] == "call_function"]
    modules = {n["module"] for n in ops}
    assert {"layers.0.self_attn", "layers.0.norm1", "layers.1.linear2", "layers.1.norm2"} <= modules
    assert [n["module"] for n in ops if n["op"] == "guard_inputs"] == [""]     # the guard runs outside any
    assert {g_["path"] for g_ in g["groups"]} >= {"layers", "layers.0", "layers.0.self_attn"}
    assert T.allclose(gm(x), model(x))


def test_captured_steps_carry_module_path_and_source_line():
    model = _encoder()
    opt = T.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
    sx = T.randn(3, 5, D)

    def step():
        loss = model(sx).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        step()
    opt.zero_grad(set_to_none=True)
    g = Graph()
    with graph(g):
        step()
    line = inspect.getsource(step).splitlines()[1].strip()
    lineno = step.__code__.co_firstlineno + 1
    nodes = capture_model(g, module=model, optimizer=opt)["graph"]["nodes"]
    steps = [n for n in nodes if n["kind"] == "forward"]
    lin = [n for n in steps if n["module"] == "layers.0.linear1"]
    assert lin and lin[0]["op"] in ("matmul", "add", "permute", "linear")
    assert lin[0]["source"] == f"{os.path.abspath(__file__)}:{lineno}  {line}"
    assert lin[0]["where"] == f"{os.path.abspath(__file__)}:{lineno} ({line})"
    assert {n["module"] for n in steps} >= {"layers.0.self_attn", "layers.1.norm2", "layers.1.linear2"}
    assert any(n["module"].startswith("optimizer.step") for n in steps)   # AdamW's update, in its scope
    assert all(not n["module"] or not n["module"].endswith(")") or n["module"].startswith("optimizer.")
               for n in steps)                            # a module path, not a source-line label
    assert [n["module"] for n in g.nodes() if n["module"] == "layers.0.linear1"] == ["layers.0.linear1"] * len(lin)
