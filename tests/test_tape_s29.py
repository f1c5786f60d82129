"""Session 29: the watched walk, module call and optimizer step with their grad mode and scope
handled inline; what a subscriber sees, and what runs, stays as before."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import events, optim


def _graph(lib, create_graph: bool):
    """A small graph with an op node, a custom Function, a relu and two leaves; the grad mode inside
    the Function's backward is returned (PyTorch runs a backward under ``create_graph``)."""
    seen = []

    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(lib.is_grad_enabled())
            return g * 2

    rng = np.random.default_rng(0)
    w = lib.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b = lib.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    loss = (Scale.apply(w) + b).relu().sum()
    return loss, (w, b), seen


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("create_graph", [False, True])
def test_nodes_run_under_create_graph_and_grads_match_torch_while_watched(create_graph):
    loss, leaves, tl_seen = _graph(tapelab, create_graph)
    with events.subscribe("backward_step", lambda s: None):
        loss.backward(create_graph=create_graph)
    loss, ref, seen = _graph(torch, create_graph)
    loss.backward(create_graph=create_graph)
    assert tl_seen == seen == [create_graph]
    for a, r in zip(leaves, ref):
        np.testing.assert_array_equal(a.grad.detach().numpy(), r.grad.detach().numpy())
        assert a.grad.requires_grad == r.grad.requires_grad


def _modes_seen(walk_with_steps: bool, caller_grad: bool, turn_off_at=None, create_graph=False):
    """The grad mode each ``backward_step`` event sees, and the mode after the walk: by ``backward()``
    (the loop's walk) or by running ``backward_steps`` (the generator's) to its end. A subscriber may
    turn grad off at event ``turn_off_at``."""
    loss, _, _ = _graph(tapelab, False)
    seen = []

    def on_step(step):
        seen.append(tapelab.is_grad_enabled())
        if len(seen) == turn_off_at:
            tapelab.set_grad_enabled(False)

    with events.subscribe("backward_step", on_step):
        with tapelab.set_grad_enabled(caller_grad):
            if walk_with_steps:
                for _ in tapelab.autograd.backward_steps(loss, create_graph=create_graph):
                    pass
            else:
                loss.backward(create_graph=create_graph)
            after = tapelab.is_grad_enabled()
    return seen, after


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("caller_grad", [True, False])
@pytest.mark.parametrize("turn_off_at", [None, 2])
def test_each_step_is_told_under_the_callers_grad_mode_as_the_generator_walk_tells_it(caller_grad, turn_off_at,
                                                                                     create_graph):
    loop = _modes_seen(False, caller_grad, turn_off_at, create_graph)
    generator = _modes_seen(True, caller_grad, turn_off_at, create_graph)
    assert loop == generator
    seen, after = loop
    assert len(seen) == 6
    if turn_off_at is None:
        assert seen == [caller_grad] * 6 and after == caller_grad
    else:   # the subscriber's change is the caller's mode from then on, and after the walk
        assert seen == [caller_grad] * 2 + [False] * 4 and after is False


def test_a_watched_module_call_names_its_path_and_leaves_none_behind_on_error():
    class Boom(tapelab.nn.Module):
        def forward(self, x):
            x = x * 2
            raise ValueError("boom")

    model = tapelab.nn.Sequential(tapelab.nn.Linear(4, 3), tapelab.nn.Sequential(tapelab.nn.ReLU(), Boom()))
    with tapelab.tape() as t:
        with pytest.raises(ValueError, match="boom"):
            model(tapelab.ones(2, 4))
        tapelab.ones(2) + 1   # outside every module again
    assert [(r.op, r.module) for r in t.nodes] == [("linear", "0"), ("relu", "1.0"), ("mul", "1.1"), ("add", "")]


class _Failing(optim.SGD):
    def _step_group(self, group):
        for p in group["params"]:
            p.mul_(0.5)   # (the step runs under no_grad)
        raise RuntimeError("no step")


def test_an_optimizer_step_under_a_tape_is_scoped_and_its_scope_closes_on_error():
    w = tapelab.ones(3, requires_grad=True)
    w.grad = tapelab.ones(3)
    with tapelab.tape() as t:
        optim.SGD([w], lr=0.1).step()
        with pytest.raises(RuntimeError, match="no step"):
            _Failing([w], lr=0.1).step()
        tapelab.ones(3) * 3
    assert [(r.op, r.module) for r in t.nodes] == [
        ("add", "optimizer.step (SGD)"), ("mul", "optimizer.step (_Failing)"), ("mul", "")]
    np.testing.assert_array_equal(w.detach().numpy(), np.full(3, 0.45, np.float32))


def test_a_profiled_optimizer_step_keeps_pytorchs_range_and_the_tape_its_scope():
    w = tapelab.ones(3, requires_grad=True)
    w.grad = tapelab.ones(3)
    opt = optim.SGD([w], lr=0.1)
    with tapelab.profiler.profile() as prof, tapelab.tape() as t:
        opt.step()
    names = [e.name for e in prof.events()]
    assert "Optimizer.step#SGD.step" in names
    assert [(r.op, r.module) for r in t.nodes] == [("add", "optimizer.step (SGD)")]


@pytest.mark.parametrize("x_grad", [True, False])
def test_backward_records_name_their_nodes_and_shapes_and_their_ops_forward_record(x_grad):
    """A linear's node sends three gradients (None where its input needs none), a leaf's node is named
    ``AccumulateGrad``, and an op a vjp runs names the forward record of the node running it."""
    lin = tapelab.nn.Linear(4, 3)
    x = tapelab.ones(2, 4, requires_grad=x_grad)
    with tapelab.tape() as t:
        lin(x).relu().sum().backward()
    by_seq = {r.seq: r for r in t.nodes if r.kind == "forward"}
    addmm = next(r for r in t.nodes if r.op == "AddmmBackward0")
    assert addmm.output_shapes == ((2, 4) if x_grad else None, (3, 4), (3,))
    assert by_seq[addmm.forward_seq].op == "linear"
    leaves = [r for r in t.nodes if r.kind == "backward" and r.grad_fn == "AccumulateGrad"]
    assert [r.op for r in leaves] == ["AccumulateGrad"] * (3 if x_grad else 2)
    vjp_ops = [r for r in t.nodes if r.kind == "forward" and r.phase == "backward"]
    assert [(r.op, by_seq[r.forward_seq].op) for r in vjp_ops] == [
        ("expand", "sum"), ("threshold_backward", "relu"), ("linear_backward", "linear")]
