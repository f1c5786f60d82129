"""CaptureView's view model of a captured training step (steps with shapes, buffer roles, pool,
reuse, timing), the widget and its saved output, the rich display of a Graph, and capture_done
streamed to the side panel (a fake bridge)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tapelab as T
from tapelab import nn
from tapelab.graphs import Graph, graph, make_graphed_callables
from tapelab.widgets.captureview import (CAPTURE_MIME, CAPTURE_SCHEMA, capture_html, capture_model, measure,
                                         model_from_summary)

B, DIN, DH, NCLS = 16, 12, 24, 5


def _setup(opt="sgd"):
    T.manual_seed(0)
    model = nn.Sequential(nn.Linear(DIN, DH), nn.ReLU(), nn.Linear(DH, NCLS))
    if opt == "sgd":
        o = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        o = T.optim.Adam(model.parameters(), lr=0.01, capturable=True)
    sx, sy = T.randn(B, DIN), T.randint(0, NCLS, (B,))

    def step():
        loss = nn.functional.cross_entropy(model(sx), sy)
        loss.backward()
        o.step()
        return loss
    for _ in range(2):
        o.zero_grad(set_to_none=True)
        step()
    return model, o, sx, sy, step


@pytest.fixture(scope="module")
def captured():
    model, opt, sx, sy, step = _setup()
    g = Graph()
    opt.zero_grad(set_to_none=True)
    with graph(g):
        loss = step()
    return g, model, opt, sx, sy, loss, step


def test_view_model_of_a_captured_training_step(captured):
    g, model, opt, sx, sy, loss, _ = captured
    m = capture_model(g, title="mlp step", names={"x": sx, "y": sy, "loss": loss}, module=model, optimizer=opt)
    json.dumps(m)                                        # JSON only: nothing of the engine leaks
    assert m["schema"] == CAPTURE_SCHEMA and m["version"] == 1 and m["captured"]
    gr = m["graph"]
    assert gr["schema"] == "tapelab.graph"
    steps = [n for n in gr["nodes"] if n["kind"] == "forward"]
    assert len(steps) == len(g.nodes()) == m["stats"]["steps"]
    assert [n["op"] for n in steps] == [n["op"] for n in g.nodes()]
    # ops with shapes: the first step is linear(x, W1, b1) -> (B, DH), its inputs (B, DIN), (DH, DIN), (DH)
    mm = steps[0]
    assert mm["op"] == "linear" and mm["shape"] == [B, DH] and mm["input_shapes"] == [[B, DIN], [DH, DIN], [DH]]
    # every edge joins known nodes; every step but those reading only constants has an input edge
    ids = {n["id"] for n in gr["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in gr["edges"])
    # groups are the source lines: forward, backward and optimizer lines of step()
    labels = [grp["label"] for grp in gr["groups"]]
    assert any("cross_entropy" in s for s in labels) and "loss.backward()" in labels and "o.step()" in labels

    bufs = {b["label"]: b for b in m["buffers"] if b["label"]}
    assert bufs["x"]["role"] == "input" and bufs["y"]["role"] == "input" and bufs["y"]["dtype"] == "int64"
    assert bufs["loss"]["role"] == "output" and bufs["loss"]["shape"] == []
    assert bufs["0.weight"]["role"] == "state" and bufs["0.weight"]["writes"] >= 1   # SGD updates it in place
    assert bufs["0.weight.momentum_buffer"]["role"] == "state"
    assert bufs["0.weight.grad"]["role"] == "output"      # a gradient made during capture lives in the pool
    s = m["stats"]
    assert s["static_inputs"] == 2 and s["static_state"] == 8 and s["static_outputs"] >= 5
    assert s["pool_nbytes"] == g.summary()["pool_nbytes"] > 0 and s["pool_graphs"] == 1
    assert s["reused_bytes"] == sum(b["nbytes"] for b in m["buffers"] if b["role"] in ("output", "intermediate"))
    assert s["inplace_writes"] >= 8                       # 4 parameters + 4 momentum buffers
    # leaves: static inputs and state read before the program writes them, marked by role
    leaves = {n["label"]: n for n in gr["nodes"] if n["kind"] == "leaf"}
    assert leaves["x"]["role"] == "input" and leaves["0.weight"]["role"] == "state"
    # the step writing a parameter is marked in place; the loss's producer is a static output
    assert any(n["writes_static"] for n in steps) and any(n["static_out"] for n in steps)
    assert m["timing"]["replays"] == g.replays and m["timing"]["replay_us"] is None
    html = capture_html(m)
    assert "mlp step" in html and "pool" in html and "<script" not in html


def test_timing_measured_and_given(captured):
    g, model, opt, sx, sy, loss, step = captured
    before = g.replays
    t = measure(g, eager=step, repeat=6)
    assert g.replays == before + 1 + 6              # one warm-up call, then 6 timed
    assert t["replay_us"] > 0 and t["eager_us"] > 0
    m = capture_model(g, timing=t)
    assert m["timing"]["replays"] == before + 7
    assert m["timing"]["speedup"] == pytest.approx(t["eager_us"] / t["replay_us"], rel=0.01)
    given = capture_model(g, timing={"replay_us": 10.0, "eager_us": 40.0, "source": "given"})["timing"]
    assert given["speedup"] == 4.0 and given["source"] == "given"


def test_capturable_adam_and_shared_pool():
    model, opt, sx, sy, step = _setup("adam")
    g = Graph()
    opt.zero_grad(set_to_none=True)
    with graph(g):
        step()
    m = capture_model(g, module=model, optimizer=opt)
    labels = {b["label"]: b["role"] for b in m["buffers"]}
    assert labels["0.weight.step"] == "state" and labels["0.weight.exp_avg_sq"] == "state"
    g2 = Graph()
    with graph(g2, pool=g.pool()):
        sx * 2
    s = capture_model(g2)["stats"]
    assert s["pool_graphs"] == 2 and s["pool_shared_nbytes"] == g.pool().nbytes > s["pool_nbytes"]


def test_graphed_callable_and_uncaptured_graph():
    lin = nn.Linear(4, 3)
    make_graphed_callables(lin, (T.randn(2, 4, requires_grad=True),), num_warmup_iters=1)
    m = capture_model(lin.fwd_graph)
    assert m["stats"]["steps"] > 0 and capture_model(lin.bwd_graph)["stats"]["steps"] > 0
    labels = {b["label"] for b in m["buffers"]}
    assert {"parameter 'weight'", "parameter 'bias'", "sample_args[0]"} <= labels   # make_graphed_callables' names
    empty = capture_model(Graph())
    assert not empty["captured"] and empty["graph"]["nodes"] == [] and empty["stats"]["pool_nbytes"] == 0
    bare = model_from_summary({"device": "cpu", "nodes": [{"kind": "op", "op": "mul", "inputs": ["b0"],
                                                          "outputs": ["b1"], "where": "f.py:3 (y = x * 2)"}],
                               "static_inputs": [], "pool_nbytes": 0, "replays": 0})
    assert [n["op"] for n in bare["graph"]["nodes"]] == ["mul"] and bare["graph"]["groups"][0]["label"] == "y = x * 2"


def test_widget_and_rich_display(captured):
    pytest.importorskip("anywidget")
    from tapelab.widgets import CaptureView
    g, model, opt, sx, sy, loss, step = captured
    v = CaptureView(g, replay_us=5.0, eager_us=20.0, title="given", module=model)
    assert v._view == "capture" and v.capture["timing"]["speedup"] == 4.0
    n = g.replays
    g.replay()
    v.refresh()
    assert v.capture["timing"]["replays"] == n + 1
    t = v.measure(eager=step, repeat=3)
    assert t["replay_us"] > 0 and t["eager_us"] > 0
    data = v._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data[CAPTURE_MIME]["stats"]["steps"] == len(g.nodes()) and "text/html" in data
    from tapelab.kernel.display import _capture_bundle
    before = g.replays
    bundle = _capture_bundle(g)
    assert CAPTURE_MIME in bundle and bundle["text/plain"].startswith("Graph(")
    assert g.replays == before                                       # display never replays


class _Events:
    def __init__(self):
        self.cbs = {}

    def register(self, name, fn):
        self.cbs.setdefault(name, []).append(fn)

    def unregister(self, name, fn):
        self.cbs[name].remove(fn)


class _Bridge:
    listening = True

    def __init__(self):
        self.sent = []
        self.shell = type("Shell", (), {})()
        self.shell.events = _Events()

    def send(self, data):
        self.sent.append(json.loads(json.dumps(data)))
        return True


def test_capture_done_streams_to_the_panel():
    from tapelab.kernel import capture_stream
    bridge = _Bridge()
    capture_stream.install(bridge)
    try:
        x = T.randn(3, 4)
        g = Graph()
        with graph(g):
            y = (x * 2).relu()
        assert len(bridge.sent) == 1
        msg = bridge.sent[0]
        assert msg["type"] == "capture" and not msg["update"]
        m = msg["capture"]
        assert [n["op"] for n in m["graph"]["nodes"] if n["kind"] == "forward"] == ["mul", "relu"]
        assert m["graph"]["nodes"][1]["shape"] == [3, 4]                # shapes: the Graph was found
        for fn in bridge.shell.events.cbs["post_run_cell"]:
            fn()
        assert len(bridge.sent) == 1                                     # not replayed: nothing new
        g.replay()
        g.replay()
        for fn in bridge.shell.events.cbs["post_run_cell"]:
            fn()
        assert bridge.sent[-1]["update"] and bridge.sent[-1]["capture"]["timing"]["replays"] == 2
        np.testing.assert_allclose(y.numpy(), np.maximum(x.numpy() * 2, 0))
        bridge.listening = False
        with graph(Graph()):
            x + 1
        assert len(bridge.sent) == 2                                     # nobody listens: nothing sent
    finally:
        capture_stream.uninstall()
    assert "post_run_cell" not in bridge.shell.events.cbs or not bridge.shell.events.cbs["post_run_cell"]
