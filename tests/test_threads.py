"""Dispatch state is per thread, as PyTorch's is (issue 16, defect 1).

Grad and inference mode, the mode stack, module scope names, tapes, the profiler and graph
capture belong to the thread that set them; a new thread starts from the defaults. Threads
are driven in lock step by barriers (some inside a forward, through module hooks), so their
work interleaves at known points instead of by the scheduler's chance.
"""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import torch

import tapelab as T
import tapelab.nn as nn
from tapelab import profiler
from tapelab.dispatch import STATE, Mode
from tapelab.graphs import Graph, graph

TIMEOUT = 30


def run_threads(*fns):
    """Run each ``fn`` in its own thread; re-raise the first exception any of them raised."""
    errors: list = []

    def wrap(fn):
        def target():
            try:
                fn()
            except BaseException as e:   # noqa: BLE001 - reported to the test thread
                errors.append(e)
        return target

    threads = [threading.Thread(target=wrap(fn)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), "a thread hung (a barrier was never reached)"
    if errors:
        raise errors[0]


def make_model(seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    with T.no_grad():
        for p in model.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return model


def data(seed: int, steps: int):
    rng = np.random.default_rng(100 + seed)
    return [(T.tensor(rng.standard_normal((5, 4)).astype(np.float32)),
             T.tensor(rng.standard_normal((5, 1)).astype(np.float32))) for _ in range(steps)]


def hook(fn):
    """A module hook that calls ``fn()`` and leaves the module's input and output as they are."""
    def h(*args):
        fn()
    return h


def train(model, batches, sync=None, no_grad_every: int = 0):
    """SGD on ``batches``; ``sync()`` is called between the phases of each step (and, through a
    forward hook, in the middle of the forward). Returns the losses."""
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    handle = model[0].register_forward_hook(hook(sync)) if sync else None
    losses = []
    for i, (x, y) in enumerate(batches):
        loss = ((model(x) - y) ** 2).mean()
        assert loss.requires_grad, "grad mode was switched off by another thread"
        if sync:
            sync()
        opt.zero_grad()
        loss.backward()
        assert all(p.grad is not None for p in model.parameters())
        if sync:
            sync()
        opt.step()
        losses.append(loss.item())
        if no_grad_every and i % no_grad_every == 0:
            with T.no_grad():
                assert not model(x).requires_grad
            assert T.is_grad_enabled()
    if handle is not None:
        handle.remove()
    return losses


def params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


# ---------------------------------------------------------------- grad mode
def test_two_threads_training_equal_running_them_one_after_the_other():
    steps = 40
    batches = [data(0, steps), data(1, steps)]
    ref = [make_model(0), make_model(1)]
    ref_losses = [train(ref[0], batches[0], no_grad_every=3), train(ref[1], batches[1], no_grad_every=3)]

    models = [make_model(0), make_model(1)]
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    losses: list = [None, None]

    def worker(i, every):
        def fn():
            losses[i] = train(models[i], batches[i], sync=barrier.wait, no_grad_every=every)
        return fn

    run_threads(worker(0, 3), worker(1, 3))   # the same barrier count per step
    assert losses == ref_losses
    for m, r in zip(models, ref):
        for a, b in zip(params(m), params(r)):
            np.testing.assert_array_equal(a, b)


def test_no_grad_evaluation_thread_does_not_break_a_training_thread():
    steps = 25
    batches = data(2, steps)
    ref = make_model(2)
    ref_losses = train(ref, batches)
    model, evaluated = make_model(2), make_model(3)
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    outside: list = []

    def trainer():
        # two waits per step: the evaluator enters no_grad at the first (mid-forward), leaves at the second
        waits = iter(range(10 ** 9))
        train(model, batches, sync=lambda: barrier.wait() if next(waits) % 3 != 2 else None)

    def evaluator():
        x = T.ones(2, 4)
        for _ in range(steps):
            with T.no_grad():
                barrier.wait()
                assert not evaluated(x).requires_grad
                barrier.wait()
            outside.append(evaluated(x).requires_grad)

    run_threads(trainer, evaluator)
    assert outside == [True] * steps
    for a, b in zip(params(model), params(ref)):
        np.testing.assert_array_equal(a, b)


def test_overlapping_no_grad_exits_leave_grad_on_in_both_threads():
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    seen: dict = {}

    def first():
        with T.no_grad():
            barrier.wait()          # 1: both inside
            barrier.wait()          # 2
        seen["first"] = T.is_grad_enabled()   # left first, while the other is still inside
        barrier.wait()              # 3
        barrier.wait()              # 4: the other has left
        seen["first, later"] = T.is_grad_enabled()

    def second():
        barrier.wait()              # 1
        with T.no_grad():
            barrier.wait()          # 2
            barrier.wait()          # 3
            seen["second, inside"] = T.is_grad_enabled()
        barrier.wait()              # 4
        seen["second"] = T.is_grad_enabled()

    # ``first`` enters before ``second`` enters and leaves before ``second`` leaves
    run_threads(first, second)
    assert seen == {"first": True, "first, later": True, "second, inside": False, "second": True}
    assert T.is_grad_enabled()


def _modes_in_new_thread(lib) -> dict:
    """What a thread started inside no_grad / inference_mode / set_grad_enabled(False) sees."""
    out = {}

    def probe(key):
        t = threading.Thread(target=lambda: out.__setitem__(
            key, (lib.is_grad_enabled(), lib.is_inference_mode_enabled())))
        t.start()
        t.join(TIMEOUT)

    with lib.no_grad():
        probe("no_grad")
    with lib.inference_mode():
        probe("inference_mode")
    prev = lib.is_grad_enabled()
    lib.set_grad_enabled(False)
    try:
        probe("set_grad_enabled(False)")
    finally:
        lib.set_grad_enabled(prev)
    return out


def test_a_new_thread_starts_with_grad_enabled_as_in_pytorch():
    ours, theirs = _modes_in_new_thread(T), _modes_in_new_thread(torch)
    assert ours == theirs == dict.fromkeys(["no_grad", "inference_mode", "set_grad_enabled(False)"],
                                           (True, False))
    x = T.ones(2, requires_grad=True)
    made: list = []
    with T.no_grad():
        t = threading.Thread(target=lambda: made.append((x * 2).requires_grad))
        t.start()
        t.join(TIMEOUT)
        assert not (x * 2).requires_grad
    assert made == [True]


def test_anomaly_mode_is_process_wide_as_in_pytorch():
    out = {}

    def probe(is_enabled, key):
        t = threading.Thread(target=lambda: out.__setitem__(key, is_enabled()))
        t.start()
        t.join(TIMEOUT)

    with pytest.warns(UserWarning):
        with torch.autograd.detect_anomaly():
            probe(torch.is_anomaly_enabled, "torch")
    with T.autograd.detect_anomaly():
        probe(T.autograd.is_anomaly_enabled, "tapelab")
    assert out == {"torch": True, "tapelab": True}
    assert not T.autograd.is_anomaly_enabled() and not STATE.slow


# ---------------------------------------------------------------- tapes, modes, scopes
def test_a_tape_records_only_its_own_threads_ops():
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    tapes: dict = {}

    def worker(name, op):
        def fn():
            x = T.ones(3, requires_grad=True)
            with T.tape() as t:
                barrier.wait()
                for _ in range(5):
                    y = op(x)
                    barrier.wait()     # the other thread runs its op now, while this tape records
                y.sum().backward()
                barrier.wait()
            tapes[name] = t
        return fn

    run_threads(worker("sin", T.sin), worker("cos", T.cos))
    assert [n.op for n in tapes["sin"] if n.phase == "forward"] == ["sin"] * 5 + ["sum"]
    assert [n.op for n in tapes["cos"] if n.phase == "forward"] == ["cos"] * 5 + ["sum"]
    assert "CosBackward0" not in {n.op for n in tapes["sin"]}
    assert "SinBackward0" in {n.op for n in tapes["sin"]}
    assert "SinBackward0" not in {n.op for n in tapes["cos"]}


def test_a_tape_does_not_see_an_untaped_threads_ops():
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    other_grad: list = []

    def taped():
        with T.tape() as t:
            barrier.wait()
            barrier.wait()
            T.ones(2).exp()
        assert [n.op for n in t] == ["exp"]

    def untaped():
        barrier.wait()
        x = T.ones(2, requires_grad=True)
        (x.tanh() * 3).sum().backward()
        other_grad.append(x.grad.numpy().copy())
        barrier.wait()

    run_threads(taped, untaped)
    np.testing.assert_allclose(other_grad[0], 3 * (1 - np.tanh(1.0) ** 2), rtol=1e-6)


class Names(Mode):
    def __init__(self):
        self.names: list = []

    def dispatch(self, op, args, params):
        self.names.append(op.name)
        return super().dispatch(op, args, params)


def test_a_mode_sees_only_its_own_threads_ops():
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    seen: dict = {}

    def with_mode():
        x = T.ones(2)
        with Names() as m:
            barrier.wait()
            barrier.wait()
            x.neg()
        seen["mode"] = m.names
        seen["mode thread modes after"] = list(STATE.modes)

    def without_mode():
        barrier.wait()
        seen["other modes"] = list(STATE.modes)
        x = T.ones(2, requires_grad=True)
        x.exp().sum().backward()
        seen["other grad"] = x.grad.numpy().tolist()
        barrier.wait()

    run_threads(with_mode, without_mode)
    assert seen["mode"] == ["neg"]
    assert seen["other modes"] == [] and seen["mode thread modes after"] == []
    np.testing.assert_allclose(seen["other grad"], [np.e, np.e], rtol=1e-6)
    assert not STATE.slow and STATE.watching == 0


def test_a_thread_that_ends_inside_a_mode_stops_slowing_dispatch():
    def leave_mode_entered():
        Names().__enter__()
        assert STATE.slow and STATE.watching == 1

    run_threads(leave_mode_entered)
    gc.collect()
    assert STATE.watching == 0 and not STATE.slow


class Pair(nn.Module):
    def __init__(self, first: str, second: str):
        super().__init__()
        setattr(self, first, nn.Linear(2, 2))
        setattr(self, second, nn.Linear(2, 2))
        self.order = (first, second)

    def forward(self, x):
        return getattr(self, self.order[1])(getattr(self, self.order[0])(x).tanh())


def test_module_scope_names_do_not_leak_between_threads():
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    tapes: dict = {}

    def worker(first, second):
        model = Pair(first, second)
        for m in (getattr(model, first), getattr(model, second)):
            m.register_forward_pre_hook(hook(barrier.wait))   # both threads inside a scope
            m.register_forward_hook(hook(barrier.wait))

        def fn():
            with T.tape() as t:
                model(T.ones(3, 2)).sum()
            tapes[first] = {n.module for n in t if n.kind == "forward"}
        return fn

    run_threads(worker("encoder", "head"), worker("left", "right"))
    assert tapes["encoder"] <= {"", "encoder", "head"} and {"encoder", "head"} <= tapes["encoder"]
    assert tapes["left"] <= {"", "left", "right"} and {"left", "right"} <= tapes["left"]
    assert STATE.module_path == []


# ---------------------------------------------------------------- profiler, capture
def test_the_profiler_records_only_its_own_thread_as_pytorchs_does():
    def run(lib, prof_ctx, names):
        barrier = threading.Barrier(2, timeout=TIMEOUT)
        found: dict = {}

        def profiled():
            with prof_ctx() as prof:
                barrier.wait()
                barrier.wait()
                lib.sin(lib.ones(2))
            found["names"] = {e.name for e in prof.events()}

        def other():
            barrier.wait()
            x = lib.ones(2, requires_grad=True)
            lib.cos(x).sum().backward()
            barrier.wait()

        run_threads(profiled, other)
        return {n for n in names if n in found["names"]}

    names = {"aten::sin", "aten::cos", "aten::ones", "CosBackward0", "torch::autograd::AccumulateGrad"}
    theirs = run(torch, torch.profiler.profile, names)
    ours = run(T, profiler.profile, names)
    assert theirs == ours == {"aten::sin", "aten::ones"}


def test_a_capture_does_not_see_another_threads_ops():
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    seen: dict = {}
    x = T.zeros(3)

    def capturing():
        g = Graph()
        with graph(g):
            seen["capturing"] = T.graphs.is_current_stream_capturing()
            barrier.wait()
            barrier.wait()
            out = x * 2 + 1
        seen["graph"], seen["out"] = g, out

    def other():
        barrier.wait()
        seen["other capturing"] = T.graphs.is_current_stream_capturing()
        y = T.arange(3.0)
        seen["other"] = (y * 5).tolist()     # a host read: capture would refuse it
        barrier.wait()

    run_threads(capturing, other)
    assert seen["capturing"] and not seen["other capturing"]
    assert seen["other"] == [0.0, 5.0, 10.0]
    g, out = seen["graph"], seen["out"]
    assert {n["op"] for n in g.summary()["nodes"]} <= {"mul", "add", "copy"}
    assert {"mul", "add"} <= {n["op"] for n in g.summary()["nodes"]}
    x.copy_(T.tensor([1.0, 2.0, 3.0]))
    g.replay()
    assert out.tolist() == [3.0, 5.0, 7.0]


def test_one_threads_backward_pass_does_not_hide_anothers_forward_anomaly():
    """Anomaly detection is on for the process (above), but "a node's backward is running" is
    per thread: while thread A is inside a backward node, thread B's log(-1) still warns."""
    barrier = threading.Barrier(2, timeout=TIMEOUT)

    class Wait(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            barrier.wait()          # A is inside a backward node ...
            barrier.wait()          # ... until B made its NaN
            return g

    def backward_thread():
        x = T.ones(2, requires_grad=True)
        Wait.apply(x).sum().backward()

    def forward_thread():
        barrier.wait()
        T.log(T.tensor([-1.0]))
        barrier.wait()

    with pytest.warns(UserWarning, match="Anomaly Detection"), T.autograd.detect_anomaly():
        with pytest.warns(T.autograd.AnomalyWarning, match="log produced NaN"):
            run_threads(backward_thread, forward_thread)
    assert T.autograd.anomaly.STATE.backward_depth == 0


def test_a_thread_that_ends_with_grad_off_leaves_grad_on_for_the_next():
    """Thread idents are reused once a thread ends: the ident of one that ended with grad off by
    assignment leaves the disabled set, or the next thread given it would start with grad off."""
    from tapelab.base.grad_mode import GRAD_OFF

    seen: list = []
    for _ in range(3):
        t = threading.Thread(target=lambda: (seen.append(T.is_grad_enabled()), T.set_grad_enabled(False)))
        t.start()
        t.join(TIMEOUT)
    assert seen == [True, True, True]
    assert not GRAD_OFF and T.is_grad_enabled()
