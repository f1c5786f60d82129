"""The declared Mode interface sees all the work of a training step, through hooks alone.

A Mode written here (as a user would write one) records every hook call during a real
step: compute, factory and random ops, in-place writes and copies, gradient
accumulation, module calls and host reads. The step's results must equal eager ones,
and the engine must find its interpreters through the declared hooks, never by probing.
"""
from __future__ import annotations

import contextlib
import pathlib
import re
import tracemalloc

import numpy as np
import pytest

import tapelab as T
import tapelab.nn as nn
import tapelab.nn.functional as F
from tapelab.dispatch import STATE, Mode, pop_mode, push_mode

ENGINE = pathlib.Path(__file__).resolve().parent.parent / "engine"


class Recorder(Mode):
    """Logs every hook call in order; ``route`` is its answer to ``accumulate``."""

    def __init__(self, route: bool = True):
        self.route = route
        self.log: list[tuple] = []

    def dispatch(self, op, args, params):
        self.log.append(("dispatch", op.name, op.kind, args))
        return super().dispatch(op, args, params)

    def write(self, target, src) -> None:
        self.log.append(("write", target, src))

    def copy(self, src, copy) -> None:
        self.log.append(("copy", src, copy))

    def accumulate(self, var, grad) -> bool:
        self.log.append(("accumulate", var, var.grad is None))
        return self.route

    def host_read(self, tensor, what: str) -> None:
        self.log.append(("host_read", tensor, what))

    def call_module(self, module, forward, args, kwargs):
        self.log.append(("call_module", type(module).__name__))
        return super().call_module(module, forward, args, kwargs)

    def calls(self, hook: str) -> list[tuple]:
        return [e for e in self.log if e[0] == hook]


def training_step(mode: Mode | None):
    """One step of a small MLP, with every kind of work a mode can see inside it."""
    T.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = T.randn(5, 8)
    scale = T.ones((), requires_grad=True)
    with mode if mode is not None else contextlib.nullcontext():
        noise = T.randn(5, 8) * 0.01                 # a random op
        bias = T.zeros(3)                             # a factory
        y = T.tensor([0, 2, 1, 1, 0])                 # a factory from data
        h = model(x + noise)
        h[:, 0].mul_(scale)                           # in place on a view (autograd keeps a copy)
        loss = F.cross_entropy(h + bias, y)
        loss.backward(retain_graph=True)
        loss.backward()                               # accumulates into the existing .grad
        opt.step()
        reads = (loss.item(), h.detach().numpy().copy(), repr(loss), bool(loss > 0), h[0].tolist(),
                 f"{loss:.4f}")
    params = [p.detach().numpy().copy() for p in model.parameters()]
    grads = [p.grad.numpy().copy() for p in model.parameters()] + [scale.grad.numpy().copy()]
    return model, scale, loss, h, reads, params, grads


@pytest.fixture(scope="module")
def eager_step():
    return training_step(None)


@pytest.mark.parametrize("route", [True, False], ids=["accumulate-dispatched", "accumulate-bookkeeping"])
def test_a_mode_changes_no_result(eager_step, route):
    *_, reads, params, grads = training_step(Recorder(route))
    *_, e_reads, e_params, e_grads = eager_step
    assert reads[0] == e_reads[0] and reads[2:] == e_reads[2:]
    np.testing.assert_array_equal(reads[1], e_reads[1])
    for a, b in zip(params + grads, e_params + e_grads):
        np.testing.assert_array_equal(a, b)
    assert not STATE.modes and not STATE.slow


def test_a_mode_sees_every_kind_of_work():
    mode = Recorder()
    model, scale, loss, h, _, _, _ = training_step(mode)
    ops = {(e[1], e[2]) for e in mode.calls("dispatch")}
    # compute ops of the forward, the backward and the optimizer
    assert {("linear", "compute"), ("relu", "compute"), ("cross_entropy", "compute"),
            ("cross_entropy_backward", "compute"), ("threshold_backward", "compute"), ("mul", "compute"),
            ("add", "compute")} <= ops, ops
    assert ("detach", "compute") in ops and ("slice", "compute") in ops       # views are dispatched too
    # factories (zeros, tensor(data), the backward seed) and the random draw, by name and kind
    assert {("full", "factory"), ("tensor", "factory"), ("randn", "random")} <= ops, ops
    assert all(kind in ("compute", "factory", "random") for _, kind in ops)
    seeds = [e for e in mode.calls("dispatch") if e[1] == "full" and e[3] == ()]
    assert len(seeds) >= 3                            # zeros(3) and one seed per backward

    params = list(model.parameters())
    # SGD writes every parameter in place; the in-place op on the view writes into h's memory
    written = [e[1] for e in mode.calls("write")]
    for p in params:
        assert any(t is p._data for t in written), "SGD's update of a parameter was not reported"
    assert any(np.shares_memory(t, h._data) for t in written)
    # the view's in-place op kept the pre-write value for autograd (a copy of h's memory)
    assert any(np.shares_memory(src, h._data) for _, src, _ in mode.calls("copy"))

    # each leaf's gradient is accumulated twice: first into no .grad, then into the existing one
    for leaf in params + [scale]:
        fresh = [e[2] for e in mode.calls("accumulate") if e[1] is leaf]
        assert fresh == [True, False], fresh
    # a mode answering True sees the update of an existing .grad as a dispatched add_ and a write
    for leaf in params:
        at = next(i for i, e in enumerate(mode.log) if e[0] == "accumulate" and e[1] is leaf and not e[2])
        after = mode.log[at + 1:at + 3]
        assert after[0][:2] == ("dispatch", "add") and after[0][3][0] is leaf.grad, after
        assert after[1][0] == "write" and after[1][1] is leaf.grad._data, after

    reads = [(e[1], e[2]) for e in mode.calls("host_read")]
    assert {w for _, w in reads} == {"item", "numpy", "print", "bool", "tolist"}
    for what in ("item", "print"):
        assert any(t is loss and w == what for t, w in reads), what
    assert sum(1 for t, w in reads if t is loss and w == "print") == 2        # repr and format, once each
    assert {e[1] for e in mode.calls("call_module")} == {"Sequential", "Linear", "ReLU"}


def test_a_mode_that_overrides_nothing_is_eager(eager_step):
    *_, reads, params, _ = training_step(Mode())
    np.testing.assert_array_equal(reads[1], eager_step[4][1])
    for a, b in zip(params, eager_step[5]):
        np.testing.assert_array_equal(a, b)


def test_dispatch_goes_to_the_innermost_mode_host_reads_to_every_mode():
    outer, inner = Recorder(), Recorder()
    x = T.ones(2)
    with outer:
        with inner:
            y = x + 1
            y.sum().item()
        assert STATE.modes == [outer]
        y.numpy()
    assert [e[1] for e in inner.calls("dispatch")] == ["add", "sum"]
    assert outer.calls("dispatch") == []
    assert [e[2] for e in inner.calls("host_read")] == ["item"]
    assert [e[2] for e in outer.calls("host_read")] == ["item", "numpy"]


def test_factories_take_device_and_dtype_from_params_and_meta_allocates_nothing():
    mode = Recorder()
    tracemalloc.start()
    try:
        with mode:
            m = T.zeros(1 << 20, 1 << 10, device="meta", dtype=T.float64)     # 8 GiB if it were real
            r = T.randn(1 << 20, 1 << 10, device="meta")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    e = T.empty(3, dtype=T.int32)
    assert peak < 1 << 20, peak                        # numpy reports its allocations to tracemalloc
    assert [(c[1], c[2], c[3]) for c in mode.calls("dispatch")] == [("full", "factory", ()), ("randn", "random", ())]
    assert m.device.type == "meta" and m.dtype == T.float64 and tuple(m.shape) == (1 << 20, 1 << 10)
    assert r.is_meta and r.dtype == T.float32 and tuple(r.shape) == (1 << 20, 1 << 10)
    assert e.device.type == "cpu" and e.dtype == T.int32 and tuple(e.shape) == (3,)


def test_a_random_op_draws_from_the_generator_in_its_params():
    g1, g2 = T.Generator().manual_seed(5), T.Generator().manual_seed(5)
    mode = Recorder()
    with mode:
        a = T.rand(4, generator=g1)
    b = T.rand(4, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    (_, name, kind, _), = mode.calls("dispatch")
    assert (name, kind) == ("rand", "random")


def test_leaving_a_mode_restores_state_when_the_body_raises():
    mode = Recorder()
    with pytest.raises(KeyError):
        with mode:
            assert STATE.modes[-1] is mode and STATE.slow
            raise KeyError("inside")
    assert STATE.modes == [] and not STATE.slow
    x = T.ones(2)
    x * 2
    assert mode.calls("dispatch") == []               # nothing reaches a mode after it left


def test_push_mode_takes_only_modes():
    with pytest.raises(TypeError, match="Mode"):
        push_mode(object())
    assert STATE.modes == [] and not STATE.slow
    m = Mode()
    push_mode(m)
    try:
        assert STATE.modes == [m] and STATE.slow
    finally:
        pop_mode(m)
    assert not STATE.slow


def test_no_getattr_probing_of_modes_in_the_engine():
    pattern = re.compile(r"getattr\((mode|STATE\.modes|_DISPATCH\.modes)\b")
    files = sorted(ENGINE.rglob("*.py"))
    assert len(files) > 50 and "dispatch.py" in {f.name for f in files}    # the scan reads the engine
    hits = [f"{f.relative_to(ENGINE)}:{i}" for f in files
            for i, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []
    # the probed optional hooks of before are gone by name too
    old = re.compile(r"\b(record_write|record_copy|record_accumulate|host_sync|random_op|_mode_hook)\b")
    assert [str(f.relative_to(ENGINE)) for f in files if old.search(f.read_text())] == []
