"""Gaps met running pytorch-cifar's models (session 33, helper h8).

A convolution's weight gradient on the channels-last GEMM route writes a large gradient out-channel
major (``_ops._WEIGHT_ROWS_MIN``): the values must be PyTorch's, and the floats the same as the
in-channel-major product's that smaller gradients keep.
"""
import numpy as np
import pytest
import torch

import tapelab
from tapelab.nn import _ops

# (input shape, weight shape, stride, padding): a ResNet's last-stage 3x3 convolutions (512 -> 512,
# 2.36M weight numbers), a stride-2 entry into it, and a 5x5 kernel over an odd channel count
SHAPES = [((2, 512, 4, 4), (512, 512, 3, 3), 1, 1),
          ((2, 256, 8, 8), (512, 256, 3, 3), 2, 1),
          ((1, 300, 9, 7), (400, 300, 5, 5), 1, 2)]


def _weight_grad(lib, x, w, g, stride, padding):
    xt, wt = lib.tensor(x), lib.tensor(w, requires_grad=True)
    out = lib.nn.functional.conv2d(xt, wt, stride=stride, padding=padding)
    out.backward(lib.tensor(g))
    return out.detach().numpy(), wt.grad.numpy()


def _case(shape_x, shape_w, stride, padding, dtype):
    rng = np.random.default_rng(sum(shape_w))
    x = rng.standard_normal(shape_x).astype(dtype)
    w = (rng.standard_normal(shape_w) / np.sqrt(np.prod(shape_w[1:]))).astype(dtype)
    out_hw = [(s + 2 * padding - k) // stride + 1 for s, k in zip(shape_x[2:], shape_w[2:])]
    g = rng.standard_normal((shape_x[0], shape_w[0], *out_hw)).astype(dtype)
    return x, w, g


@pytest.mark.parametrize("shape_x,shape_w,stride,padding", SHAPES)
@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-4), (np.float64, 1e-10)])
def test_large_weight_gradient_matches_torch(shape_x, shape_w, stride, padding, dtype, tol):
    assert np.prod(shape_w) >= _ops._WEIGHT_ROWS_MIN        # the out-channel-major product runs
    x, w, g = _case(shape_x, shape_w, stride, padding, dtype)
    out, gw = _weight_grad(tapelab, x, w, g, stride, padding)
    out_ref, gw_ref = _weight_grad(torch, x, w, g, stride, padding)
    assert gw.shape == gw_ref.shape and gw.dtype == gw_ref.dtype
    scale = np.abs(gw_ref).max()
    assert np.abs(gw - gw_ref).max() <= tol * scale
    assert np.abs(out - out_ref).max() <= tol * np.abs(out_ref).max()


@pytest.mark.parametrize("shape_x,shape_w,stride,padding", SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
def test_out_channel_major_product_keeps_the_floats(monkeypatch, shape_x, shape_w, stride, padding, threads):
    """The same float32 weight gradient, bit for bit, whichever way the product is laid out."""
    x, w, g = _case(shape_x, shape_w, stride, padding, np.float32)
    before = tapelab.get_num_threads()
    tapelab.set_num_threads(threads)
    try:
        _, out_major = _weight_grad(tapelab, x, w, g, stride, padding)
        monkeypatch.setattr(_ops, "_WEIGHT_ROWS_MIN", np.inf)
        _, in_major = _weight_grad(tapelab, x, w, g, stride, padding)
    finally:
        tapelab.set_num_threads(before)
    assert out_major.flags.c_contiguous
    np.testing.assert_array_equal(out_major, in_major)


def test_weight_gradient_double_backward_through_large_conv():
    """The weight gradient stays differentiable (a gradient penalty through it) and equals torch's."""
    x, w, g = _case((1, 512, 3, 3), (512, 512, 3, 3), 1, 1, np.float64)
    results = []
    for lib in (tapelab, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        out = lib.nn.functional.conv2d(xt, wt, padding=1)
        (gw,) = lib.autograd.grad(out, wt, lib.tensor(g), create_graph=True)
        (gw * gw).sum().backward()
        results.append((gw.detach().numpy(), xt.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-9)

