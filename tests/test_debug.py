"""tapelab.debug: stepping the backward walk and the FX forward pass, stop conditions,
breakpoints, NaN provenance, and the JSON snapshot a viewer renders."""
import inspect
import json
import random
import warnings

import numpy as np
import pytest

import tapelab as tl
import tapelab.nn.functional as F
from tapelab import debug, nn
from tapelab.dispatch import module_scope


def _json(d):
    return json.loads(json.dumps(d, allow_nan=False))


# ---------------------------------------------------------------- random graphs (property test)
MODULES = ["", "enc", "enc.0", "enc.1", "dec", "dec.attn"]
UNARY = [lambda a: a.tanh(), lambda a: a.sin(), lambda a: (a * 0.3).exp(), lambda a: a * a,
         lambda a: a.sigmoid(), lambda a: -a]
BINARY = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b, lambda a, b: a * 0.5 + b.tanh()]


def build(seed):
    """A random float64 graph with fan-out, fan-in, broadcasting, reductions and module scopes."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    leaves = [tl.tensor(nrng.standard_normal(shape), dtype=tl.float64, requires_grad=True)
              for shape in [(3, 4), (4,), (3, 4), (1, 4)][:rng.randint(1, 4)]]
    vals = list(leaves) + [tl.tensor(nrng.standard_normal((3, 4)), dtype=tl.float64)]
    retained = None
    for i in range(rng.randint(2, 12)):
        with module_scope(rng.choice(MODULES)):
            if rng.random() < 0.4:
                v = rng.choice(UNARY)(rng.choice(vals))
            else:
                v = rng.choice(BINARY)(rng.choice(vals), rng.choice(vals))
            if rng.random() < 0.15 and v.ndim == 2:
                v = v.sum(0, keepdim=True)
            if rng.random() < 0.1 and v.requires_grad:
                v.retain_grad()
                retained = v
        vals.append(v)
    pieces = [v for v in vals if v.requires_grad][-3:]
    loss = sum(((p * p).sum() if k % 2 else p.sum()) for k, p in enumerate(pieces))
    return leaves, loss, retained


def drive(stepper, rng, names, steps_taken):
    """Drive ``stepper`` to the end with a random mix of stepping calls."""
    while not stepper.done:
        a = rng.random()
        if a < 0.35:
            stepper.step()
        elif a < 0.5:
            stepper.step_over(rng.choice(MODULES[1:] + [None]))
        elif a < 0.65:
            stepper.run(until=rng.choice(names))
        elif a < 0.75:
            stepper.run(max_steps=rng.randint(1, 4))
        elif a < 0.85:
            stepper.add_breakpoint(name=rng.choice(names))
            stepper.run()
        elif a < 0.9:
            stepper.run(grad_norm_above=rng.uniform(0, 5), module=rng.choice(MODULES[1:]))
        elif a < 0.97:
            _json(stepper.to_dict())
            stepper.current and stepper.current.saved_tensors
        else:
            stepper.finish(record=rng.random() < 0.5)
        steps_taken.append(len(stepper.history))


@pytest.mark.parametrize("seed", range(60))
def test_any_stepping_pattern_accumulates_exactly_like_backward(seed):
    order = [s.name for s in tl.autograd.backward_steps(build(seed)[1])]
    leaves_ref, loss_ref, ret_ref = build(seed)
    loss_ref.backward()

    rng = random.Random(1000 + seed)
    leaves, loss, ret = build(seed)
    if rng.random() < 0.3:  # gradients accumulate into an existing .grad as backward() does
        for a, b in zip(leaves, leaves_ref):
            a.grad = tl.ones_like(a)
            b.grad = b.grad + 1 if b.grad is not None else tl.ones_like(b)
    s = debug.step_backward(loss, retain_graph=rng.random() < 0.5, keep_tensors=rng.random() < 0.5)
    drive(s, rng, sorted(set(order)), [])
    assert s.done and s.stop_reason == "done"
    for a, b in zip(leaves, leaves_ref):
        if b.grad is None:
            assert a.grad is None
        else:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=0, atol=1e-12)
    if ret_ref is not None:
        assert (ret.grad is None) == (ret_ref.grad is None)
        if ret_ref.grad is not None:
            np.testing.assert_allclose(ret.grad.numpy(), ret_ref.grad.numpy(), rtol=0, atol=1e-12)
    if all(r.index == i for i, r in enumerate(s.history)) and len(s.history) == len(order):
        assert [r.name for r in s.history] == order


def test_stepping_is_lazy_and_abandoning_leaves_the_rest_undone():
    x = tl.tensor([1.0, 2.0], dtype=tl.float64, requires_grad=True)
    y = tl.tensor([3.0, 4.0], dtype=tl.float64, requires_grad=True)
    loss = (x * y).sum()
    s = debug.step_backward(loss)
    assert s.current is None and not s.done and x.grad is None
    assert [n.name() for n in s.peek()] == ["SumBackward0"]
    f = s.step()
    assert f.name == "SumBackward0" and x.grad is None
    f = s.step()
    assert f.name == "MulBackward0" and x.grad is None
    assert sorted(n.name() for n in s.peek()) == ["AccumulateGrad", "AccumulateGrad"]
    s.step()
    assert (x.grad is None) != (y.grad is None)  # one leaf accumulated, the other still pending
    s.finish()
    assert s.done and s.step() is None and s.current is None
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 2.0])


def test_current_frame_gradients_saved_tensors_and_release():
    x = tl.tensor([1.0, -2.0], dtype=tl.float64, requires_grad=True)
    w = tl.tensor([0.5, 3.0], dtype=tl.float64, requires_grad=True)
    loss = (x * w).sum()
    s = debug.step_backward(loss)
    s.run(until="MulBackward0")
    cur = s.current
    assert cur.forward_op == "mul" and cur.name == "MulBackward0"
    np.testing.assert_array_equal(cur.grad_outputs[0].numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(cur.grad_inputs[0].numpy(), [0.5, 3.0])
    np.testing.assert_array_equal(cur.grad_inputs[1].numpy(), [1.0, -2.0])
    assert [t is x or t is w for t in cur.saved_tensors] == [True, True]
    assert [t is x or t is w for t in cur.inputs] == [True, True]
    node = cur.node
    s.step()
    assert cur.saved_tensors == ()  # freed once the stepper moved past it (retain_graph=False)
    with pytest.raises(RuntimeError, match="second time"):
        node.saved_tensors
    s.finish()
    rec = s.history[1]
    assert rec.grad_inputs[0]["shape"] == [2] and rec.grad_inputs[0]["max"] == 3.0
    assert rec.tensors is None and rec.node is node


def test_retain_graph_and_keep_tensors():
    x = tl.tensor([1.0, 2.0], dtype=tl.float64, requires_grad=True)
    loss = (x.exp() * x).sum()
    s = debug.step_backward(loss, retain_graph=True, keep_tensors=True)
    s.finish()
    assert all(r.tensors is not None for r in s.history)
    g1 = x.grad.clone()
    loss.backward(retain_graph=True)  # the graph was retained
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1.numpy())
    s2 = debug.step_backward(loss)
    s2.finish()
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_gradient_argument_and_errors():
    x = tl.tensor([1.0, 2.0], dtype=tl.float64, requires_grad=True)
    y = x * 3
    s = debug.step_backward(y, gradient=tl.tensor([1.0, 10.0], dtype=tl.float64))
    s.finish()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 30.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        debug.step_backward(tl.ones(2))
    s = debug.step_backward(x * 2)  # non-scalar without gradient: the walk's own error, at the first step
    with pytest.raises(RuntimeError, match="implicitly created only for scalar"):
        s.step()
    assert s.done and "RuntimeError" in _json(s.to_dict())["error"]


# ---------------------------------------------------------------- conditions and breakpoints
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()

    def forward(self, x):
        return self.lin(x).tanh()


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(Block(), Block())
        self.enc2 = nn.Linear(3, 1).double()

    def forward(self, x):
        return self.enc2(self.enc(x)).exp().sum()


@pytest.fixture
def stack():
    tl.manual_seed(0)
    m = Stack()
    x = tl.randn(2, 3, dtype=tl.float64)
    with debug.record():
        loss = m(x)
    return m, loss


def test_record_puts_module_paths_ops_sources_and_tape_seq_on_nodes(stack):
    m, loss = stack
    s = debug.step_backward(loss)
    s.finish()
    by_name = {}
    for r in s.history:
        by_name.setdefault(r.name, []).append(r)
    assert by_name["ExpBackward0"][0].module == "" and by_name["ExpBackward0"][0].forward_op == "exp"
    assert {r.module for r in by_name["TanhBackward0"]} == {"enc.0", "enc.1"}
    assert all(r.tape_seq is not None for r in s.history if r.name != "AccumulateGrad")
    assert all(r.source["function"] == "forward" for r in s.history if r.name != "AccumulateGrad")
    # a leaf's module is that of the nodes that fed it
    leaf_mods = {r.module for r in s.history if r.name == "AccumulateGrad"}
    assert leaf_mods == {"enc.0.lin", "enc.1.lin", "enc2"}
    assert not tl.autograd.is_anomaly_enabled()


def test_run_until_name_module_and_str_dispatch(stack):
    m, loss = stack
    s = debug.step_backward(loss)
    f = s.run(until="TanhBackward0")
    assert f.name == "TanhBackward0" and f.module == "enc.1" and s.stop_reason == "name TanhBackward0"
    f = s.run(until="enc.0")  # no node is called that: a module path
    assert f.module.startswith("enc.0") and s.stop_reason == "module 'enc.0'"
    s.finish()

    tl.manual_seed(0)
    m = Stack()
    with debug.record():
        loss = m(tl.randn(2, 3, dtype=tl.float64))
    s = debug.step_backward(loss)
    f = s.run(module="enc")  # prefix of a path, not of a name: enc2 does not match
    assert f.module.startswith("enc.") and s.history[-2].module in ("", "enc2")
    f = s.run(name=["ExpBackward0", "AccumulateGrad"])
    assert f.name == "AccumulateGrad"
    assert s.run(until="NoSuchBackward0") is None and s.done and s.stop_reason == "done"


def test_step_over_runs_until_the_walk_leaves_the_module(stack):
    m, loss = stack
    s = debug.step_backward(loss)
    s.run(module="enc.1")
    f = s.step_over()  # the current node's module
    assert s.history[-2].module == "enc.1" or s.history[-2].module.startswith("enc.1.")
    assert not (f.module == "enc.1" or f.module.startswith("enc.1."))
    assert s.stop_reason == "left module 'enc.1'"
    f = s.step_over("enc")
    assert not f.module.startswith("enc.") if f is not None else s.done
    s.finish()
    tl.manual_seed(0)
    ref_m = Stack()
    ref_loss = ref_m(tl.randn(2, 3, dtype=tl.float64))
    ref_loss.backward()
    for a, b in zip(m.parameters(), ref_m.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=0, atol=1e-12)


def test_grad_norm_predicate_and_combined_conditions(stack):
    m, loss = stack
    s = debug.step_backward(loss)
    f = s.run(grad_norm_above=1e-9)
    assert f.max_grad_norm > 1e-9 and s.stop_reason == "grad_norm_above 1e-09"
    f = s.run(predicate=lambda fr: fr.name == "MmBackward0" or fr.forward_op in ("mm", "matmul", "addmm",
                                                                                     "linear"))
    assert f is not None and s.stop_reason
    s.finish()

    tl.manual_seed(0)
    m = Stack()
    with debug.record():
        loss = m(tl.randn(2, 3, dtype=tl.float64))
    s = debug.step_backward(loss)
    cond = debug.when(name="TanhBackward0", module="enc.0") | debug.when(name="NoSuch")
    f = s.run(until=cond)
    assert f.name == "TanhBackward0" and f.module == "enc.0"
    assert s.stop_reason == "name TanhBackward0 and module 'enc.0'"
    f = s.run(until=[lambda fr: fr.name == "AccumulateGrad", "ExpBackward0"])
    assert f.name == "AccumulateGrad"
    f = s.run(until=debug.when(op="tanh"))
    assert f is None or f.forward_op == "tanh"
    with pytest.raises(ValueError):
        debug.when()
    assert s.run(max_steps=1) is None or s.stop_reason in ("max_steps", "done")


def test_breakpoints_by_node_tape_seq_node_id_and_name(stack):
    m, loss = stack
    s = debug.step_backward(loss, retain_graph=True)
    nodes = s.to_dict()["graph"]["nodes"]
    tanh_ids = [n["id"] for n in nodes if n["name"] == "TanhBackward0"]
    exp_seq = next(n["tape_seq"] for n in nodes if n["name"] == "ExpBackward0")
    b1 = s.add_breakpoint(exp_seq)                       # an int: a tape_seq
    b2 = s.add_breakpoint(node_id=tanh_ids[-1])
    b3 = s.add_breakpoint(s.node(tanh_ids[0]))           # a graph node
    f = s.run()
    assert f.name == "ExpBackward0" and s.stop_reason == f"breakpoint tape_seq {exp_seq}"
    f = s.run()
    assert f.node_id in tanh_ids and s.stop_reason.startswith("breakpoint node")
    s.remove_breakpoint(b1)
    f = s.run()
    assert f.node_id in tanh_ids and s.stop_reason.startswith("breakpoint node")
    assert [b["number"] for b in s.breakpoints] == [b2, b3]
    assert all(b["hits"] == 1 for b in s.breakpoints)
    s.add_breakpoint("AccumulateGrad")
    assert s.run().name == "AccumulateGrad"
    s.clear_breakpoints()
    assert s.run() is None and s.done
    with pytest.raises(ValueError):
        s.add_breakpoint(node_id=10_000)
    with pytest.raises(ValueError):
        s.add_breakpoint(tl.ones(1, requires_grad=True).exp().grad_fn)
    d = _json(s.to_dict())
    assert d["visited"] == [r.node_id for r in s.history] and d["done"]
    assert d["visited_tape_seq"] == [r.tape_seq for r in s.history if r.tape_seq is not None]


def test_breakpoints_also_stop_step_over_but_not_finish(stack):
    m, loss = stack
    s = debug.step_backward(loss)
    s.add_breakpoint("TanhBackward0")
    s.step_over("")  # the root path covers everything: only the breakpoint stops it
    assert s.current.name == "TanhBackward0"
    s.finish()
    assert s.done and s.breakpoints[0]["hits"] == 1


# ---------------------------------------------------------------- NaN provenance
class Head(nn.Module):
    def forward(self, z):
        p = F.softmax(z, -1)
        return p.log()  # LOG-LINE: softmax underflows to 0 and log(0) = -inf


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2).double()
        self.head = Head()

    def forward(self, x):
        return self.head(self.fc(x))


def _nan_net():
    m = Net()
    with tl.no_grad():
        m.fc.weight.copy_(tl.tensor([[1000.0, 0.0], [0.0, 0.0]], dtype=tl.float64))
        m.fc.bias.zero_()
    x = tl.tensor([[1.0, 0.5], [2.0, -1.0]], dtype=tl.float64)
    return m, x


LOG_LINE = next(i for i, line in enumerate(inspect.getsource(inspect.getmodule(Head)).splitlines(), 1)
                if "LOG-LINE" in line)


def _nan_loss(m, x):
    return -m(x)[:, 0].sum()  # finite: class 0 has probability 1; its gradient is not


def test_run_to_nan_names_the_log_its_module_and_source_line():
    m, x = _nan_net()
    with debug.record():
        loss = _nan_loss(m, x)
    assert np.isfinite(loss.item())
    s = debug.step_backward(loss)
    f = s.run(nan=True)
    assert s.stop_reason == "nan"
    assert f.name == "LogBackward0" and f.forward_op == "log" and f.module == "head"
    assert f.source["line"] == LOG_LINE and f.source["file"] == __file__ and "p.log()" in f.source["code"]
    assert all(r.finite for r in s.history[:-1])
    p = s.provenance()
    assert p["kind"] == "nan" and p["forward_op"] == "log" and p["module"] == "head"
    assert p["inputs"][0]["min"] == 0.0 and p["inputs"][0]["shape"] == [2, 2]  # the underflowed softmax
    text = s.explain()
    assert "LogBackward0 produced nan" in text and "module 'head'" in text and f"line {LOG_LINE}" in text
    assert "input 0: float64[2, 2] min=0" in text
    d = _json(s.to_dict())
    assert d["provenance"]["source"]["line"] == LOG_LINE and d["current"]["finite"] is False
    s.finish()
    assert np.isnan(m.fc.weight.grad.numpy()).any()


def test_anomaly_mode_run_stops_at_nan_instead_of_raising():
    m, x = _nan_net()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tl.autograd.set_detect_anomaly(True):
            loss = _nan_loss(m, x)
            with pytest.raises(RuntimeError, match="LogBackward0"):
                _nan_loss(m, x).backward()  # plain backward raises, as in PyTorch
            m.zero_grad()
            s = debug.step_backward(loss)
            f = s.run()  # nan=None: on while anomaly detection is on
            assert s.stop_reason == "nan" and f.name == "LogBackward0" and f.source["line"] == LOG_LINE
            s.finish()  # the walk goes on; nothing raises
            assert tl.autograd.is_anomaly_check_nan_enabled()
    assert s.done and np.isnan(m.fc.weight.grad.numpy()).any()


def test_nan_without_recording_still_stops_and_says_how_to_get_the_line():
    m, x = _nan_net()
    loss = _nan_loss(m, x)
    s = debug.step_backward(loss)
    f = s.run(nan=True)
    assert f.name == "LogBackward0" and f.source is None and f.forward_op == "log"
    assert "tapelab.debug.record()" in s.explain()


def test_forward_stepping_stops_at_the_nan_node_and_names_it():
    m, x = _nan_net()
    s = debug.step_forward(m, x)
    assert s.traced_by == "symbolic_trace"
    f = s.run(nan=True)
    assert f.name == "log" and f.op == "call_method" and f.target == "log" and f.inputs_finite
    assert s.stop_reason == "nan"
    assert f.inputs[0].min().item() == 0.0
    text = s.explain()
    assert "FX node 'log' (call_method log)" in text and "this node made them" in text
    d = _json(s.to_dict())
    assert d["provenance"]["node"] == "log" and d["current"]["output"]["inf"] == 2


# ---------------------------------------------------------------- forward stepping
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4).double()

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:  # control flow on a value: symbolic tracing fails
            return h.relu() * 2
        return h.sigmoid()


@pytest.mark.parametrize("pattern", ["finish", "steps", "mixed"])
def test_forward_stepping_equals_a_plain_run(stack, pattern):
    m, _ = stack
    x = tl.randn(5, 3, dtype=tl.float64)
    ref = m(x)
    s = debug.step_forward(m, x)
    if pattern == "steps":
        while s.step() is not None:
            pass
    elif pattern == "mixed":
        f = s.step()
        assert f.op == "placeholder" and f.output is x
        f = s.run(op="call_module")
        assert f.module.startswith("enc") and f.inputs[0] is x
        f = s.run(name="exp")
        assert f.target == "exp" and f.output.shape == (5, 1)
    out = s.finish()
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=0, atol=0)
    assert s.done and s.output is out and s.history[-1]["op"] == "output"
    assert [h["name"] for h in s.history] == [n.name for n in s.graph.nodes]
    out.backward()  # the stepped output is differentiable as usual


def test_forward_falls_back_to_trace_from_tape_on_control_flow():
    tl.manual_seed(1)
    m = Branchy()
    x = tl.randn(2, 3, dtype=tl.float64)
    s = debug.step_forward(m, x)
    assert s.traced_by == "trace_from_tape" and s.trace_error
    out = s.finish()
    np.testing.assert_allclose(out.detach().numpy(), m(x).detach().numpy(), rtol=0, atol=1e-15)
    assert _json(s.to_dict())["traced_by"] == "trace_from_tape"


def test_forward_graph_module_function_breakpoints_and_conditions():
    gm = tl.fx.symbolic_trace(lambda x: (x.exp() + 1).log().sum())
    x = tl.tensor([1.0, 2.0], dtype=tl.float64)
    s = debug.step_forward(gm, x)
    assert s.graph_module is gm and s.traced_by is None
    s.add_breakpoint("add")
    f = s.run()
    assert f.name == "add" and s.stop_reason == "breakpoint node add"
    np.testing.assert_allclose(f.inputs[0].numpy(), np.exp([1.0, 2.0]))
    f = s.run(predicate=lambda fr: fr.op == "call_method" and fr.target == "sum")
    assert f.name.startswith("sum") and f.target == "sum"
    with pytest.raises(ValueError, match="no FX node named"):
        s.add_breakpoint("nope")
    with pytest.raises(TypeError, match="backward condition"):
        s.run(until=debug.when(grad_norm_above=1.0))
    s2 = debug.step_forward(lambda y: y * 2, x)
    f = s2.run(until="mul")
    assert f.name == "mul" and s2.finish().tolist() == [2.0, 4.0]


# ---------------------------------------------------------------- the snapshot a viewer renders
def test_to_dict_is_json_serialisable_in_every_state(stack):
    m, loss = stack
    s = debug.step_backward(loss, keep_tensors=True)
    d = _json(s.to_dict())
    assert d["current"] is None and d["steps"] == 0 and d["next"] == [0]
    assert d["graph"]["nodes"][0]["name"] == "ExpBackward0" or d["graph"]["nodes"][0]["name"] == "SumBackward0"
    s.add_breakpoint("TanhBackward0")
    s.run()
    d = _json(s.to_dict())
    cur = d["current"]
    assert cur["name"] == "TanhBackward0" and cur["module"] == "enc.1"
    assert cur["grad_outputs"][0]["shape"] == [2, 3] and cur["saved_tensors"][0]["shape"] == [2, 3]
    assert cur["source"]["function"] == "forward" and d["breakpoints"][0]["name"] == "TanhBackward0"
    assert d["next"] and all(isinstance(i, int) for i in d["next"])
    ids = {n["id"] for n in d["graph"]["nodes"]}
    assert set(d["visited"]) <= ids and all(set(n["next"]) <= ids for n in d["graph"]["nodes"])
    s.finish()
    d = _json(s.to_dict())
    assert d["done"] and d["current"] is None and d["next"] == []
    x = tl.tensor([1.0], dtype=tl.float64, requires_grad=True)
    s = debug.step_backward((x * float("nan")).sum())
    s.run(nan=True)
    _json(s.to_dict())
    fs = debug.step_forward(tl.fx.symbolic_trace(lambda y: (y / 0).sum()), tl.tensor([1.0, 0.0]))
    while fs.step() is not None:
        _json(fs.to_dict())


def test_grad_mode_is_the_callers_across_steps_and_when_abandoned():
    x = tl.tensor([1.0, 2.0], dtype=tl.float64, requires_grad=True)
    s = debug.step_backward((x * x).exp().sum())
    s.step()  # the walk saw grad mode on at its first step
    with tl.no_grad():
        s.step()
        assert not tl.is_grad_enabled()
        del s  # closing an abandoned walk does not restore the mode it first saw
        import gc
        gc.collect()
        assert not tl.is_grad_enabled()
    assert tl.is_grad_enabled()
    s = debug.step_backward((x * 3).sum())
    s.step()
    s.close()
    assert s.done and s.step() is None and (x.grad is None or x.grad.tolist() == [1.0, 1.0])
