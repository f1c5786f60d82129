"""Cross-entropy's gradient is PyTorch's bit for bit on float32 (N, C) logits: ATen takes nll_loss's backward
and then log_softmax's (``u - exp(logp) sum(u)``, Sleef's exp of the forward's log-probabilities), and so do
the fused loops, with the rows' log-sum-exps kept from the forward (``cross_entropy_forward``) or recomputed
where the one-op form runs (a watcher, create_graph). Also: the pointwise loops read a dense array in
``parallel_for``'s chunks, so sigmoid, silu and gelu give torch's floats at two threads too."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")   # the exact loops exist only with numba (the [jit] extra)
torch = pytest.importorskip("torch")

from _threads import loops_at_one_thread, thread_counts  # noqa: E402
import tapelab as tl  # noqa: E402

_one_thread = loops_at_one_thread()
threads = thread_counts([1, 2])


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), int((a.view(np.uint32) != b.view(np.uint32)).sum())


def _ce(lib, x, t, *, weight=None, watch=False, **kw):
    """The loss and the logits' gradient (per-sample losses back-propagated with varied weights); with
    ``watch`` under a tape, so the one-op form runs."""
    def run():
        xt = lib.tensor(x, requires_grad=True)
        w = None if weight is None else lib.tensor(weight)
        loss = lib.nn.functional.cross_entropy(xt, lib.tensor(t), weight=w, **kw)
        loss.backward(lib.tensor(np.linspace(-2, 3, loss.numel()).astype(np.float32)).reshape(loss.shape)
                      if loss.ndim else None)
        return loss.detach().numpy(), xt.grad.numpy()
    if watch:
        with tl.tape():
            return run()
    return run()


def _logits(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 3).astype(np.float32), rng.integers(0, shape[1], shape[0])


@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (64, 10), (32, 27), (7, 16), (9, 33), (300, 1001), (4, 50257)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradient_equals_torchs_bits(shape, reduction):
    x, t = _logits(shape, 0)
    want, got = _ce(torch, x, t, reduction=reduction), _ce(tl, x, t, reduction=reduction)
    _same_bits(got[0], want[0])
    _same_bits(got[1], want[1])


def test_class_weights_and_ignored_rows_equal_torchs_bits():
    x, t = _logits((40, 12), 1)
    t[::5] = -100
    weight = np.random.default_rng(2).uniform(0, 2, 12).astype(np.float32)
    weight[3] = 0.0               # a class of weight 0: its rows' target value is -0.0
    t4 = np.where(t == -100, 4, t)
    for targets, kw in ((t, dict()), (t, dict(weight=weight)), (t, dict(weight=weight, reduction="sum")),
                        (t4, dict(ignore_index=4)), (t, dict(reduction="none"))):
        want, got = _ce(torch, x, targets, **kw), _ce(tl, x, targets, **kw)
        _same_bits(got[0], want[0])
        _same_bits(got[1], want[1])
    assert (_ce(tl, x, t)[1][::5] == 0).all()


def test_the_kept_and_the_recomputed_forms_agree_and_name_torchs_node():
    x, t = _logits((48, 65), 3)
    kept = _ce(tl, x, t)
    watched = _ce(tl, x, t, watch=True)       # a tape watches: the one-op form, its backward recomputes
    _same_bits(watched[1], kept[1])
    xt = tl.tensor(x, requires_grad=True)
    loss = tl.nn.functional.cross_entropy(xt, tl.tensor(t))
    assert loss.grad_fn.name() == "NllLossBackward0"
    assert loss.grad_fn.op.name == "cross_entropy_saved_lse"
    assert [f for f, _ in loss.grad_fn.next_functions][1] is None     # no edge for the target
    with tl.no_grad():
        assert tl.nn.functional.cross_entropy(xt, tl.tensor(t)).grad_fn is None
    with tl.tape():
        assert tl.nn.functional.cross_entropy(xt, tl.tensor(t)).grad_fn.op.name == "cross_entropy"


def test_second_derivative_through_the_kept_form():
    x, t = _logits((6, 5), 4)
    x64 = x.astype(np.float64)

    def run(lib, dtype):
        xt = lib.tensor(x64 if dtype == "f64" else x, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(xt, lib.tensor(t))
        (g,) = lib.autograd.grad(loss, xt, create_graph=True)
        (g * g).sum().backward()
        return g.detach().numpy(), xt.grad.numpy()
    for dtype, rtol in (("f32", 1e-5), ("f64", 1e-12)):
        want, got = run(torch, dtype), run(tl, dtype)
        np.testing.assert_allclose(got[0], want[0], rtol=rtol, atol=1e-7 if dtype == "f32" else 1e-14)
        np.testing.assert_allclose(got[1], want[1], rtol=rtol * 10, atol=1e-7 if dtype == "f32" else 1e-14)


def test_label_smoothing_stays_within_rounding():
    x, t = _logits((30, 11), 5)
    want, got = _ce(torch, x, t, label_smoothing=0.1), _ce(tl, x, t, label_smoothing=0.1)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-8)


def test_nan_logits_in_an_ignored_row_give_nan_as_torchs():
    x, t = _logits((4, 6), 6)
    x[1, 2] = np.nan
    t[1] = -100
    want, got = _ce(torch, x, t), _ce(tl, x, t)
    np.testing.assert_array_equal(np.isnan(got[1]), np.isnan(want[1]))
    _same_bits(got[1][~np.isnan(got[1])], want[1][~np.isnan(want[1])])


def test_a_captured_step_replays_the_kept_form():
    x, t = _logits((16, 10), 7)
    xt, tt = tl.tensor(x, requires_grad=True), tl.tensor(t)

    def step():
        xt.grad = None
        loss = tl.nn.functional.cross_entropy(xt, tt)
        loss.backward()
        return loss
    for _ in range(2):    # warm-up, as a capture wants
        step()
    g = tl.graphs.Graph()
    with tl.graphs.graph(g):
        loss = step()
    names = {node["op"] for node in g.nodes()}
    assert "cross_entropy_forward" in names and "cross_entropy" not in names, names
    for seed in (8, 9):
        new = _logits((16, 10), seed)[0]
        xt.data.copy_(tl.tensor(new))
        g.replay()
        want = _ce(torch, new, t)
        _same_bits(loss.detach().numpy(), want[0])
        _same_bits(xt.grad.numpy(), want[1])


@pytest.mark.parametrize("n", [65537, 100003, 3 * 32768 + 5, 1 << 18])
@pytest.mark.parametrize("name", ["sigmoid", "silu", "gelu", "gelu_tanh", "pow"])
def test_pointwise_loops_equal_torchs_bits_at_each_thread_count(threads, n, name):
    x = (np.random.default_rng(n).standard_normal(n) * 3).astype(np.float32)
    if name == "pow":
        x = np.abs(x)

    def run(lib):
        F = lib.nn.functional
        fn = {"sigmoid": lib.sigmoid, "silu": F.silu, "gelu": F.gelu, "pow": lambda v: v ** 3.5,
              "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}[name]
        xt = lib.tensor(x, requires_grad=True)
        y = fn(xt)
        y.backward(lib.tensor(np.cos(np.arange(n)).astype(np.float32)))
        return y.detach().numpy(), xt.grad.numpy()
    want, got = run(torch), run(tl)
    _same_bits(got[0], want[0])
    _same_bits(got[1], want[1])
