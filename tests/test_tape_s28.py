"""Session 28: the watched paths the tape and ``%tape on`` take, kept cheap without changing what
they record. SGD's array update under a tape tells each write as the Tensor path's ``add_``."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import optim
from tapelab.core.dispatch import Mode
from tapelab.tape import tensor_id

SHAPES = [(5, 4), (4,), (3,)]


def _params(lib, seed=1):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in SHAPES]


def _grads(lib, params, step):
    rng = np.random.default_rng(10 + step)
    for i, p in enumerate(params):
        g = rng.standard_normal(p.shape).astype(np.float32)
        p.grad = None if (step == 1 and i == 1) else lib.tensor(g)   # a parameter without a gradient


def _facts(rec):
    return (rec.kind, rec.op, rec.phase, rec.module, rec.input_shapes, rec.shape, rec.output_shapes, rec.dtype,
            rec.device, rec.requires_grad, rec.grad_fn, rec.seq is not None, rec.forward_seq, rec.source.split("  ")[-1])


def _taped_steps(params, **kw):
    """Three SGD steps, each inside a tape: the tapes, and each record's operands named (parameter i,
    its gradient, its momentum buffer, a number)."""
    opt = optim.SGD(params, lr=0.1, **kw)
    tapes, named = [], []
    for step in range(3):
        _grads(tapelab, params, step)
        names = {}
        for i, p in enumerate(params):
            names[tensor_id(p)] = f"p{i}"
            if p.grad is not None:
                names[tensor_id(p.grad)] = f"g{i}"
            buf = opt.state[p].get("momentum_buffer") if p in opt.state else None
            if buf is not None:
                names[tensor_id(buf)] = f"b{i}"
        with tapelab.tape() as t:
            opt.step()
        tapes.append(t)
        named.append([tuple(names.get(u, "?") if u is not None else None for u in r.inputs) for r in t.nodes])
        assert all(r.output not in r.inputs for r in t.nodes)       # a fresh output id, as the Tensor op's
        assert len({r.seq for r in t.nodes}) == len(t.nodes)
    return tapes, named


@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3)])
def test_sgd_under_a_tape_records_each_update_as_the_tensor_path_does(kw):
    """foreach=None (the array update, told) against foreach=False (each in-place op dispatched): the
    same records and operands, and the same floats as PyTorch's SGD."""
    fast, slow = _params(tapelab), _params(tapelab)
    ft, fnamed = _taped_steps(fast, **kw)
    st, snamed = _taped_steps(slow, foreach=False, **kw)
    assert fnamed == snamed
    for a, b in zip(ft, st):
        assert [_facts(r) for r in a.nodes] == [_facts(r) for r in b.nodes]
        assert {r.module for r in a.nodes} == {"optimizer.step (SGD)"}
    if kw:   # after the first step (the buffers made): buf.mul_, buf.add_(grad), p.add_(buf) a parameter
        assert [r.op for r in ft[-1].nodes] == ["mul", "add", "add"] * 3
        assert fnamed[-1][:3] == [("b0", None), ("b0", "g0"), ("p0", "b0")]
    else:
        assert fnamed[0] == [("p0", "g0"), ("p1", "g1"), ("p2", "g2")] and fnamed[1] == [("p0", "g0"), ("p2", "g2")]
    hp = _params(torch)
    hopt = torch.optim.SGD(hp, lr=0.1, **kw)
    for step in range(3):
        _grads(torch, hp, step)
        hopt.step()
    for f, s, h in zip(fast, slow, hp):
        np.testing.assert_array_equal(f.detach().numpy(), h.detach().numpy())
        np.testing.assert_array_equal(s.detach().numpy(), h.detach().numpy())
        assert f._version == s._version


class _Inplace(Mode):
    def __init__(self):
        self.names = []

    def inplace(self, op, target, args, params):
        self.names.append(op.name)
        return None


def test_sgd_under_a_mode_dispatches_each_update():
    """A mode sees the Tensor path's in-place ops: the told array update is only for ``op`` subscribers."""
    params = _params(tapelab)
    opt = optim.SGD(params, lr=0.1)
    _grads(tapelab, params, 0)
    with _Inplace() as m:
        opt.step()
    assert m.names == ["add"] * len(params)


@pytest.mark.parametrize("kw", [dict(weight_decay=0.1), dict(maximize=True), dict(momentum=0.9, nesterov=True)])
def test_sgd_whose_update_makes_tensors_is_dispatched_under_a_tape(kw):
    """Weight decay, ``maximize`` and Nesterov make new tensors (``grad.add(p)``, ``-grad``): dispatched,
    recorded each."""
    fast, slow = _params(tapelab), _params(tapelab)
    for step in range(2):
        ft, _ = _taped_steps(fast, **kw)
        st, _ = _taped_steps(slow, foreach=False, **kw)
    assert [_facts(r) for r in ft[-1].nodes] == [_facts(r) for r in st[-1].nodes]
    assert len(ft[-1].nodes) > len(SHAPES)


# ------------------------------------------------------------------ the backward_pass event
from tapelab import events, nn  # noqa: E402
from tapelab.widgets.live import LiveTape  # noqa: E402


def _counted(run):
    """(backward_step events, backward_pass steps) of ``run()``, each heard alone and both together."""
    steps, passes = [], []
    with events.subscribe("backward_pass", lambda ev: passes.append(ev.steps)):
        run()
        with events.subscribe("backward_step", steps.append):
            run()
    return len(steps), passes


@pytest.mark.parametrize("how", ["backward", "one node", "inputs", "grad", "backward_steps"])
def test_a_pass_counts_the_nodes_its_steps_name(how):
    w = tapelab.ones(3, requires_grad=True)
    b = tapelab.ones(3, requires_grad=True)

    def run():
        loss = w.sum() if how == "one node" else ((w * 2 + b).relu() * w).sum()
        if how == "inputs":
            loss.backward(inputs=[w])
        elif how == "grad":
            tapelab.autograd.grad(loss, [w])
        elif how == "backward_steps":
            list(tapelab.autograd.backward_steps(loss))
        else:
            loss.backward()
    n, passes = _counted(run)
    assert n > 0 and passes == [n, n]


def _loop(model, opt, x, target, n, two_passes=False, live=None, seen=None):
    for _ in range(n):
        opt.zero_grad()
        out = model(x)
        if seen is not None:   # before the backward: is this step deaf, and who listens to its walk
            seen.append((live._deaf, events.has_subscribers("backward_step")))
        if two_passes:   # two backward passes a step (gradients accumulated twice): the step ends after both
            loss = nn.functional.cross_entropy(out, target)
            loss.backward(retain_graph=True)
            loss.backward()
        else:
            nn.functional.cross_entropy(out, target).backward()
        opt.step()


@pytest.mark.parametrize("two_passes", [False, True])
def test_deaf_steps_hear_only_passes_and_count_as_heard_ones(monkeypatch, two_passes):
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, target = tapelab.ones(5, 4), tapelab.tensor([0, 1, 0, 1, 1])
    live = LiveTape(sinks=[], rate=1e9)
    monkeypatch.setattr(live, "_record_next", lambda now, cpu: False)   # after the first steps: counted
    seen = []
    with live:
        _loop(model, opt, x, target, 10, two_passes, live, seen)
    assert seen[-1] == (True, False) and sum(d for d, _ in seen) >= 5    # deaf steps: no backward_step listener
    assert all(heard != deaf for deaf, heard in seen)
    assert not events.has_subscribers("backward_pass")
    with tapelab.tape() as plain:
        _loop(model, opt, x, target, 1, two_passes)
    fwd = sum(r.kind == "forward" and r.phase == "forward" for r in plain)
    bwd = sum(r.kind == "backward" for r in plain)
    b = live.builder
    assert b.steps == 10 and (b.forward, b.backward) == (10 * fwd, 10 * bwd)
