"""A stem's forward (1-3 input channels, stride 1) by kernel offsets with eight output channels'
accumulators in registers (``kernels/conv.py`` ``forward_stride1``, session 29): oneDNN's floats bit for bit
(each output ``fma`` from zero over the offsets, the channels innermost), at one and two threads, for output
channels that do not fill a group of eight, outputs that do not fill the last 32-float strip, uneven pads,
long kernels and a bias."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.kernels.switch import enabled

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")
RNG = np.random.default_rng(29)


# (N, C, O, H, W, kernel, padding; a batch above one, where ATen takes oneDNN): the ResNet and CNN stems, 64 channels, odd channel counts, a tail
# of 24 outputs after the last full strip (14 x 16 grid), kernels of 7x7 and 1x3, uneven and no padding
CASES = [(16, 3, 32, 16, 16, (3, 3), 1), (8, 1, 16, 28, 28, (3, 3), 1), (3, 3, 64, 20, 20, (3, 3), 1),
         (2, 2, 13, 14, 14, (3, 3), 1), (3, 3, 5, 9, 11, (5, 5), 2), (2, 3, 24, 23, 23, (7, 7), 3),
         (2, 2, 9, 10, 12, (1, 3), (0, 1)), (2, 3, 8, 12, 12, (3, 3), 0), (2, 1, 1, 5, 7, (3, 3), 1)]


@pytest.mark.parametrize("n, c, o, h, w, kernel, pad", CASES)
def test_forward_is_torchs_floats_at_one_and_two_threads(n, c, o, h, w, kernel, pad, stem_forward_calls):
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    wt = RNG.standard_normal((o, c) + kernel).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(wt), padding=pad).numpy()
    for threads in (1, 2):
        tapelab.set_num_threads(threads)
        got = tapelab.nn.functional.conv2d(tapelab.tensor(x), tapelab.tensor(wt), padding=pad).numpy()
        np.testing.assert_array_equal(got, want)
    assert stem_forward_calls


def test_uneven_padding_and_a_bias():
    """Pads (top 2, bottom 0) and (left 0, right 1) through ``F.pad`` then an unpadded convolution with a
    bias: torch's floats (the bias added to the finished sum)."""
    x = RNG.standard_normal((4, 3, 11, 13)).astype(np.float32)
    wt = RNG.standard_normal((10, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(10).astype(np.float32)
    outs = []
    for m in (tapelab, torch):
        xs = m.nn.functional.pad(m.tensor(x), (0, 1, 2, 0))
        outs.append(m.nn.functional.conv2d(xs, m.tensor(wt), m.tensor(b)).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


def _sum_in_order(x, wt, taps):
    """The padded convolution's float32 sums, one tap ``(c, ki, kj)`` at a time in ``taps``' order
    (the products exact here: weights of +-1)."""
    n, _, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((n, wt.shape[0], h, w), np.float32)
    for c, ki, kj in taps:
        acc += wt[None, :, c, ki, kj, None, None] * xp[:, None, c, ki:ki + h, kj:kj + w]
    return acc


def test_the_order_is_channels_innermost():
    """Values of 2^24 among ones, where the float32 sum depends on the order of the taps: the channels
    innermost (oneDNN's order) is torch's output and tapelab's; the channels outermost is not."""
    x = np.ones((2, 3, 5, 5), np.float32)   # a batch of two: ATen takes oneDNN
    x[:, 1] = 2.0 ** 24
    wt = np.ones((8, 3, 3, 3), np.float32)
    wt[::2, 1] = -1.0
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(wt), padding=1).numpy()
    got = tapelab.nn.functional.conv2d(tapelab.tensor(x), tapelab.tensor(wt), padding=1).numpy()
    inner = [(c, ki, kj) for ki in range(3) for kj in range(3) for c in range(3)]
    outer = sorted(inner)
    np.testing.assert_array_equal(_sum_in_order(x, wt, inner), want)
    assert (_sum_in_order(x, wt, outer) != want).any()
    np.testing.assert_array_equal(got, want)


# (N, C, O, H, W, kernel, padding) for the weight gradient: taps (C * kh * kw) that leave one or two after
# the blocks of three (4, 5, 2), output channels that do not fill a block of eight, grids whose length is
# no multiple of 16 floats
WEIGHT_CASES = [(16, 3, 32, 16, 16, (3, 3), 1), (4, 1, 11, 9, 13, (2, 2), 0), (3, 1, 5, 10, 7, (1, 5), (0, 2)),
                (2, 2, 9, 6, 6, (1, 1), 0), (2, 3, 20, 15, 15, (7, 7), 3)]


def _weight_grad(x, gy, kernel, pad):
    pads = ((pad, pad),) * 2 if isinstance(pad, int) else tuple((p, p) for p in pad)
    return tapelab.nn._ops._conv_w_fwd(np, x, gy, stride=(1, 1), pads=pads, dilation=(1, 1), groups=1, kernel=kernel)


@pytest.mark.parametrize("n, c, o, h, w, kernel, pad", WEIGHT_CASES)
def test_weight_gradient_against_float64_and_any_split(n, c, o, h, w, kernel, pad, monkeypatch):
    """The stem's weight gradient (``weight_stride1``: eight channels' dots with three taps a block) within
    float32 rounding of the float64 gradient, and the same floats whether the output channels run whole
    or split over two or three threads (a channel's dots do not depend on its block)."""
    monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    gy = RNG.standard_normal((n, o, h + 2 * ph - kernel[0] + 1, w + 2 * pw - kernel[1] + 1)).astype(np.float32)
    calls = []
    loops = kernels.loops("conv")
    monkeypatch.setattr(loops, "weight_stride1", lambda *a, _f=loops.weight_stride1: calls.append(a[-2:]) or _f(*a))
    got = []
    for threads in (1, 2, 3):
        tapelab.set_num_threads(threads)
        got.append(_weight_grad(x, gy, kernel, pad))
    assert (0, o) in calls and len(calls) > 3
    for g in got[1:]:
        np.testing.assert_array_equal(g, got[0])
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))).astype(np.float64)
    want = torch.nn.grad.conv2d_weight(torch.from_numpy(xp), (o, c) + kernel, torch.from_numpy(gy.astype(np.float64))).numpy()
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=2e-6 * np.abs(want).max())
