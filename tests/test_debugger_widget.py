"""The Debugger widget without a browser: state after step / step over / continue / run to NaN,
breakpoints set from frontend messages, the gradient panel's data, the graph it draws; and the
``%debug_backward`` magic in a real kernel, driven by widget messages while the kernel is idle."""
from __future__ import annotations

import json

import numpy as np
import pytest
from kernel_session import drain, run

pytest.importorskip("anywidget")

import tapelab as tl  # noqa: E402
from tapelab import debug, nn  # noqa: E402
import tapelab.nn.functional as F  # noqa: E402
from tapelab.widgets import Debugger  # noqa: E402
from tapelab.widgets.debugger import graph_from_stepper  # noqa: E402


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x).tanh()


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.b = Block()

    def forward(self, x):
        return self.b(self.a(x))


def _stack_loss(seed=0):
    tl.manual_seed(seed)
    m = Stack()
    x = tl.randn(4, 3)
    with debug.record():
        loss = (m(x) ** 2).mean()
    return m, x, loss


class Head(nn.Module):
    def forward(self, z):
        return F.softmax(z, -1).log()   # underflows to 0 for large logits: log(0) = -inf


class NaNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2).double()
        self.head = Head()

    def forward(self, x):
        return self.head(self.fc(x))


def _nan_loss():
    m = NaNNet()
    with tl.no_grad():
        m.fc.weight.copy_(tl.tensor([[1000.0, 0.0], [0.0, 0.0]], dtype=tl.float64))
        m.fc.bias.zero_()
    x = tl.tensor([[1.0, 0.5], [2.0, -1.0]], dtype=tl.float64)
    with debug.record():
        loss = -m(x)[:, 0].sum()
    return m, loss


def _msg(w, cmd, **kw):
    """What a button click sends: a custom message handled by the widget."""
    w._on_msg(w, {"type": "cmd", "cmd": cmd, **kw}, [])


def _strict_json(obj):
    return json.loads(json.dumps(obj, allow_nan=False))


def test_initial_state_graph_and_json():
    m, x, loss = _stack_loss()
    w = Debugger(loss)
    st = w.state
    assert st["seq"] == 1 and st["current"] is None and st["visited"] == [] and not st["done"]
    assert st["next"] == ["b0"] and st["status"] == "paused before the first node"
    g = w.graph
    ids = {n["id"] for n in g["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids and e["kind"] == "grad" for e in g["edges"])
    # topological: every edge goes from an earlier index to a later one (the layout ranks by it)
    idx = {n["id"]: n["index"] for n in g["nodes"]}
    assert all(idx[e["source"]] < idx[e["target"]] for e in g["edges"])
    # module groups from the recorded module paths
    assert {"g:a", "g:a.fc", "g:b", "g:b.fc"} <= {gr["id"] for gr in g["groups"]}
    assert {n["module"] for n in g["nodes"]} >= {"a.fc", "b.fc", "b", "a"}
    for obj in (w.graph, w.state, w.grads):
        _strict_json(obj)
    assert graph_from_stepper(w.stepper.to_dict())["nodes"] == g["nodes"]


def test_three_steps_move_the_current_node_and_the_gradient_panel():
    m, x, loss = _stack_loss()
    w = Debugger(loss)
    seen, panels = [], []
    for k in range(3):
        _msg(w, "step")
        st = w.state
        assert st["seq"] == k + 2 and st["command"] == "step" and st["steps"] == k + 1
        seen.append(st["current"]["id"])
        assert st["visited"] == seen
        assert w.grads["node"] == st["current"]["id"]
        panels.append(json.dumps(w.grads, sort_keys=True))
        _strict_json(w.grads)
    assert len(set(seen)) == 3 and len(set(panels)) == 3
    assert w.state["current"]["name"] == w.stepper.current.name
    # the gradient panel: incoming and outgoing, TensorView data (stats, histogram, 2-D heatmap)
    g = w.grads
    assert g["incoming"] and g["outgoing"]
    t = g["outgoing"][0]
    assert {"shape", "dtype", "stats", "hist"} <= set(t) and t["name"].startswith("outgoing[0] → ")
    assert t["target"] in {n["id"] for n in w.graph["nodes"]}


def test_step_over_module_continue_and_gradients_equal_backward():
    m, x, loss = _stack_loss()
    w = Debugger(loss)
    while w.state["current"] is None or not w.state["current"]["module"].startswith("b"):
        w.step()
    mod = w.state["current"]["module"]
    _msg(w, "step_over")
    st = w.state
    assert st["command"] == "step_over"
    assert not st["current"]["module"].startswith(mod) or st["current"]["module"] == ""
    assert st["stop_reason"].startswith("left module")
    _msg(w, "continue")   # no breakpoint: to the end
    assert w.state["done"] and w.state["status"].startswith("done") and w.state["current"] is None
    assert w.grads == {"node": None, "incoming": [], "outgoing": []}
    got = [p.grad.numpy().copy() for p in m.parameters()]
    m2, x2, loss2 = _stack_loss()
    loss2.backward()
    for a, p in zip(got, m2.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-6)
    _msg(w, "step")   # after the end: nothing happens, no error
    assert w.state["done"] and w.state["error"] is None


def test_breakpoints_from_clicks_stop_continue_and_can_be_removed():
    m, x, loss = _stack_loss()
    w = Debugger(loss)
    tanh_a = next(n for n in w.graph["nodes"] if n["label"] == "TanhBackward0" and n["module"] == "a")
    _msg(w, "toggle_breakpoint", node=tanh_a["id"])     # the frontend sends the view-model id
    assert [b["node"] for b in w.state["breakpoints"]] == [tanh_a["id"]]
    _msg(w, "continue")
    st = w.state
    assert st["current"]["id"] == tanh_a["id"] and st["stop_reason"].startswith("breakpoint")
    assert st["breakpoints"][0]["hits"] == 1
    assert w.toggle_breakpoint(tanh_a["node_id"]) is False     # from Python: removed
    assert w.state["breakpoints"] == []
    _msg(w, "toggle_breakpoint", node="nonsense")
    assert w.state["error"] and not w.state["done"]
    w.cont()
    assert w.state["done"]


def test_run_to_nan_stops_at_the_log_and_explains_it():
    m, loss = _nan_loss()
    w = Debugger(loss)
    _msg(w, "run_to_nan")
    st = w.state
    cur = st["current"]
    assert cur["name"] == "LogBackward0" and cur["module"] == "head" and cur["forward_op"] == "log"
    assert cur["finite"] is False and st["stop_reason"] == "nan" and st["nonfinite"] == [cur["id"]]
    assert "softmax(z, -1).log()" in cur["source"]["code"]
    assert "LogBackward0 produced nan" in st["explain"] and "module 'head'" in st["explain"]
    assert "error" not in st["status"] and "stopped: nan" in st["status"]
    # the panel shows the NaNs: the outgoing gradient counts them, the 2-D heatmap exists
    out = w.grads["outgoing"][0]
    assert out["stats"]["nan"] > 0 and out["heatmap"]["rows"] == 2
    _strict_json(w.state)
    _strict_json(w.grads)
    # the saved-notebook fallback names the stop
    data = w._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert "LogBackward0 produced nan" in data["text/html"]
    assert data["application/vnd.tapelab.graph+json"]["nodes"]
    w.finish()
    assert w.state["done"] and np.isnan(m.fc.weight.grad.numpy()).any()


def test_a_stepper_can_be_wrapped_and_a_finite_run_to_nan_reaches_the_end():
    m, x, loss = _stack_loss()
    s = debug.step_backward(loss)
    s.step()
    w = Debugger(s, title="mine")
    assert w.stepper is s and w.state["steps"] == 1 and w.graph["meta"]["title"] == "mine"
    w.run_to_nan()
    assert w.state["done"] and w.state["nonfinite"] == []


# ---------------------------------------------------------------- the magic in a real kernel
jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

NAN_CELL = """
import tapelab as tl
from tapelab import nn, debug
import tapelab.nn.functional as F
class Head(nn.Module):
    def forward(self, z):
        return F.softmax(z, -1).log()
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(2, 2).double(); self.head = Head()
    def forward(self, x):
        return self.head(self.fc(x))
m = Net()
with tl.no_grad():
    m.fc.weight.copy_(tl.tensor([[1000.0, 0.0], [0.0, 0.0]], dtype=tl.float64)); m.fc.bias.zero_()
x = tl.tensor([[1.0, 0.5], [2.0, -1.0]], dtype=tl.float64)
with debug.record():
    loss = -m(x)[:, 0].sum()
"""


def test_debug_backward_magic_in_a_kernel_driven_by_widget_messages():
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        reply, _ = run(kc, "%load_ext tapelab.kernel")
        assert reply["content"]["status"] == "ok"
        reply, msgs = run(kc, NAN_CELL + "%debug_backward -o dbg loss")
        assert reply["content"]["status"] == "ok", reply["content"]
        shown = [m["content"]["data"] for m in msgs if m["msg_type"] == "display_data"]
        assert shown and "application/vnd.jupyter.widget-view+json" in shown[-1]
        model_id = shown[-1]["application/vnd.jupyter.widget-view+json"]["model_id"]
        opens = [m for m in msgs if m["msg_type"] == "comm_open" and m["content"]["comm_id"] == model_id]
        assert opens and opens[0]["content"]["data"]["state"]["_view"] == "debugger"

        # the kernel is idle; a click arrives as an ipywidgets custom message
        def click(cmd):
            kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": model_id, "data": {
                "method": "custom", "content": {"type": "cmd", "cmd": cmd}}}))
            got = drain(kc, lambda m: m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == model_id
                         and "state" in m["content"]["data"].get("state", {}))
            states = [m["content"]["data"]["state"]["state"] for m in got
                      if m["msg_type"] == "comm_msg" and "state" in m["content"]["data"].get("state", {})]
            assert states, [m["msg_type"] for m in got]
            return states[-1]

        st = click("step")
        assert st["steps"] == 1 and st["current"]["name"] == "NegBackward0"
        st = click("run_to_nan")
        assert st["current"]["name"] == "LogBackward0" and st["stop_reason"] == "nan"
        reply, msgs = run(kc, "print(dbg is _debugger, dbg.stepper.current.name, dbg.state['seq'])")
        out = "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")
        assert "True LogBackward0 3" in out
        reply, msgs = run(kc, "%debug_backward")
        assert "usage: %debug_backward" in "".join(m["content"].get("text", "") for m in msgs)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
