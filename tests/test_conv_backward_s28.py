"""A convolution's plain backward as one op, ``convolution_backward`` (ATen's name), session 28: its input and
weight gradients at once on two threads where both are Winograd's one-image-at-a-time loops
(``kernels/winograd.py`` ``grads_f23_f43``), the same floats as the two ops one after the other, torch's values;
``create_graph`` keeps the two differentiable ops; the FLOP counter and ``vmap`` see the one op."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab import events, kernels
from tapelab.kernels.switch import enabled

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")
RNG = np.random.default_rng(28)


def _data(n=8, c=32, o=32, size=16):
    return (RNG.standard_normal((n, c, size, size)).astype(np.float32),
            RNG.standard_normal((o, c, 3, 3)).astype(np.float32),
            RNG.standard_normal((n, o, size, size)).astype(np.float32))


def _tapelab_grads(x, w, g, need_x=True, need_w=True):
    xs, ws = tapelab.tensor(x, requires_grad=need_x), tapelab.tensor(w, requires_grad=need_w)
    tapelab.nn.functional.conv2d(xs, ws, padding=1).backward(tapelab.tensor(g))
    return xs.grad.numpy() if need_x else None, ws.grad.numpy() if need_w else None


@pytest.fixture
def side_by_side(monkeypatch):
    """Count the calls of the two-gradient loop."""
    loops = kernels.loops("winograd")
    real, calls = loops.grads_f23_f43, []
    monkeypatch.setattr(loops, "grads_f23_f43", lambda *args: calls.append(args) or real(*args))
    return calls


@pytest.mark.parametrize("shape, at_once", [((8, 32, 32, 16), 1), ((3, 64, 16, 8), 1), ((4, 32, 48, 12), 1),
                                             ((4, 16, 32, 12), 0)])   # 16 input channels: F(4, 3)'s weight pass needs 32
def test_both_gradients_at_once_are_the_two_ops_floats_and_torchs_values(shape, at_once, side_by_side):
    x, w, g = _data(*shape)
    tapelab.set_num_threads(2)
    gx, gw = _tapelab_grads(x, w, g)
    assert len(side_by_side) == (at_once if kernels.native() else 0)
    alone_x, _ = _tapelab_grads(x, w, g, need_w=False)       # each gradient as its own op
    _, alone_w = _tapelab_grads(x, w, g, need_x=False)
    np.testing.assert_array_equal(gx, alone_x)
    np.testing.assert_array_equal(gw, alone_w)
    tapelab.set_num_threads(1)
    np.testing.assert_array_equal(_tapelab_grads(x, w, g)[1], gw)     # one thread's floats
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(xt, wt, padding=1).backward(torch.tensor(g))
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_a_broadcast_gradient_and_other_kernels_run_the_ops_one_after_the_other(side_by_side):
    """Where either pass would not run its loop (a gradient broadcast from ``sum``, a 5x5 kernel) the op
    computes them in turn, as the two ops did."""
    tapelab.set_num_threads(2)
    x, w, _ = _data(4, 32, 32, 16)
    xs, ws = tapelab.tensor(x, requires_grad=True), tapelab.tensor(w, requires_grad=True)
    tapelab.nn.functional.conv2d(xs, ws, padding=1).sum().backward()
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(xt, wt, padding=1).sum().backward()
    np.testing.assert_allclose(ws.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-3)
    w5 = RNG.standard_normal((32, 32, 5, 5)).astype(np.float32)
    xs, ws = tapelab.tensor(x, requires_grad=True), tapelab.tensor(w5, requires_grad=True)
    tapelab.nn.functional.conv2d(xs, ws, padding=2).backward(tapelab.ones(4, 32, 16, 16))
    assert side_by_side == [] and xs.grad.shape == (4, 32, 16, 16) and ws.grad.shape == (32, 32, 5, 5)


def test_the_backward_is_one_convolution_backward_op():
    seen = []
    x, w, g = _data(2, 16, 16, 8)
    with events.subscribe("op", lambda e: seen.append(e.op)):
        _tapelab_grads(x, w, g)
    assert "convolution_backward" in seen and "convolution_weight" not in seen and "convolution_transpose" not in seen


def test_create_graph_keeps_the_differentiable_ops():
    x, w, _ = _data(2, 16, 16, 8)
    res = []
    for m in (tapelab, torch):
        xs, ws = m.tensor(x, requires_grad=True), m.tensor(w, requires_grad=True)
        y = m.nn.functional.conv2d(xs, ws, padding=1)
        gx, gw = m.autograd.grad((y * y).sum(), (xs, ws), create_graph=True)
        (gx.square().sum() + gw.square().sum()).backward()
        res.append((xs.grad.numpy(), ws.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5 * np.abs(b).max())


def test_flop_counter_counts_both_gradients_as_torch():
    from tapelab.utils import flop_counter as tfc
    from torch.utils import flop_counter as rfc
    x, w, g = _data(2, 16, 32, 8)
    totals = []
    for m, fc in ((tapelab, tfc), (torch, rfc)):
        xs, ws = m.tensor(x, requires_grad=True), m.tensor(w, requires_grad=True)
        with fc.FlopCounterMode(display=False) as counter:
            m.nn.functional.conv2d(xs, ws, padding=1).backward(m.tensor(g))
        totals.append(counter.get_total_flops())
    assert totals[0] == totals[1] > 0


def test_per_sample_gradients_through_the_one_op():
    """``vmap`` over ``grad`` of a convolution (per-sample weight gradients) against a loop of single samples."""
    x, w, _ = _data(3, 16, 16, 8)
    weight = tapelab.tensor(w)

    def loss(wt, sample):
        return tapelab.nn.functional.conv2d(sample[None], wt, padding=1).square().sum()

    per_sample = tapelab.func.vmap(tapelab.func.grad(loss), in_dims=(None, 0))(weight, tapelab.tensor(x))
    for i in range(3):
        one = tapelab.func.grad(loss)(weight, tapelab.tensor(x[i]))
        np.testing.assert_allclose(per_sample[i].numpy(), one.numpy(), rtol=1e-4, atol=1e-3)
