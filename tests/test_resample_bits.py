"""Interpolation and average pooling equal PyTorch's cpu results bit for bit, forward and input
gradient, in float32 and float64: bicubic (both ``align_corners``), trilinear, bilinear on both of
ATen's kernels, antialiased bilinear and bicubic, adaptive average pooling (and ``mode="area"``) with
windows that do not tile the input, average pooling with padding, ``ceil_mode``,
``count_include_pad`` and ``divisor_override`` (``nn/_resample.py``, ``kernels/resample.py``,
``nn/_upsample.py``, ``nn/_ops.py``). Before these ops 10-97% of the values differed in some bit.
Both libraries run on one thread: ATen's bilinear kernel choice depends on the thread count."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels

F_T = torch.nn.functional
F_L = tapelab.nn.functional


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)
    tapelab.set_num_threads(1)


def _both(fn, shape, dtype, seed=0, positive=False):
    """``fn`` through torch and tapelab on the same input and output gradient: the four arrays."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if positive:
        x = np.abs(x) + 0.25
    xt = torch.tensor(x, requires_grad=True)
    yt = fn(F_T, xt)
    g = rng.standard_normal(tuple(yt.shape)).astype(dtype)
    yt.backward(torch.tensor(g))
    xl = tapelab.tensor(x, requires_grad=True)
    yl = fn(F_L, xl)
    yl.backward(tapelab.tensor(g))
    return yl.detach().numpy(), yt.detach().numpy(), xl.grad.numpy(), xt.grad.numpy()


def _assert_bits(fn, shape, dtype, **kw):
    got, want, ggot, gwant = _both(fn, shape, dtype, **kw)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want), f"forward: {np.mean(got != want):.1%} differ"
    assert np.array_equal(ggot, gwant), f"input gradient: {np.mean(ggot != gwant):.1%} differ"


DTYPES = [np.float32, np.float64]
INTERP = [
    ("bicubic", (2, 3, 17, 23), dict(scale_factor=2.0)),
    ("bicubic", (2, 3, 17, 23), dict(size=(30, 11))),
    ("bicubic", (1, 2, 9, 7), dict(scale_factor=(1.7, 0.6))),
    ("bicubic", (1, 2, 9, 7), dict(scale_factor=1.3, recompute_scale_factor=True)),
    ("bicubic", (1, 1, 1, 5), dict(size=(3, 1))),
    ("bicubic", (2, 1, 6, 6), dict(size=(6, 6))),
    ("bicubic", (1, 2, 32, 40), dict(size=(8, 13))),
    ("bicubic", (1, 40, 14, 14), dict(size=(24, 24))),           # many planes: blocks with the planes innermost
    ("bicubic", (2, 35, 9, 8), dict(scale_factor=0.7)),         # 70 planes: a full block of 64 and a rest
    ("trilinear", (2, 2, 7, 9, 11), dict(scale_factor=1.7)),
    ("trilinear", (1, 2, 7, 9, 11), dict(size=(5, 13, 8))),
    ("trilinear", (1, 1, 1, 4, 3), dict(size=(3, 1, 6))),
    ("trilinear", (1, 2, 5, 6, 7), dict(scale_factor=(0.5, 2.0, 1.3), recompute_scale_factor=True)),
    ("bilinear", (1, 1, 64, 64), dict(size=(100, 90))),       # ATen's generic (nested) kernel
    ("bilinear", (2, 4, 30, 30), dict(scale_factor=2.5)),      # OH + OW > 128, four channels: generic
    ("bilinear", (2, 3, 64, 64), dict(size=(100, 90))),       # one thread, three channels: the vector kernel
    ("bilinear", (2, 3, 17, 23), dict(scale_factor=1.7)),
    ("linear", (2, 3, 17), dict(scale_factor=1.7)),
    ("linear", (2, 3, 17), dict(size=5)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("align", [False, True], ids=["half_pixel", "align_corners"])
@pytest.mark.parametrize("mode,shape,kw", INTERP, ids=[f"{m}-{'x'.join(map(str, s))}-{i}" for i, (m, s, k) in
                                                         enumerate(INTERP)])
def test_interpolate_bits(mode, shape, kw, align, dtype):
    _assert_bits(lambda F, x: F.interpolate(x, mode=mode, align_corners=align, **kw), shape, dtype)


AA = [((2, 3, 17, 23), dict(size=(8, 10))), ((2, 3, 17, 23), dict(size=(17, 10))), ((2, 3, 17, 23), dict(size=(30, 23))),
      ((1, 2, 40, 40), dict(size=(13, 13))), ((1, 2, 60, 9), dict(size=(7, 20))), ((2, 3, 17, 23), dict(scale_factor=0.37)),
      ((1, 1, 5, 6), dict(size=(1, 1))), ((1, 2, 8, 8), dict(size=(8, 8)))]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("shape,kw", AA, ids=[str(i) for i in range(len(AA))])
def test_antialias_bits(mode, shape, kw, dtype):
    _assert_bits(lambda F, x: F.interpolate(x, mode=mode, antialias=True, **kw), shape, dtype)


ADAPTIVE = [
    ("adaptive_avg_pool2d", (2, 3, 17, 23), (8, 12)), ("adaptive_avg_pool2d", (2, 3, 9, 9), (3, 3)),
    ("adaptive_avg_pool2d", (1, 2, 5, 7), (7, 9)), ("adaptive_avg_pool2d", (1, 2, 16, 16), (4, 4)),
    ("adaptive_avg_pool2d", (1, 2, 17, 23), (1, 5)), ("adaptive_avg_pool2d", (2, 17, 23), (4, None)),
    ("adaptive_avg_pool1d", (2, 3, 17), 5), ("adaptive_avg_pool1d", (2, 3, 17), 1), ("adaptive_avg_pool1d", (3, 10), 7),
    ("adaptive_avg_pool3d", (2, 2, 7, 9, 11), (3, 4, 5)), ("adaptive_avg_pool3d", (1, 2, 9, 9, 9), 3),
    ("adaptive_avg_pool2d", (2, 40, 13, 13), (6, 6)), ("adaptive_avg_pool2d", (1, 70, 17, 23), (7, 5)),
    ("adaptive_avg_pool1d", (4, 30, 17), 5), ("adaptive_avg_pool3d", (1, 20, 5, 6, 7), (2, 3, 4)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name,shape,size", ADAPTIVE, ids=[f"{n}-{i}" for i, (n, s, o) in enumerate(ADAPTIVE)])
def test_adaptive_avg_pool_bits(name, shape, size, dtype):
    _assert_bits(lambda F, x: getattr(F, name)(x, size), shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("shape,size", [((2, 3, 17, 23), (8, 12)), ((1, 2, 7), 3), ((1, 1, 5, 6, 7), (2, 3, 4))])
def test_area_bits(shape, size, dtype):
    _assert_bits(lambda F, x: F.interpolate(x, size=size, mode="area"), shape, dtype)


AVG = [
    ("avg_pool2d", (2, 3, 17, 23), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d", (2, 3, 17, 23), dict(kernel_size=3, stride=1, padding=1, ceil_mode=True, count_include_pad=False)),
    ("avg_pool2d", (2, 3, 17, 23), dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
    ("avg_pool2d", (2, 3, 17, 23), dict(kernel_size=2)),
    ("avg_pool2d", (1, 2, 10, 11), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), ceil_mode=True)),
    ("avg_pool2d", (1, 2, 6, 7), dict(kernel_size=5, stride=3, padding=2, ceil_mode=True)),
    ("avg_pool2d", (3, 8, 8), dict(kernel_size=3, stride=2, count_include_pad=False, padding=1)),
    ("avg_pool1d", (2, 3, 17), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool1d", (2, 3, 16), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    ("avg_pool3d", (2, 2, 7, 9, 11), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool3d", (1, 2, 5, 6, 7), dict(kernel_size=(2, 3, 3), stride=2, padding=1, ceil_mode=True,
                                          count_include_pad=False)),
    ("avg_pool3d", (1, 2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, divisor_override=7)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name,shape,kw", AVG, ids=[f"{n}-{i}" for i, (n, s, k) in enumerate(AVG)])
def test_avg_pool_bits(name, shape, kw, dtype):
    _assert_bits(lambda F, x: getattr(F, name)(x, **kw), shape, dtype)


def test_grad_fn_names_are_pytorchs():
    for fn in (lambda F, x: F.interpolate(x, scale_factor=1.5, mode="bicubic"),
               lambda F, x: F.interpolate(x, size=(5, 6), mode="bilinear", antialias=True),
               lambda F, x: F.interpolate(x, size=(5, 6), mode="bicubic", antialias=True),
               lambda F, x: F.adaptive_avg_pool2d(x, (5, 6))):
        xt = torch.randn(1, 2, 9, 11, requires_grad=True)
        xl = tapelab.tensor(xt.detach().numpy(), requires_grad=True)
        assert type(fn(F_L, xl).grad_fn).__name__ == type(fn(F_T, xt).grad_fn).__name__


def _gradcheck(fn, shape):
    x = tapelab.randn(*shape, dtype=tapelab.float64, requires_grad=True)
    assert tapelab.autograd.gradcheck(fn, (x,))


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F_L.interpolate(x, scale_factor=1.5, mode="bicubic"), (1, 2, 4, 5)),
    (lambda x: F_L.interpolate(x, size=(3, 7), mode="bicubic", align_corners=True), (1, 1, 5, 4)),
    (lambda x: F_L.interpolate(x, size=(3, 4), mode="bilinear", antialias=True), (1, 2, 7, 9)),
    (lambda x: F_L.interpolate(x, size=(3, 11), mode="bicubic", antialias=True), (1, 1, 8, 6)),
    (lambda x: F_L.interpolate(x, size=(3, 5, 4), mode="trilinear"), (1, 1, 2, 3, 5)),
    (lambda x: F_L.adaptive_avg_pool2d(x, (3, 4)), (1, 2, 7, 9)),
    (lambda x: F_L.adaptive_avg_pool3d(x, (2, 3, 2)), (1, 1, 3, 5, 4)),
    (lambda x: F_L.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 2, 6, 7)),
], ids=["bicubic", "bicubic_align", "aa_bilinear", "aa_bicubic", "trilinear", "adaptive2d", "adaptive3d",
        "avg_pool2d"])
def test_gradcheck_float64(fn, shape):
    _gradcheck(fn, shape)


def test_double_backward_through_the_backward_ops():
    x = tapelab.randn(1, 1, 4, 5, dtype=tapelab.float64, requires_grad=True)
    for fn in (lambda t: F_L.interpolate(t, scale_factor=1.5, mode="bicubic").pow(2),
               lambda t: F_L.adaptive_avg_pool2d(t, (3, 2)).pow(2),
               lambda t: F_L.interpolate(t, size=(2, 3), mode="bilinear", antialias=True).pow(2)):
        assert tapelab.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("fn,shape", [
    (lambda F, x: F.interpolate(x, scale_factor=1.7, mode="bicubic"), (2, 3, 9, 11)),
    (lambda F, x: F.interpolate(x, size=(5, 6), mode="bicubic", antialias=True), (2, 3, 17, 13)),
    (lambda F, x: F.interpolate(x, size=(5, 6), mode="bilinear", antialias=True), (2, 3, 17, 13)),
    (lambda F, x: F.adaptive_avg_pool2d(x, (5, 6)), (2, 3, 17, 13)),
    (lambda F, x: F.adaptive_avg_pool3d(x, (2, 3, 4)), (1, 2, 5, 7, 9)),
    (lambda F, x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 17, 13)),
], ids=["bicubic", "aa_bicubic", "aa_bilinear", "adaptive2d", "adaptive3d", "avg_pool2d"])
def test_without_the_loops_within_rounding(fn, shape):
    kernels.set_enabled(False)
    got, want, ggot, gwant = _both(fn, shape, np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ggot, gwant, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name,shape,kw", [
    ("lp_pool2d", (2, 3, 17, 23), dict(norm_type=2, kernel_size=3, stride=2)),
    ("lp_pool2d", (1, 2, 9, 10), dict(norm_type=2, kernel_size=(2, 3), ceil_mode=True)),
    ("lp_pool1d", (2, 3, 17), dict(norm_type=2, kernel_size=3)),
], ids=["2d", "2d_ceil", "1d"])
def test_lp_pool_norm2_bits(name, shape, kw, dtype):
    """Power 2: the root is ATen's pow by 0.5, its sqrt kernel, and the gradient's pow by -0.5 its rsqrt."""
    _assert_bits(lambda F, x: getattr(F, name)(x, **kw), shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_by_half_and_minus_half_bits(dtype):
    _assert_bits(lambda F, x: x.abs().pow(0.5) + x.abs().pow(-0.5).detach(), (1000,), dtype)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F_L.interpolate(x, scale_factor=2.0, mode="bicubic"), (1, 2, 5, 6)),
    (lambda x: F_L.interpolate(x, size=(7, 4), mode="bicubic", align_corners=True), (1, 2, 5, 6)),
    (lambda x: F_L.interpolate(x, scale_factor=1.5, mode="trilinear"), (1, 2, 3, 4, 5)),
    (lambda x: F_L.interpolate(x, size=(3, 4), mode="bilinear", antialias=True), (1, 2, 9, 11)),
    (lambda x: F_L.interpolate(x, size=(3, 11), mode="bicubic", antialias=True), (1, 2, 9, 11)),
    (lambda x: F_L.adaptive_avg_pool2d(x, (4, 5)), (1, 2, 9, 11)),
    (lambda x: F_L.adaptive_avg_pool1d(x, 4), (1, 2, 11)),
    (lambda x: F_L.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (1, 2, 9, 11)),
], ids=["bicubic", "bicubic_size_align", "trilinear", "aa_bilinear", "aa_bicubic", "adaptive2d", "adaptive1d",
        "avg_pool2d"])
def test_onnx_export_runs_in_onnxruntime(fn, shape):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    x = tapelab.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    ex = tapelab.onnx.build(fn, (x,), input_names=["in0"], opset_version=17)
    onnx.checker.check_model(ex.model, full_check=True)
    got = tapelab.onnx.InferenceSession(ex.model, numpy=True)(x)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, fn(x).numpy(), rtol=1e-4, atol=1e-5)
