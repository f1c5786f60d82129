"""Session 35: the profiler's recorder is told ``op`` events by fields (``events.subscribe(...,
fields=True)``), so the dispatcher makes no ``OpRecorded`` per op for it, and it subscribes its four
handlers as one group (the dispatcher told once each way). Its events are the same as when an
``OpRecorded`` subscriber listens beside it; names, phases, modules and shapes are checked against
PyTorch's profiler and the tape."""
from __future__ import annotations

import numpy as np
import pytest
import torch as pt

import tapelab
from tapelab.base import events
from tapelab.core import dispatch
from tapelab.profiler import profile


@pytest.fixture
def made_events(monkeypatch):
    """How many ``OpRecorded`` objects the dispatcher makes."""
    made = []
    real = dispatch._OpRecorded

    def counting(*args):
        made.append(args[1])
        return real(*args)
    monkeypatch.setattr(dispatch, "_OpRecorded", counting)
    return made


def _mlp(lib):
    lib.manual_seed(0)
    net = lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.ReLU(), lib.nn.Linear(16, 3))
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((4, 8)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 3, 4))
    return net, lib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), x, y


def _step(lib, net, opt, x, y):
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    return loss


def _rows(prof) -> list:
    """What a profile recorded but its clocks: name, kind, phase, module, shapes, dtype, in order."""
    return [(e.name, e.kind, e.phase, e.module, e.input_shapes, e.shape, e.dtype) for e in prof.events()]


def test_profile_makes_no_event_object_per_op(made_events):
    net, opt, x, y = _mlp(tapelab)
    _step(tapelab, net, opt, x, y)
    with profile(record_shapes=True, with_modules=True) as alone:
        _step(tapelab, net, opt, x, y)
    assert made_events == []
    # beside a subscriber that takes event objects: those are made (the count works), the profile is the same
    seen = []
    with events.subscribe("op", seen.append):
        with profile(record_shapes=True, with_modules=True) as beside:
            _step(tapelab, net, opt, x, y)
    assert made_events and made_events == [ev.op for ev in seen]
    assert _rows(alone) == _rows(beside)
    ops = [r for r in _rows(alone) if r[1] == "op"]
    assert ops and any(r[2] == "backward" for r in ops) and any(r[2] == "forward" for r in ops)
    assert not dispatch.STATE.slow


def test_profile_tells_the_dispatcher_once_each_way(subscription_changes):
    x = tapelab.ones(3)
    with profile() as prof:
        assert len(subscription_changes) == 1 and dispatch.STATE.slow
        x * 2
    assert len(subscription_changes) == 2 and not dispatch.STATE.slow
    for kind in ("op", "backward_step", "collective", "made"):
        assert not events.has_subscribers(kind)
    assert [e.name for e in prof.events()] == ["aten::mul"]


def _names(prof_events, keep) -> list:
    return [e.name for e in prof_events if e.name in keep]


def test_in_place_forward_and_backward_names_as_torch():
    """An op written into its first operand is PyTorch's in-place op, a backward's ops are named as
    PyTorch's profiler names them, with their shapes (``record_shapes``)."""
    keep = {"aten::add_", "aten::add", "aten::mul_", "aten::mul", "aten::sum", "aten::relu"}
    results = {}
    for lib, prof_fn in ((tapelab, profile), (pt, pt.profiler.profile)):
        a = lib.ones(2, 3)
        b = lib.full((2, 3), 2.0, requires_grad=True)
        with prof_fn(record_shapes=True) as prof:
            a.add_(1.0)
            c = a.mul(b)
            c.mul_(3.0)
            lib.relu(c).sum().backward()
        evs = prof.events()
        results[lib.__name__] = (_names(evs, keep), b.grad.tolist(),
                                 sorted(tuple(map(tuple, e.input_shapes)) for e in evs if e.name == "aten::add_"))
    names, grad, shapes = results["tapelab"]
    t_names, t_grad, t_shapes = results["torch"]
    assert grad == t_grad == [[6.0] * 3] * 2
    assert names[:5] == t_names[:5] == ["aten::add_", "aten::mul", "aten::mul_", "aten::relu", "aten::sum"]
    assert shapes[0][:2] == t_shapes[0][:2] == ((2, 3), ())   # (PyTorch adds alpha as a third input)


def test_backward_ops_carry_their_forward_module_with_modules():
    net, opt, x, y = _mlp(tapelab)
    with profile(with_modules=True) as prof:
        with tapelab.tape() as tp:
            _step(tapelab, net, opt, x, y)
    evs = prof.events()
    fwd = [(e.name, e.module) for e in evs if e.kind == "op" and e.phase == "forward" and e.depth == 0]
    assert ("aten::linear", "0") in fwd and ("aten::relu", "1") in fwd and ("aten::linear", "2") in fwd
    bwd = {(e.name, e.module) for e in evs if e.kind == "backward"}
    assert ("ReluBackward0", "1") in bwd
    # the profile's ops are the tape's op records (by the dispatcher's seq), each in its phase
    taped = {n.seq: n.phase for n in tp.nodes if n.kind == "forward"}
    profiled = {e.seq: e.phase for e in evs if e.kind == "op" and e.seq >= 0}
    assert profiled == taped and "backward" in taped.values()
