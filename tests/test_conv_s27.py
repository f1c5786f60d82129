"""Convolutions at two threads, session 27: the weight gradient one kernel offset at a time
(``winograd.weight_taps``), Winograd F(2, 3)'s forward from 16 channels, and F(4, 3)'s weight gradient
with its taps cut over the threads. Each against torch, and the same floats at one and two threads
(split or whole), since every sum runs in one order whatever the cut."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.kernels.switch import enabled
from tapelab.nn import _ops, _winograd
from test_native_pool import _one_and_two

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")
G = importlib.import_module("tapelab.kernels.gemm")


def _grads(x, w, pad):
    xs, ws = tapelab.tensor(x, requires_grad=True), tapelab.tensor(w, requires_grad=True)
    y = tapelab.nn.functional.conv2d(xs, ws, padding=pad)
    (y * y).sum().backward()
    return y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()


def _torch_grads(x, w, pad):
    xs, ws = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(xs, ws, padding=pad)
    (y * y).sum().backward()
    return y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()


CASES = [((8, 16, 14, 14), (32, 16, 3, 3), 1),     # the CNN's 16 -> 32: Winograd forward, weight by taps
         ((4, 8, 20, 20), (32, 8, 5, 5), 2),       # a 5x5 kernel by taps
         ((4, 5, 13, 17), (64, 5, 3, 3), 1),       # odd sizes, 64 outputs
         ((4, 32, 16, 16), (32, 32, 3, 3), 1)]     # the ResNet block: F(4, 3)'s weight taps in ranges


@pytest.mark.parametrize("xs, ws, pad", CASES)
def test_convolution_gradients_equal_torch_and_one_threads_floats(xs, ws, pad, monkeypatch):
    monkeypatch.setattr(G, "_mkl_team", lambda n: 1)      # MKL's own threads cut long sums (as torch's)
    rng = np.random.default_rng(27)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (0.2 * rng.standard_normal(ws)).astype(np.float32)
    results = _one_and_two(monkeypatch, lambda: _grads(x, w, pad))
    for got in results[1:]:
        for a, b in zip(got, results[0]):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(results[0], _torch_grads(x, w, pad)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-5 * np.abs(b).max())


def test_the_weight_gradient_by_taps_is_taken_where_it_pays():
    """16 -> 32 at 14x14 by taps; 16 outputs, an 8x8 output and 1-3 input channels keep their routes."""
    x = np.zeros((2, 16, 14, 14), np.float32)
    p = dict(stride=(1, 1), dilation=(1, 1), groups=1)
    pads = ((1, 1), (1, 1))
    assert _ops._by_taps(np, x, np.zeros((2, 32, 14, 14), np.float32), (3, 3), pads=pads, **p)
    assert not _ops._by_taps(np, x, np.zeros((2, 16, 14, 14), np.float32), (3, 3), pads=pads, **p)
    assert not _ops._by_taps(np, x[:, :, :8, :8], np.zeros((2, 32, 8, 8), np.float32), (3, 3), pads=pads, **p)
    assert not _ops._by_taps(np, x[:, :3], np.zeros((2, 32, 14, 14), np.float32), (3, 3), pads=pads, **p)
    assert not _ops._by_taps(np, x, np.zeros((2, 32, 7, 7), np.float32), (3, 3), pads=pads,
                             stride=(2, 2), dilation=(1, 1), groups=1)


def test_weight_taps_in_any_ranges_sum_as_one_call():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6, 12, 15)).astype(np.float32)
    gy = rng.standard_normal((3, 48, 12, 15)).astype(np.float32)
    loop = kernels.loops("winograd").weight_taps
    whole = np.zeros((9, 6, 48), np.float32)
    loop(x, gy, 1, 1, 3, 3, whole, 0, 9)
    cut = np.zeros((9, 6, 48), np.float32)
    for lo, hi in ((0, 2), (2, 7), (7, 9)):
        loop(x, gy, 1, 1, 3, 3, cut, lo, hi)
    np.testing.assert_array_equal(cut, whole)
    want = torch.nn.grad.conv2d_weight(torch.from_numpy(x), (48, 6, 3, 3), torch.from_numpy(gy), padding=1).numpy()
    np.testing.assert_allclose(whole.reshape(3, 3, 6, 48).transpose(3, 2, 0, 1), want, rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())


def test_sixteen_channel_forwards_run_winograd():
    """From 16 input channels a 3x3 stride-1 forward is Winograd F(2, 3) (conv_f23), 8 stays im2col."""
    assert _winograd.fits("forward", (3, 3), (1, 1), (1, 1), 1, 16, 32, (14, 14))
    assert not _winograd.fits("forward", (3, 3), (1, 1), (1, 1), 1, 8, 32, (14, 14))


def test_double_backward_through_the_weight_gradient_by_taps():
    """create_graph keeps the differentiable ops (convolution_weight's own vjp), against torch."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 8, 14, 14)).astype(np.float32)
    w = (0.2 * rng.standard_normal((32, 8, 3, 3))).astype(np.float32)
    res = []
    for lib in (tapelab, torch):
        xs, ws = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(xs, ws, padding=1)
        (gw,) = lib.autograd.grad((y * y).sum(), ws, create_graph=True)
        (gx,) = lib.autograd.grad((gw * gw).sum(), xs)
        res.append((gw.detach().numpy(), gx.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())
