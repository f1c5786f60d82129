"""Depthwise convolutions (``groups == in == out channels``) on ``kernels/depthwise.py``'s loops: values and
gradients against torch at float32 (any stride, padding, dilation, with and without bias, one and two
threads, a transposed depthwise convolution), the float64 fallback through gradcheck."""
import numpy as np
import pytest
import torch

import tapelab
from _depthwise import close as _close, run as _run

_CASES = [  # (N, C, H, W, k, stride, padding, dilation)
    (2, 5, 9, 11, 3, 1, 1, 1), (2, 6, 14, 13, 3, 2, 1, 1), (1, 4, 16, 16, 7, 1, 3, 1),
    (2, 3, 10, 12, 3, 2, 0, 2), (1, 4, 7, 9, 5, 3, 2, 1), (2, 3, 8, 8, 2, 1, 0, 1),
    (1, 2, 5, 5, 3, 1, 4, 1), (2, 4, 12, 10, 3, 1, 2, 2), (3, 8, 6, 6, 1, 1, 0, 1),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", _CASES)
def test_depthwise_matches_torch(case, bias, threads):
    n, c, h, w_, k, s, p, d = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if bias else None
    kw = dict(stride=s, padding=p, dilation=d, groups=c)
    with torch.no_grad():
        oshape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).shape
    g = rng.standard_normal(tuple(oshape)).astype(np.float32)
    before = tapelab.get_num_threads()
    tapelab.set_num_threads(threads)
    try:
        got = _run(tapelab, x, w, b, g, **kw)
    finally:
        tapelab.set_num_threads(before)
    _close(got, _run(torch, x, w, b, g, **kw))


def test_depthwise_sum_backward_broadcast_gradient():
    """``y.sum().backward()`` hands the convolution a broadcast (not contiguous) output gradient."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 6, 12, 12)).astype(np.float32), rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    res = []
    for lib in (torch, tapelab):
        xt, wt = lib.from_numpy(x.copy()).requires_grad_(), lib.from_numpy(w.copy()).requires_grad_()
        lib.nn.functional.conv2d(xt, wt, padding=1, groups=6).sum().backward()
        res.append([xt.grad.numpy(), wt.grad.numpy()])
    _close(res[1], res[0])


def test_depthwise_same_floats_any_threads():
    """Planes and channels are computed alone: two threads give one thread's floats."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 32, 20, 20)).astype(np.float32), rng.standard_normal((32, 1, 5, 5)).astype(np.float32)
    g = rng.standard_normal((4, 32, 20, 20)).astype(np.float32)
    before, outs = tapelab.get_num_threads(), []
    try:
        for t in (1, 2):
            tapelab.set_num_threads(t)
            outs.append(_run(tapelab, x, w, None, g, padding=2, groups=32))
    finally:
        tapelab.set_num_threads(before)
    for a, b in zip(*outs):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("stride,dilation", [(2, 1), (1, 2)])
def test_conv_transpose_depthwise_matches_torch(stride, dilation):
    """A transposed depthwise convolution (its forward the loops' input gradient, output padding included:
    at stride 1 the output reaches past the grid's rows and columns)."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 4, 7, 8)).astype(np.float32), rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    res = []
    for lib in (torch, tapelab):
        xt, wt = lib.from_numpy(x.copy()).requires_grad_(), lib.from_numpy(w.copy()).requires_grad_()
        y = lib.nn.functional.conv_transpose2d(xt, wt, stride=stride, padding=1, output_padding=1,
                                               dilation=dilation, groups=4)
        y.backward(lib.from_numpy(np.linspace(-1, 1, y.numel(), dtype=np.float32).reshape(tuple(y.shape))))
        res.append([y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    _close(res[1], res[0])


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 0, 2)])
def test_depthwise_float64_gradcheck(stride, padding, dilation):
    rng = np.random.default_rng(6)
    x = tapelab.from_numpy(rng.standard_normal((2, 3, 7, 6))).requires_grad_()
    w = tapelab.from_numpy(rng.standard_normal((3, 1, 3, 3))).requires_grad_()
    f = lambda a, b: tapelab.nn.functional.conv2d(a, b, stride=stride, padding=padding, dilation=dilation, groups=3)
    assert tapelab.autograd.gradcheck(f, (x, w))


@pytest.mark.parametrize("stride", [1, 2])
def test_non_finite_inputs_reach_only_the_taps_that_meet_them(stride):
    """A NaN and an inf in the input: the output and both gradients as torch's (the weight gradient's taps
    that never meet the inf stay finite: no product with a padding column)."""
    rng = np.random.default_rng(32)
    x = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    x[0, 1, 3, 3], x[1, 2, 0, 0] = np.nan, np.inf
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    got = {}
    for lib in (tapelab, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(xt, wt, padding=1, stride=stride, groups=4)
        y.sum().backward()
        got[lib] = (y.detach().numpy(), wt.grad.numpy(), xt.grad.numpy())
    for ours, theirs in zip(got[tapelab], got[torch]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
