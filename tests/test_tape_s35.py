"""Session 35: a lazy tape's op record starts its source walk above the dispatcher's frame (its
handler is told by ``_tell`` directly); a tape whose sink overrides ``record_op`` finds that frame by
its search. Both give the user's line, for forward ops, told optimizer writes and ops under
modules, and the same records; the recorded step's values are PyTorch's."""
from __future__ import annotations

import numpy as np
import torch as pt

import tapelab


class _Sink(tapelab.tape):
    """A sink outside tapelab that overrides the op handler (as the notebook's LiveTape does)."""

    def record_op(self, ev):
        return super().record_op(ev)


def _step(lib, net, opt, x, y):
    opt.zero_grad()
    out = net(x)                                          # line: model
    loss = lib.nn.functional.cross_entropy(out, y)        # line: loss
    loss.backward()
    opt.step()                                            # line: update
    return loss


def _setup(lib):
    lib.manual_seed(0)
    net = lib.nn.Sequential(lib.nn.Linear(6, 5), lib.nn.ReLU(), lib.nn.Linear(5, 3))
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 3, 4))
    return net, lib.optim.SGD(net.parameters(), lr=0.1), x, y


def _record(cls):
    net, opt, x, y = _setup(tapelab)
    with cls() as tp:
        loss = _step(tapelab, net, opt, x, y)
    return tp, loss, net


def _fields(tp) -> list:
    return [(n.kind, n.op, n.phase, n.input_shapes, n.shape, n.module, n.source) for n in tp.nodes]


def test_lazy_and_overriding_sinks_give_the_users_lines():
    lazy, loss, net = _record(tapelab.tape)
    sink, loss2, _ = _record(_Sink)
    assert lazy._lazy and not sink._lazy
    assert _fields(lazy) == _fields(sink)
    fwd = [n for n in lazy.nodes if n.kind == "forward" and n.phase == "forward"]
    by_op = {}
    for n in fwd:
        by_op.setdefault(n.op, set()).add(n.source.split("#")[-1].strip())
    assert by_op["linear"] == by_op["relu"] == {"line: model"}
    assert by_op["cross_entropy"] == {"line: loss"}
    writes = [n for n in fwd if n.op not in ("linear", "relu", "cross_entropy")]
    assert writes and {n.source.split("#")[-1].strip() for n in writes} == {"line: update"}
    assert all(n.source.startswith("test_tape_s35.py:") for n in fwd)
    assert all(n.source == "" for n in lazy.nodes if n.phase == "backward")
    # the recorded step is PyTorch's (from the same initial parameters; float32 sums: to rounding)
    net0, _, x0, y0 = _setup(tapelab)
    tnet, _, _, _ = _setup(pt)
    with pt.no_grad():
        for p, q in zip(tnet.parameters(), net0.parameters()):
            p.copy_(pt.tensor(q.detach().numpy()))
    tloss = _step(pt, tnet, pt.optim.SGD(tnet.parameters(), lr=0.1), pt.tensor(x0.numpy()), pt.tensor(y0.numpy()))
    assert float(loss.detach()) == float(loss2.detach())
    np.testing.assert_allclose(float(loss.detach()), float(tloss.detach()), rtol=1e-6)
    for p, q in zip(net.parameters(), tnet.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7)


def test_an_op_event_told_outside_the_dispatcher_keeps_a_source():
    """A handler called without the dispatcher above it (a subscriber replaying events) finds no
    dispatcher frame: the walk starts at its caller, as before."""
    from tapelab.base import events
    with tapelab.tape() as tp:
        ev = events.OpRecorded(10**9, "mul", (1, 2), ((2,), (2,)), 3, (2,), "float32", "cpu", False, 1, 2)
        for fn in list(events._subscribers["op"]):
            fn(events.op_fields(ev), ev.tensors)
    (rec,) = tp.nodes
    assert rec.op == "mul" and rec.seq == 10**9 and rec.source.startswith("test_tape_s35.py:")
