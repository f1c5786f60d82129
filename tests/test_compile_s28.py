"""Issue 18, session 28: the compiled step calls MKL's GEMM for its plain float32 linear layers directly
(``compiler/plans.py``), with the arguments ``kernels.gemm``'s route would pass: the same floats as the
op's own forward and backward, bit for bit, at one and two threads; anything else runs the op's own."""
import importlib

import numpy as np
import pytest

import tapelab as T
from tapelab.compiler import cpu, plans
from tapelab.core.registry import REGISTRY
from tapelab.kernels import blas

pytestmark = pytest.mark.skipif(not (cpu.numba_available() and blas.available()),
                                reason="the planned calls are MKL's GEMM (the [mkl] extra and numba)")

_gemm = importlib.import_module("tapelab.kernels.gemm")
LINEAR, BACKWARD = REGISTRY["linear"], REGISTRY["linear_backward"]


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    T.set_num_threads(request.param)
    return request.param


def _fell_back(*_, **__):
    pytest.fail("the plain case ran the op's own forward")


def _arrays(rng, x_shape, out_features):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((out_features, x_shape[-1])).astype(np.float32)
    b = rng.standard_normal(out_features).astype(np.float32)
    g = rng.standard_normal(x_shape[:-1] + (out_features,)).astype(np.float32)
    return x, w, b, g


# (input shape, out features): MKL takes each product (at least MKL_MIN multiply-adds), 2-D and 3-D inputs
PLAIN = [((64, 784), 512), ((64, 512), 512), ((8, 64, 128), 384), ((2048, 128), 10)]


@pytest.mark.parametrize("x_shape,out_features", PLAIN)
def test_plain_linear_is_the_ops_floats_without_its_route(threads, x_shape, out_features):
    """Forward and backward (every ``needs`` with the weight's gradient) equal the op's own bit for bit,
    and the op's own never runs for them."""
    rng = np.random.default_rng(0)
    x, w, b, g = _arrays(rng, x_shape, out_features)
    assert x.size * out_features >= _gemm.MKL_MIN
    np.testing.assert_array_equal(plans.linear(_fell_back)(np, x, w, b), LINEAR.fwd(np, x, w, b))
    for needs in [(True, True, True), (False, True, True), (True, True, False)]:
        got = plans.linear_backward(_fell_back)(np, g, x, w, needs=needs)
        want = BACKWARD.fwd(np, g, x, w, needs=needs)
        for a, e in zip(got, want):
            assert a.shape == e.shape
            np.testing.assert_array_equal(a, e)


# case -> (the forward runs the op's own, the backward runs the op's own)
OTHERS = {"small": (False, False), "no_bias": (True, False), "float64": (True, True), "transposed_weight": (True, True),
          "frozen_weight": (False, True), "unit_rows": (True, True)}


@pytest.fixture
def one_thread():
    T.set_num_threads(1)


@pytest.mark.parametrize("case", sorted(OTHERS))
def test_other_cases_run_the_ops_own(one_thread, case):
    """What the plans do not take (no bias, float64, a weight not C-contiguous, no weight gradient, one row)
    reaches the op's declared forward, with its floats; products too small for MKL go to ``gemm._small``
    themselves (session 34), the op's floats without its route. (One thread: on two, MKL's two-thread
    product of one row, 1x512 @ 512x4096, rounds differently from call to call.)"""
    rng = np.random.default_rng(1)
    x, w, b, g = _arrays(rng, {"small": (64, 32), "unit_rows": (1, 4096)}.get(case, (64, 512)),
                         32 if case == "small" else 512)
    needs = (True, False, True) if case == "frozen_weight" else (True, True, True)
    if case == "float64":
        x, w, b, g = (a.astype(np.float64) for a in (x, w, b, g))
    if case == "transposed_weight":
        w = np.asfortranarray(w)
    calls = []

    def own(op):
        def fwd(xp, *args, **kw):
            calls.append(op.name)
            return op.fwd(xp, *args, **kw)
        return fwd
    args = (x, w) if case == "no_bias" else (x, w, b)
    np.testing.assert_array_equal(plans.linear(own(LINEAR))(np, *args), LINEAR.fwd(np, *args))
    got = plans.linear_backward(own(BACKWARD))(np, g, x, w, needs=needs)
    for a, e in zip(got, BACKWARD.fwd(np, g, x, w, needs=needs)):
        np.testing.assert_array_equal(a, e)
    fwd_own, bwd_own = OTHERS[case]
    assert calls == ["linear"] * fwd_own + ["linear_backward"] * bwd_own


def test_compiled_mlp_step_equals_eager_and_torch(threads):
    """A 784-512-512-10 MLP's compiled training step (its two large layers planned): loss and every
    gradient equal eager tapelab's bit for bit, and torch's within float32 rounding."""
    import torch
    rng = np.random.default_rng(2)
    T.manual_seed(0)
    net = T.nn.Sequential(T.nn.Linear(784, 512), T.nn.ReLU(), T.nn.Linear(512, 512), T.nn.ReLU(),
                          T.nn.Linear(512, 10))
    x = rng.standard_normal((64, 784)).astype(np.float32)
    y = rng.integers(0, 10, 64)

    def loss_of(model):
        return T.nn.functional.cross_entropy(model(T.tensor(x)), T.tensor(y))
    compiled = T.compile(net)
    sources = []
    for model in (net, compiled, compiled, compiled):
        net.zero_grad(set_to_none=True)
        loss = loss_of(model)
        loss.backward()
        sources.append((loss.item(), [p.grad.numpy().copy() for p in net.parameters()]))
    for loss, grads in sources[1:]:
        assert loss == sources[0][0]
        for a, e in zip(grads, sources[0][1]):
            np.testing.assert_array_equal(a, e)
    tnet = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10))
    with torch.no_grad():
        for tp, p in zip(tnet.parameters(), net.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    tl = torch.nn.functional.cross_entropy(tnet(torch.from_numpy(x)), torch.from_numpy(y))
    tl.backward()
    np.testing.assert_allclose(sources[-1][0], tl.item(), rtol=1e-5)
    for a, tp in zip(sources[-1][1], tnet.parameters()):
        np.testing.assert_allclose(a, tp.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_the_generated_step_calls_the_plans():
    """The one-node step's generated forward and backward hold the planned calls for linear's ops."""
    from tapelab.compiler import step as S
    assert S.planned(LINEAR).__name__ == "planned_linear"
    assert S.planned(BACKWARD).__name__ == "planned_linear_backward"
    assert S.planned(REGISTRY["relu"]) is REGISTRY["relu"].fwd


class _Net(T.nn.Module):
    """relu(lin1(x)) feeds lin2; lin2's output is read by a relu and by the sum (no epilogue there: that
    relu joins the fused elementwise kernel)."""

    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = T.nn.Linear(256, 512), T.nn.Linear(512, 512)

    def forward(self, x):
        h = self.lin2(T.relu(self.lin1(x)))
        return (T.relu(h) * 2 + h).square().mean()


def _runs(x_shape, compiled_too: bool) -> tuple:
    """Loss, input and parameter gradients of ``_Net`` eagerly and (``compiled_too``) in three compiled
    steps; and the compiled call's cache entry."""
    T.manual_seed(0)
    net = _Net()
    x = T.tensor(np.random.default_rng(3).standard_normal(x_shape).astype(np.float32), requires_grad=True)
    compiled = T.compile(net)
    got = []
    for model in (net, compiled, compiled, compiled)[:4 if compiled_too else 1]:
        net.zero_grad(set_to_none=True)
        x.grad = None
        loss = model(x)
        loss.backward()
        got.append([loss.detach().numpy().copy(), x.grad.numpy().copy()]
                   + [p.grad.numpy().copy() for p in net.parameters()])
    return got, (next(iter(compiled._compiled.cache.values())) if compiled_too else None)


@pytest.mark.parametrize("x_shape", [(32, 256), (4, 16, 256), (3, 256)], ids=["rows", "batched", "small"])
def test_linear_relu_epilogue_equals_the_two_ops(monkeypatch, threads, x_shape):
    """A linear read only by a relu is one call (the relu in place in the linear's output); one read
    by something else too keeps both ops. Each call's loss and gradients equal those of the same call of
    the step generated without the plans bit for bit (the first call is the traced eager run; from the
    second the fused loss kernel's sum may round apart from eager's: within 1e-6 of it)."""
    from tapelab.compiler import step as S
    eager_run, entry = _runs(x_shape, True)
    eager, runs = eager_run[0], eager_run[1:]
    forward = entry.step.sources[0]
    assert forward.count("(np, ") == 2, forward       # lin1 and its relu one call; lin2
    gen = entry.step.fwd_fn.fn
    names = {getattr(v, "__name__", "") for cell in (gen.__closure__ or ()) if callable(cell.cell_contents)
             for v in cell.cell_contents.__globals__.values()}
    assert {"planned_linear_relu", "planned_linear"} <= names, names
    monkeypatch.setattr(S, "epilogues", lambda *a: {})
    monkeypatch.setattr(S, "planned", lambda op: op.fwd)
    plain_run, plain_entry = _runs(x_shape, True)
    assert plain_entry.step.sources[0].count("(np, ") == 3
    for run, plain in zip(runs, plain_run[1:]):
        for a, p, e in zip(run, plain, eager):
            np.testing.assert_array_equal(a, p)
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)
