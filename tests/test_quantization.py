"""Quantization against PyTorch: fake quantization ops (values, straight-through gradients, node names, errors)
and the fused observer + fake-quant op that ``get_default_qat_qconfig`` modules run."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

_SPECIAL = [0.25, 0.35, -0.25, 1e9, -1e9, 1e30, float("nan"), float("inf"), -float("inf")]


def _pair(x: torch.Tensor):
    """A torch leaf and a tapelab leaf with the same values, both requiring grad."""
    return (x.detach().clone().requires_grad_(),
            tapelab.tensor(x.detach().float().numpy()).to(getattr(tapelab, str(x.dtype)[6:])).requires_grad_())


def _np(t) -> np.ndarray:
    return t.detach().float().numpy()


def _same(a, b) -> bool:
    return np.array_equal(_np(a), _np(b), equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("scale,zero_point,qmin,qmax", [(0.1, 3, 0, 255), (0.0123, -5, -128, 127), (1 / 3, 7, 0, 15)])
def test_fake_quantize_per_tensor_bitwise(dtype, scale, zero_point, qmin, qmax):
    """QAT's fake quant: torch rounds nearbyint(x * float32(1/scale)) + zero_point (ties to even), clamps as a
    float (inf to the bounds, NaN to quant_min) and multiplies back in float32; the gradient is the mask."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(4000) * 3, torch.arange(-300, 300) * 0.05, torch.tensor(_SPECIAL)]).to(
        getattr(torch, dtype))
    g = torch.randn(x.shape).to(x.dtype)
    for make in (lambda T: (scale, zero_point), lambda T: (T.tensor([scale]), T.tensor([zero_point], dtype=T.int32))):
        xt, xl = _pair(x)
        yt = torch.fake_quantize_per_tensor_affine(xt, *make(torch), qmin, qmax)
        yl = tapelab.fake_quantize_per_tensor_affine(xl, *make(tapelab), qmin, qmax)
        yt.backward(g)
        yl.backward(tapelab.tensor(g.float().numpy()).to(yl.dtype))
        assert yl.dtype == getattr(tapelab, dtype) and _same(yt, yl) and _same(xt.grad, xl.grad)
        assert yl.grad_fn.name() == yt.grad_fn.name()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("zp_dtype", ["int32", "float32", "float16"])
def test_fake_quantize_per_channel_bitwise(dtype, zp_dtype):
    """Per-channel fake quant: torch's code goes through int64 (non-finite values become quant_min, masked), a
    float zero point is added before rounding, and the product is taken in double."""
    torch.manual_seed(0)
    x = torch.randn(6, 5, 40) * 3
    x[0, 0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e30])
    scale = torch.rand(5) * 0.1 + 0.01
    zp = (torch.randint(0, 20, (5,)) if zp_dtype == "int32" else torch.rand(5) * 20).to(getattr(torch, zp_dtype))
    xt, xl = _pair(x.to(getattr(torch, dtype)))
    yt = torch.fake_quantize_per_channel_affine(xt, scale, zp, 1, 0, 255)
    yl = tapelab.fake_quantize_per_channel_affine(xl, tapelab.tensor(scale.numpy()), tapelab.tensor(zp.numpy()),
                                                  1, 0, 255)
    (yt * yt.detach()).sum().backward()
    (yl * yl.detach()).sum().backward()
    assert _same(yt, yl) and _same(xt.grad, xl.grad) and yl.grad_fn.name() == yt.grad_fn.name()


def test_fake_quantize_double_backward():
    """The backward (grad * mask) is differentiable in grad, as torch's cachemask backward is."""
    x = torch.tensor([-3.0, 0.04, 0.5, 30.0], requires_grad=True)
    xl = tapelab.tensor(x.detach().numpy(), requires_grad=True)
    outs = []
    for T, v in ((torch, x), (tapelab, xl)):
        y = T.fake_quantize_per_tensor_affine(v, 0.1, 3, 0, 255)
        (g,) = T.autograd.grad((y * y).sum(), v, create_graph=True)
        (gg,) = T.autograd.grad(g.sum(), v)
        outs.append((g, gg))
    assert _same(outs[0][0], outs[1][0]) and _same(outs[0][1], outs[1][1])


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type and message are what is compared)
        return type(e).__name__, str(e).split("\n")[0]
    return None


@pytest.mark.parametrize("call", [
    lambda T, x: T.fake_quantize_per_tensor_affine(x.int(), 0.1, 0, 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 2),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, 0.1, 0.5, 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, T.tensor([0.1, 0.2]), T.tensor([1, 2], dtype=T.int32), 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, T.tensor([0.1], requires_grad=True),
                                                   T.tensor([3], dtype=T.int32), 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x.int(), T.ones(3), T.zeros(3, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(3, dtype=T.int32), 1, 5, 2),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.full((3,), 300, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(2, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3, 1), T.zeros(3, 1, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(3, dtype=T.int32), -1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(2), T.zeros(2, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3).double(), T.zeros(3, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(3, dtype=T.int64), 1, 0, 255),
])
def test_fake_quantize_errors(call):
    """Bad dtypes, ranges and shapes raise torch's exception types and messages."""
    expected = _error(lambda: call(torch, torch.ones(2, 3)))
    assert expected is not None
    assert _error(lambda: call(tapelab, tapelab.ones(2, 3))) == expected


def _fused_buffers(T, per_row: bool):
    empty = (T.tensor([]), T.tensor([])) if per_row else (T.tensor(float("inf")), T.tensor(float("-inf")))
    return (T.tensor([1]), T.tensor([1]), *empty, T.tensor([1.0]), T.tensor([0], dtype=T.int32))


@pytest.mark.parametrize("per_row,symmetric,qmin,qmax", [(False, False, 0, 127), (False, True, -128, 127),
                                                          (True, True, -128, 127), (True, False, 0, 255)])
def test_fused_moving_avg_obs_fake_quant(per_row, symmetric, qmin, qmax):
    """FusedMovingAvgObsFakeQuantize's op (get_default_qat_qconfig's): running min/max, ATen's
    ChooseQuantizationParams (small scales cut off at 6.1e-5), the fake quant and its node, step after step."""
    bt, bl = _fused_buffers(torch, per_row), _fused_buffers(tapelab, per_row)
    torch.manual_seed(1)
    for step in range(4):
        x = torch.rand(4, 7) * 1e-6 if step == 3 else torch.randn(4, 7) * (step + 1) + 0.3 * step
        xt, xl = _pair(x)
        yt = torch.fused_moving_avg_obs_fake_quant(xt, *bt, 0.01, qmin, qmax, 0, per_row, symmetric)
        yl = tapelab.fused_moving_avg_obs_fake_quant(xl, *bl, 0.01, qmin, qmax, 0, per_row, symmetric)
        yt.sum().backward()
        yl.sum().backward()
        for a, b in zip(bt + (yt, xt.grad), bl + (yl, xl.grad)):
            assert a.dtype is getattr(torch, str(b.dtype)[8:]) and _same(a, b)
        assert yl.grad_fn.name() == yt.grad_fn.name()
    bt[1][0] = bl[1][0] = 0   # fake quant off: the input passes through
    assert _same(torch.fused_moving_avg_obs_fake_quant(xt, *bt, 0.01, qmin, qmax, 0, per_row, symmetric),
                 tapelab.fused_moving_avg_obs_fake_quant(xl, *bl, 0.01, qmin, qmax, 0, per_row, symmetric))
