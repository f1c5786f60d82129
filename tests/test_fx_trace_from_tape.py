"""tapelab.fx.trace_from_tape: graphs recorded from an eager run, specialised and guarded."""
from __future__ import annotations

import numpy as np
import pytest

import tapelab
import tapelab.fx as fx
from tapelab.fx.prims import prims


def test_control_flow_is_specialised_to_the_example():
    def f(x, n):
        for _ in range(n):
            x = x * 2 if x.sum() > 0 else x - 1
        return tapelab.relu(x)
    x = tapelab.ones(2, 3)
    gm = fx.trace_from_tape(f, x, 3)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"][1:] == \
        [prims.mul, prims.mul, prims.mul, prims.relu]
    np.testing.assert_allclose(gm(x * 0.5, 3).numpy(), f(x * 0.5, 3).numpy())
    assert "prims.mul(x, 2)" in gm.code


def test_guards_fire_with_a_clear_message():
    gm = fx.trace_from_tape(lambda x, n: x * n, tapelab.ones(2, 3), 3)
    with pytest.raises(fx.GuardError, match=r"input 'x': traced with shape \(2, 3\) and dtype float32, "
                                            r"called with shape \(4, 3\)"):
        gm(tapelab.ones(4, 3), 3)
    with pytest.raises(fx.GuardError, match="called with dtype float64"):
        gm(tapelab.ones(2, 3, dtype=tapelab.float64), 3)
    with pytest.raises(fx.GuardError, match="input 'n': traced with value 3, called with 4"):
        gm(tapelab.ones(2, 3), 4)
    with pytest.raises(fx.GuardError, match="traced with a Tensor, called with list"):
        gm([1.0], 3)
    assert gm.graph.find_nodes(op="call_function", target=fx.trace_from_tape.__globals__["guard_inputs"])


def test_guards_survive_dead_code_elimination_and_run_in_the_interpreter():
    gm = fx.trace_from_tape(lambda x: x + 1, tapelab.ones(2))
    gm.graph.eliminate_dead_code()
    gm.recompile()
    with pytest.raises(fx.GuardError):
        fx.Interpreter(gm).run(tapelab.ones(3))


def test_module_outputs_and_gradients_match_eager():
    tapelab.manual_seed(0)
    layer = tapelab.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    model = tapelab.nn.TransformerEncoder(layer, 2)
    x = tapelab.randn(2, 5, 8)
    gm = fx.trace_from_tape(model, x)
    assert all(n.op in ("placeholder", "get_attr", "call_function", "call_method", "output") for n in gm.graph.nodes)
    want = model(x)
    want.sum().backward()
    grads = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
    model.zero_grad()
    got = gm(x)
    got.sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    for k, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_cnn_in_eval_mode_reads_buffers():
    tapelab.manual_seed(1)
    model = tapelab.nn.Sequential(tapelab.nn.Conv2d(1, 2, 3), tapelab.nn.BatchNorm2d(2), tapelab.nn.ReLU()).eval()
    x = tapelab.randn(2, 1, 6, 6)
    gm = fx.trace_from_tape(model, x)
    targets = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    assert {"0.weight", "1.running_mean", "1.running_var"} <= targets
    np.testing.assert_allclose(gm(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_detach_keeps_the_graph_connected_without_gradient():
    def f(x):
        return x * x.detach()
    x = tapelab.tensor([3.0], requires_grad=True)
    gm = fx.trace_from_tape(f, x)
    assert "detach" in [getattr(n.target, "__name__", n.target) for n in gm.graph.nodes
                        if n.op in ("call_method", "call_function")]   # detach is an op of the dispatcher
    y = tapelab.tensor([5.0], requires_grad=True)
    out = gm(y)
    out.backward()
    assert out.item() == 25.0 and y.grad.item() == 5.0


def test_multiple_outputs_and_extra_outputs():
    def f(x):
        values, idx = x.max(dim=1)
        return values, idx, {"s": x.sum()}
    x = tapelab.tensor([[1.0, 5.0], [7.0, 2.0]])
    gm = fx.trace_from_tape(f, x)
    v, i, d = gm(tapelab.tensor([[4.0, 3.0], [0.0, 9.0]]))
    assert v.tolist() == [4.0, 9.0] and i.tolist() == [0, 1] and d["s"].item() == 16.0


def test_in_place_on_an_intermediate_is_recorded_functionally():
    def f(x):
        y = x * 2
        y.add_(1)
        y.relu_()
        return y + 1
    gm = fx.trace_from_tape(f, tapelab.ones(2))
    x = tapelab.tensor([-3.0, 2.0])
    np.testing.assert_allclose(gm(x).numpy(), f(x).numpy())


def test_in_place_mutation_of_an_input_is_written_back_by_the_graph():
    """Later reads see the written value, and the graph ends by writing it into the input."""
    def f(x):
        y = x * 2
        x.add_(1)
        return y + x
    gm = fx.trace_from_tape(f, tapelab.ones(2))
    assert [n.name for n in gm.graph.nodes if n.op == "call_function"][-1] == "write_x"
    x, twin = tapelab.tensor([-3.0, 2.0]), tapelab.tensor([-3.0, 2.0])
    np.testing.assert_allclose(gm(x).numpy(), f(twin).numpy())
    assert x.tolist() == twin.tolist() == [-2.0, 3.0]


def test_train_mode_batch_norm_replays_its_running_statistics():
    """The running statistics are written in place by the graph (momentum=None's factor is a graph
    op, so each replay uses its own step's factor), bit for bit as eager."""
    for momentum in (0.1, None):
        tapelab.manual_seed(0)
        bn, twin = tapelab.nn.BatchNorm1d(3, momentum=momentum), tapelab.nn.BatchNorm1d(3, momentum=momentum)
        x0 = tapelab.randn(5, 3)
        gm = fx.trace_from_tape(bn, x0)
        twin(x0)                                 # the trace's own eager step
        for _ in range(3):
            x = tapelab.randn(5, 3)
            np.testing.assert_array_equal(gm(x).detach().numpy(), twin(x).detach().numpy())
        for a, b in zip(bn.buffers(), twin.buffers()):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert int(bn.num_batches_tracked) == 4


def test_in_place_mutation_through_a_view_is_rejected():
    def g(x):
        y = x * 2
        y[0].add_(1)
        return y + 1
    with pytest.raises(fx.TraceError, match="modified in place"):
        fx.trace_from_tape(g, tapelab.ones(2))
    assert not tapelab.dispatch.STATE.modes
