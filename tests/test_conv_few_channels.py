"""A stride-1 convolution with 1-3 input channels (a stem's) takes its weight gradient from
``kernels/conv.py``'s flat dot-product loop on cpu float32: PyTorch's gradient for every kernel
shape and padding, the same floats however the output channels split over threads."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab import kernels
from tapelab.nn import _ops

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def loops_on():
    """The loop is taken with the eager kernels on (``TAPELAB_EAGER_KERNELS=0`` turns them off)."""
    kernels.set_enabled(True)

# (input shape, out channels, kernel, pads as ((top, bottom), (left, right)))
CASES = [((4, 1, 28, 28), 16, (3, 3), ((1, 1), (1, 1))), ((3, 3, 16, 16), 32, (3, 3), ((1, 1), (1, 1))),
         ((2, 2, 9, 7), 5, (3, 3), ((0, 2), (1, 0))), ((2, 3, 11, 10), 4, (5, 5), ((2, 2), (2, 2))),
         ((3, 1, 6, 8), 3, (1, 3), ((0, 0), (0, 0))), ((2, 2, 7, 7), 6, (2, 4), ((1, 0), (2, 1)))]


def _torch_weight_grad(x, gy, w_shape, pads):
    (pt, pb), (pl, pr) = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))).astype(np.float64)
    return torch.nn.grad.conv2d_weight(torch.from_numpy(xp), w_shape, torch.from_numpy(gy.astype(np.float64))).numpy()


@pytest.mark.parametrize("xshape,o,kernel,pads", CASES)
def test_weight_gradient_loop_matches_torch(xshape, o, kernel, pads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xshape).astype(np.float32)
    out = tuple(n + lo + hi - k + 1 for n, (lo, hi), k in zip(xshape[2:], pads, kernel))
    gy = rng.standard_normal((xshape[0], o, *out)).astype(np.float32)
    calls = []
    loops = kernels.loops("conv")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loops, "weight_stride1", lambda *a, _f=loops.weight_stride1: calls.append(1) or _f(*a))
        gw = _ops._conv_w_fwd(np, x, gy, stride=(1, 1), pads=pads, dilation=(1, 1), groups=1, kernel=kernel)
    assert calls and gw.dtype == np.float32 and gw.shape == (o, xshape[1], *kernel)
    ref = _torch_weight_grad(x, gy, gw.shape, pads)
    np.testing.assert_allclose(gw, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_stem_gradients_through_conv2d_match_torch():
    """The CNN's first layer (1 -> 16, padding 1) through ``F.conv2d`` and backward, and a strided
    stem (which keeps im2col), against PyTorch in float32."""
    rng = np.random.default_rng(1)
    for xshape, w_shape, stride in (((4, 1, 28, 28), (16, 1, 3, 3), 1), ((2, 3, 15, 15), (8, 3, 3, 3), 2)):
        x = rng.standard_normal(xshape).astype(np.float32)
        w = (0.3 * rng.standard_normal(w_shape)).astype(np.float32)
        res = []
        for lib in (tl, torch):
            xs, ws = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
            y = lib.nn.functional.conv2d(xs, ws, stride=stride, padding=1)
            (y * y).sum().backward()
            res.append([y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()])
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(b).max())


def test_output_channels_over_threads_equal_one_thread(monkeypatch):
    """Each (output channel, input channel, offset) sum is computed alone: any split of the output
    channels over threads, uneven included, gives exactly the one-thread floats."""
    monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 2, 10, 9)).astype(np.float32)
    gy = rng.standard_normal((3, 7, 10, 9)).astype(np.float32)
    p = dict(stride=(1, 1), pads=((1, 1), (1, 1)), dilation=(1, 1), groups=1, kernel=(3, 3))
    results = []
    for n in (1, 2, 3):
        tl.set_num_threads(n)
        results.append(_ops._conv_w_fwd(np, x, gy, **p))
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


def test_other_cases_keep_im2col():
    """float64 and strided or dilated kernels do not take the loop."""
    rng = np.random.default_rng(3)
    loops = kernels.loops("conv")
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loops, "weight_stride1", lambda *a: calls.append(1))
        x = rng.standard_normal((2, 1, 8, 8))
        p = dict(pads=((1, 1), (1, 1)), groups=1, kernel=(3, 3))
        _ops._conv_w_fwd(np, x, rng.standard_normal((2, 4, 8, 8)), stride=(1, 1), dilation=(1, 1), **p)
        x = x.astype(np.float32)
        _ops._conv_w_fwd(np, x, rng.standard_normal((2, 4, 4, 4)).astype(np.float32), stride=(2, 2),
                         dilation=(1, 1), **p)
        _ops._conv_w_fwd(np, x, rng.standard_normal((2, 4, 6, 6)).astype(np.float32), stride=(1, 1),
                         dilation=(2, 2), **p)
    assert not calls
