"""Winograd F(2x2, 3x3) and F(4x4, 3x3) (engine/nn/_winograd.py) give PyTorch's convolution, input
gradient and weight gradient, to second order, on the shapes where they run: odd sizes, every
padding, float32 and float64. The channel and size thresholds are lowered here so small float64
problems take them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab.nn import _winograd
from test_nn_layers import arr
from test_nn_perf_semantics import _both

TF = torch.nn.functional


@pytest.fixture(autouse=True)
def any_threads(monkeypatch):
    """Winograd runs at one intra-op thread only (``MAX_THREADS``); here at any count."""
    monkeypatch.setattr(_winograd, "MAX_THREADS", 1 << 20)


@pytest.fixture
def small(monkeypatch):
    """Every 3x3 stride-1 convolution with >= 2 channels takes the Winograd path; counts its calls."""
    monkeypatch.setitem(_winograd.MIN_CHANNELS, "forward", (2, 2))
    monkeypatch.setitem(_winograd.MIN_CHANNELS, "weight", (2, 2))
    monkeypatch.setattr(_winograd, "MIN_OUT", 1)
    calls = {"conv3x3": 0, "weight3x3": 0}
    for name in calls:
        def spy(*a, _f=getattr(_winograd, name), _n=name):
            calls[_n] += 1
            return _f(*a)
        monkeypatch.setattr(_winograd, name, spy)
    return calls


# (input shape, padding): outputs 6x6, 7x5, 3x6, 6x5, 1x1, 8x8 and 4x12 (the last two: F(4, 3) weight gradients)
SHAPES = [((2, 3, 6, 6), 1), ((2, 3, 7, 5), 1), ((1, 4, 5, 8), 0), ((2, 2, 4, 3), 2), ((1, 3, 3, 3), 0),
          ((2, 3, 8, 8), 1), ((1, 2, 6, 14), 0)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("xshape,pad", SHAPES)
def test_winograd_passes_match_torch(xshape, pad, dtype):
    """Forward and weight gradient called directly, against PyTorch in float64."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xshape).astype(dtype)
    w = rng.standard_normal((5, xshape[1], 3, 3)).astype(dtype)
    pads = ((pad, pad), (pad, pad))
    xt, wt = torch.tensor(x, dtype=torch.float64, requires_grad=True), torch.tensor(w, dtype=torch.float64,
                                                                                    requires_grad=True)
    yt = TF.conv2d(xt, wt, padding=pad)
    gy = rng.standard_normal(tuple(yt.shape)).astype(dtype)
    (gw_ref,) = torch.autograd.grad(yt, (wt,), torch.tensor(gy, dtype=torch.float64))
    y = _winograd.conv3x3(np, x, w, pads)
    gw = _winograd.weight3x3(np, x, gy, pads)
    # F(4, 3)'s float32 rounding is ~2e-6 of the output's scale (its transforms have entries up to 8)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert y.dtype == dtype and gw.dtype == dtype and y.flags.c_contiguous
    for got, ref in ((y, yt.detach().numpy()), (gw, gw_ref.numpy())):
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_asymmetric_pads_match_torch():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3))
    for pads in (((0, 2), (1, 0)), ((2, 1), (0, 2))):
        ref = TF.conv2d(TF.pad(torch.tensor(x), pads[1] + pads[0]), torch.tensor(w)).numpy()
        np.testing.assert_allclose(_winograd.conv3x3(np, x, w, pads), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xshape,pad", SHAPES[:3] + SHAPES[-1:])
def test_conv2d_through_winograd_second_order(small, xshape, pad):
    """conv2d's value, both gradients and the gradients of their squares (create_graph) equal
    PyTorch's while every pass that can runs as Winograd (the stride-1 input gradient is the
    flipped-kernel forward)."""
    _both(lambda F, x, w: F.conv2d(x, w, padding=pad), arr(*xshape), arr(4, xshape[1], 3, 3), create_graph=True)
    assert small["conv3x3"] > 0 and small["weight3x3"] > 0


def test_gradcheck_and_gradgradcheck_through_winograd(small):
    x = tl.tensor(arr(1, 2, 4, 5), requires_grad=True)
    w = tl.tensor(arr(3, 2, 3, 3), requires_grad=True)
    fn = lambda a, b: tl.nn.functional.conv2d(a, b, padding=1)
    assert tl.autograd.gradcheck(fn, (x, w))
    assert tl.autograd.gradgradcheck(fn, (x, w))
    assert small["conv3x3"] > 0 and small["weight3x3"] > 0


def test_resnet_shape_takes_winograd_in_float32():
    """Default thresholds: the ResNet block's 32 -> 32 convolution runs every pass as Winograd (the
    weight gradient as F(4, 3) at 16x16, the rest F(2, 3)) and agrees with PyTorch in float32; the
    stem's 3 channels, strided convolutions and 7x7 outputs do not."""
    assert _winograd.tile_size("weight", (16, 16)) == 4 and _winograd.tile_size("weight", (14, 14)) == 2
    assert _winograd.tile_size("forward", (16, 16)) == 2
    assert _winograd.fits("forward", (3, 3), (1, 1), (1, 1), 1, 32, 32, (16, 16))
    assert not _winograd.fits("forward", (3, 3), (1, 1), (1, 1), 1, 3, 32, (16, 16))
    assert not _winograd.fits("forward", (3, 3), (2, 2), (1, 1), 1, 32, 32, (8, 8))
    assert not _winograd.fits("weight", (3, 3), (1, 1), (1, 1), 1, 32, 32, (7, 7))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_winograd, "MAX_THREADS", 0)
        assert not _winograd.fits("forward", (3, 3), (1, 1), (1, 1), 1, 32, 32, (16, 16))
    rng = np.random.default_rng(2)
    for size in (9, 16):
        _float32_against_torch(rng.standard_normal((2, 32, size, size)).astype(np.float32),
                               (0.1 * rng.standard_normal((32, 32, 3, 3))).astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("knob,value", [("TAP_ROWS", 7), ("BLOCK_TILE_CHANNELS", 2 * 25 * 5)])
def test_blocked_forward_matches_torch(monkeypatch, knob, value, dtype):
    """The per-tap GEMMs run ``TAP_ROWS`` tile rows at a time (OpenBLAS's small-matrix path) and
    the forward a block of images at a time (``BLOCK_TILE_CHANNELS``): blocks that do not divide
    the tiles (75 rows in 7s) or the batch (3 images in 2s) evenly give PyTorch's forward, input
    and weight gradients."""
    monkeypatch.setattr(_winograd, knob, value)
    monkeypatch.setitem(_winograd.MIN_CHANNELS, "forward", (2, 2))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4, 10, 10)).astype(dtype)
    w = rng.standard_normal((5, 4, 3, 3)).astype(dtype)
    res = []
    for lib, F in ((tl, tl.nn.functional), (torch, TF)):
        xs, ws = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = F.conv2d(xs, ws, padding=1)
        (y * y).sum().backward()
        res.append([y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()])
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max())


def test_cnn_shape_takes_winograd_but_in_its_weight_gradient(monkeypatch):
    """The CNN's 16 -> 32 convolution: its forward (from 16 input channels) and its input gradient (a
    32 -> 16 flipped-kernel forward) run as Winograd F(2, 3), its weight gradient stays im2col."""
    assert not _winograd.fits("weight", (3, 3), (1, 1), (1, 1), 1, 16, 32, (14, 14))
    calls = []
    conv = _winograd.conv3x3
    monkeypatch.setattr(_winograd, "conv3x3", lambda xp, x, w, pads, *bias: calls.append(x.shape[1]) or conv(xp, x, w, pads, *bias))
    rng = np.random.default_rng(4)
    _float32_against_torch(rng.standard_normal((2, 16, 14, 14)).astype(np.float32),
                           (0.1 * rng.standard_normal((32, 16, 3, 3))).astype(np.float32))
    assert calls == [16, 32]


def _float32_against_torch(x, w):
    res = []
    for lib, F in ((tl, tl.nn.functional), (torch, TF)):
        xs, ws = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = F.conv2d(xs, ws, padding=1)
        (y * y).sum().backward()
        res.append([y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def _loops_on_off(call):
    """``call()`` with the eager kernels on, then off: (loops' result, numpy formulas' result)."""
    from tapelab import kernels
    old = kernels.set_enabled(True)
    try:
        fused = call()
        kernels.set_enabled(False)
        return fused, call()
    finally:
        kernels.set_enabled(old)


def test_input_transform_loop_equals_numpy_passes():
    """The numba input transform (engine/kernels/winograd.py, when numba is installed; it pads
    one image at a time itself) gives exactly the numpy passes' result: same operations in the
    same order, both tile sizes, a non-contiguous input too."""
    rng = np.random.default_rng(3)
    for shape, pads, m in (((2, 5, 7, 9), ((0, 2), (1, 0)), 2), ((3, 8, 6, 6), ((1, 1), (1, 1)), 2),
                           ((2, 4, 10, 6), ((0, 0), (1, 1)), 4), ((2, 3, 9, 7), ((2, 1), (0, 2)), 4),
                           ((2, 3, 8, 9), ((1, 1), (1, 1)), 2)):
        x = rng.standard_normal(shape).astype(np.float32)
        if shape[2] == 8:
            x = np.swapaxes(rng.standard_normal((2, 3, 9, 8)).astype(np.float32), 2, 3)
        th, tw = _winograd._tiles(_winograd.out_size(shape[2:], pads), m)
        fused, plain = _loops_on_off(lambda: _winograd._input_transform(np, x, pads, m, th, tw))
        np.testing.assert_array_equal(fused, plain)


def test_f23_output_transform_loop_matches_gemm():
    """F(2, 3)'s output transform as sums and differences (engine/kernels/winograd.py) agrees with
    the numpy form's Kronecker GEMM to float32 rounding, odd sizes and partial tiles included."""
    rng = np.random.default_rng(5)
    for shape, pads in (((2, 5, 7, 9), ((0, 2), (1, 0))), ((3, 8, 6, 6), ((1, 1), (1, 1)))):
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((6, shape[1], 3, 3)).astype(np.float32)
        fused, plain = _loops_on_off(lambda: _winograd.conv3x3(np, x, w, pads))
        np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6 * np.abs(plain).max())


def test_f43_output_gradient_transform_loop_matches_gemm():
    """F(4, 3)'s output-gradient transform as sums and differences (the weight gradient's
    ``kernels/winograd.py`` ``grad_transform_f43``) agrees with the numpy form's (36, 16) GEMM to
    float32 rounding, and both with PyTorch's weight gradient."""
    rng = np.random.default_rng(6)
    for shape, pads in (((2, 5, 8, 8), ((1, 1), (1, 1))), ((3, 4, 6, 10), ((0, 0), (0, 0)))):
        x = rng.standard_normal(shape).astype(np.float32)
        out = _winograd.out_size(shape[2:], pads)
        assert _winograd.tile_size("weight", out) == 4
        gy = rng.standard_normal((shape[0], 7, *out)).astype(np.float32)
        fused, plain = _loops_on_off(lambda: _winograd.weight3x3(np, x, gy, pads))
        np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5 * np.abs(plain).max())
        (pt, pb), (pl, pr) = pads
        xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))).astype(np.float64)
        ref = torch.nn.grad.conv2d_weight(torch.from_numpy(xp), (7, shape[1], 3, 3),
                                          torch.from_numpy(gy.astype(np.float64)))
        np.testing.assert_allclose(fused, ref.numpy(), rtol=1e-4, atol=1e-5 * np.abs(ref.numpy()).max())


@pytest.mark.parametrize("m", [2, 4])
def test_transform_loops_split_over_threads_equal_one_thread(monkeypatch, m):
    """The input transforms split by image ranges and the output/gradient transforms by column
    ranges over the intra-op threads, each thread with its own scratch: exactly the one-thread
    result, image and column ranges that do not divide evenly included."""
    pytest.importorskip("numba")
    from tapelab import kernels
    monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5, 10, 9)).astype(np.float32)
    w = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    pads = ((1, 1), (1, 1))
    out = _winograd.out_size(x.shape[2:], pads)
    gy = rng.standard_normal((3, 6, *out)).astype(np.float32)
    th, tw = _winograd._tiles(out, m)
    results = []
    for n in (1, 2, 3):
        tl.set_num_threads(n)
        results.append((_winograd._input_transform(np, x, pads, m, th, tw), _winograd.conv3x3(np, x, w, pads),
                        _winograd.weight3x3(np, x, gy, pads)))
    for got in results[1:]:
        np.testing.assert_array_equal(got[0], results[0][0])
        np.testing.assert_allclose(got[1], results[0][1], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[2], results[0][2], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("o", [16, 32, 48, 64])
def test_tap_gemm_loop_matches_float64_and_splits_bitwise(monkeypatch, o):
    """The per-tap GEMMs' register-blocked loop (``kernels/winograd.py`` ``tap_gemm``, taken for
    float32 with O a multiple of 16 up to 64): the float64 product to float32 rounding, tile counts
    that leave rows over included, and the same floats however the taps split over threads and
    whether ``v`` is contiguous or a transposed view."""
    pytest.importorskip("numba")
    from tapelab import kernels
    monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    monkeypatch.setattr(kernels.switch, "_ON", [True])
    loops = kernels.loops("winograd")
    calls = []
    monkeypatch.setattr(loops, "tap_gemm", lambda *a, _f=loops.tap_gemm: calls.append(1) or _f(*a))
    rng = np.random.default_rng(9)
    v = rng.standard_normal((5, 16 * 3 + 7, 9)).astype(np.float32)
    u = rng.standard_normal((5, 9, o)).astype(np.float32)
    ref = np.matmul(v.astype(np.float64), u.astype(np.float64))
    results = []
    for n in (1, 2, 3):
        tl.set_num_threads(n)
        results.append(_winograd._tap_gemm(np, v, u))
    assert len(calls) >= 3
    np.testing.assert_allclose(results[0], ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    # the weight gradient passes a transposed view as v: the same floats as the contiguous copy
    strided = np.ascontiguousarray(v.transpose(0, 2, 1)).transpose(0, 2, 1)
    results.append(_winograd._tap_gemm(np, strided, u))
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


def test_narrow_gemm_for_im2col_matches_float64_and_splits_bitwise(monkeypatch):
    """im2col's forward product through the same loop (``_winograd.narrow_gemm``: rows split over
    threads, ``a`` at any strides): float64 to float32 rounding, the same floats at any thread
    count and for a transposed view, and the CNN's 16 -> 32 convolution (im2col forward) against
    PyTorch."""
    pytest.importorskip("numba")
    from tapelab import kernels
    monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    monkeypatch.setattr(kernels.switch, "_ON", [True])
    rng = np.random.default_rng(10)
    a = rng.standard_normal((101, 37)).astype(np.float32)
    b = rng.standard_normal((37, 32)).astype(np.float32)
    at = np.ascontiguousarray(a.T).T
    ref = a.astype(np.float64) @ b.astype(np.float64)
    results = []
    for n in (1, 2, 3):
        tl.set_num_threads(n)
        results += [_winograd.narrow_gemm(np, a, b), _winograd.narrow_gemm(np, at, b)]
    np.testing.assert_allclose(results[0], ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])
    _float32_against_torch(rng.standard_normal((2, 16, 14, 14)).astype(np.float32),
                           (0.1 * rng.standard_normal((32, 16, 3, 3))).astype(np.float32))
