"""Gaps found in session 25 (helper s25b) running researchers' own programs (diffusion, self-supervised and
metric learning, selective-scan/RWKV/TCN/CTC sequence models, bf16 autocast with schedulers, SWA and
checkpoint resume) step by step under PyTorch and tapelab; each pattern written here directly and checked
against PyTorch bit for bit."""
import numpy as np
import pytest
import torch

import tapelab

_RNG = np.random.default_rng(25)
_X = _RNG.standard_normal((3, 5, 7, 6)).astype(np.float32)

_POOLS = {
    "avg_pool2d": lambda m, t: m.nn.functional.avg_pool2d(t, 2),
    "avg_pool2d_overlap_nopad_count": lambda m, t: m.nn.functional.avg_pool2d(t, 3, 1, 1, count_include_pad=False),
    "avg_pool2d_divisor": lambda m, t: m.nn.functional.avg_pool2d(t, 3, 2, 1, divisor_override=5),
    "avg_pool2d_ceil": lambda m, t: m.nn.functional.avg_pool2d(t, 2, ceil_mode=True),
    "avg_pool1d": lambda m, t: m.nn.functional.avg_pool1d(t.flatten(2), 4),
    "avg_pool1d_overlap": lambda m, t: m.nn.functional.avg_pool1d(t.flatten(2), 3, 2, 1),
    "adaptive2d_tiles": lambda m, t: m.nn.functional.adaptive_avg_pool2d(t[..., :6, :], (2, 2)),
    "adaptive2d_uneven": lambda m, t: m.nn.functional.adaptive_avg_pool2d(t, (4, 5)),
    "adaptive2d_module": lambda m, t: m.nn.AdaptiveAvgPool2d((3, None))(t),
    "adaptive1d": lambda m, t: m.nn.functional.adaptive_avg_pool1d(t.flatten(2), 5),
    "area": lambda m, t: m.nn.functional.interpolate(t, size=(4, 4), mode="area"),
    "area1d": lambda m, t: m.nn.functional.interpolate(t.flatten(2), size=9, mode="area"),
    "channels_last": lambda m, t: m.nn.functional.adaptive_avg_pool2d(t.contiguous(memory_format=m.channels_last), 2),
    "channels_last_avg": lambda m, t: m.nn.functional.avg_pool2d(t.contiguous(memory_format=m.channels_last), 3, 2),
}


def _pool(m, name, dtype, backward):
    x = m.tensor(_X).to(getattr(m, dtype)).requires_grad_(backward)
    y = _POOLS[name](m, x)
    if not backward:
        return str(y.dtype).split(".")[-1], y.detach().float().numpy()
    g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(m.tensor(g).to(y.dtype))
    return str(x.grad.dtype).split(".")[-1], x.grad.float().numpy()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_POOLS))
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_reduced_precision_average_pooling_is_torchs_bit_for_bit(name, dtype, backward):
    """A bf16 CNN under ``torch.amp.autocast("cpu", dtype=torch.bfloat16)`` pooled its features with
    ``AdaptiveAvgPool2d`` and its loss differed from the first step: ATen sums each window in float32 and
    rounds the mean once (numpy's half ufuncs rounded every add), and its backward divides (rounding after
    each division by an extent) and adds window by window in the dtype, where overlapping windows' sums
    depend on that order."""
    t = _pool(torch, name, dtype, backward)
    lab = _pool(tapelab, name, dtype, backward)
    assert t[0] == lab[0]
    np.testing.assert_array_equal(lab[1], t[1])


@pytest.mark.parametrize("cols", [1, 3, 7, 8, 16, 20, 64, 127, 128, 129, 300, 768, 1000, 2049, 4096])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_float32_forward_is_torchs_bit_for_bit(cols, affine):
    """Every transformer program drifted from PyTorch from its first LayerNorm (BYOL's projector: 1706 of
    4096 outputs an ulp off): ATen's mean and variance come from its vectorised Welford (8 lanes of
    16-vector chunks merged through a cascade, then the leftover columns and the lanes merged in a scalar
    Welford) and its output is ``fma((x - mean) * rstd, weight, bias)``; tapelab took two plain passes."""
    x = (np.random.default_rng(cols).standard_normal((9, cols)) * 3 + 0.5).astype(np.float32)
    w = np.random.default_rng(1).standard_normal(cols).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(cols).astype(np.float32)
    outs = []
    for m in (torch, tapelab):
        weight = m.tensor(w) if affine in ("both", "weight") else None
        bias = m.tensor(b) if affine in ("both", "bias") else None
        outs.append(m.nn.functional.layer_norm(m.tensor(x), (cols,), weight, bias, eps=1e-5).numpy())
    np.testing.assert_array_equal(outs[1], outs[0])


def test_layer_norm_module_on_3d_input_and_scaled_rows():
    """``nn.LayerNorm`` over the last dim of a (batch, seq, dim) activation with large offsets (where a
    naive two-pass variance and Welford part most) gives PyTorch's numbers exactly."""
    x = (np.random.default_rng(3).standard_normal((2, 5, 96)) * 0.01 + 40).astype(np.float32)
    outs = []
    for m in (torch, tapelab):
        m.manual_seed(0)
        ln = m.nn.LayerNorm(96)
        with m.no_grad():
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-1, 1)
        outs.append(ln(m.tensor(x)).detach().numpy())
    np.testing.assert_array_equal(outs[1], outs[0])


@pytest.fixture
def one_thread():
    """ATen's layer-norm backward splits the rows among its threads for the weight's and bias's gradients
    (one buffer per thread, summed at the end), and tapelab's follows the same cut: both on one."""
    torch.set_num_threads(1)
    tapelab.set_num_threads(1)


@pytest.mark.parametrize("cols", [1, 5, 8, 20, 64, 300, 768, 1029])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_float32_backward_is_torchs_bit_for_bit(cols, affine, one_thread):
    """The gradients of a float32 layer norm as ATen's kernel rounds them: the input's
    ``fma(b, x, a g w) + c`` from lane-ordered sums of ``g x w`` and ``g w``, the weight's
    ``fma(g, fma(a, x, -a mean), acc)`` row after row."""
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((11, cols)) * 2 + 0.3).astype(np.float32)
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    g = rng.standard_normal((11, cols)).astype(np.float32)
    outs = []
    for m in (torch, tapelab):
        xt = m.tensor(x, requires_grad=True)
        weight = m.tensor(w, requires_grad=True) if affine in ("both", "weight") else None
        bias = m.tensor(b, requires_grad=True) if affine in ("both", "bias") else None
        m.nn.functional.layer_norm(xt, (cols,), weight, bias).backward(m.tensor(g))
        outs.append([t.grad.numpy() for t in (xt, weight, bias) if t is not None])
    for t, lab in zip(*outs):
        np.testing.assert_array_equal(lab, t)


_NORM_CALLS = {
    "normalize": lambda m, t: m.nn.functional.normalize(t, dim=-1),
    "norm_dim": lambda m, t: t.norm(dim=1),
    "norm_keepdim": lambda m, t: t.norm(p=2, dim=-1, keepdim=True),
    "vector_norm_all": lambda m, t: m.linalg.vector_norm(t),
    "linalg_norm": lambda m, t: m.linalg.norm(t, dim=-1),
    "torch_norm_middle": lambda m, t: m.norm(t, dim=1),
}


@pytest.mark.parametrize("name", sorted(_NORM_CALLS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_two_norm_backward_rounds_as_aten(name, dtype):
    """BYOL's loss normalises the predictions (``F.normalize``): every gradient below it was an ulp off in
    a third of its entries, tapelab's 2-norm vjp computing ``(g * x) * (1 / norm)`` where ATen's
    ``norm_backward`` computes ``g * (x / norm)`` (zero where the norm is)."""
    x = np.random.default_rng(4).standard_normal((3, 6, 5)).astype(dtype)
    x[1, 2] = 0   # a zero row: the masked branch
    outs = []
    for m in (torch, tapelab):
        t = m.tensor(x, requires_grad=True)
        y = _NORM_CALLS[name](m, t)
        y.backward(m.tensor(np.random.default_rng(5).standard_normal(tuple(y.shape)).astype(dtype)))
        outs.append((y.detach().numpy(), t.grad.numpy()))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    np.testing.assert_array_equal(outs[1][1], outs[0][1])


@pytest.mark.parametrize("ord", [0.5, 1, 1.5, 3, 4])
@pytest.mark.parametrize("keepdim", [False, True])
def test_p_norm_backward_as_aten(ord, keepdim):
    """The other finite orders follow ``norm_backward``'s formulas (values, and zeros where x or the norm is)."""
    x = np.random.default_rng(6).standard_normal((4, 7))
    x[0, 3] = 0
    x[2] = 0
    outs = []
    for m in (torch, tapelab):
        t = m.tensor(x, requires_grad=True)
        y = m.linalg.vector_norm(t, ord, dim=1, keepdim=keepdim)
        y.backward(m.tensor(np.linspace(-1, 2, 4).reshape(y.shape)))
        outs.append(t.grad.numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-13, atol=0)


@pytest.mark.parametrize("cols", [8, 24, 300])
@pytest.mark.parametrize("affine", ["both", "weight", "bias"])
@pytest.mark.parametrize("params", ["bfloat16", "float32"])
def test_bfloat16_layer_norm_parameter_grads_accumulate_in_bfloat16(cols, affine, params, one_thread):
    """A ``model.bfloat16()`` transformer's LayerNorm weight and bias gradients, and those of float32
    parameters over a bfloat16 activation (CPU autocast): ATen accumulates them row by row in bfloat16
    buffers, each partial sum rounded (tapelab summed in float32 and rounded once: 34 of 64 weight
    gradients differed; the float32 parameters' gradients differed by up to 0.17)."""
    if params == "float32" and affine == "bias":
        pytest.skip("PyTorch's backward refuses a float32 bias alone over bfloat16 (expected scalar type BFloat16)")
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((16, cols)).astype(np.float32)
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    g = rng.standard_normal((16, cols)).astype(np.float32)
    outs = []
    for m in (torch, tapelab):
        xt = m.tensor(x).bfloat16().requires_grad_()
        weight = m.tensor(w).to(getattr(m, params)).requires_grad_() if affine != "bias" else None
        bias = m.tensor(b).to(getattr(m, params)).requires_grad_() if affine != "weight" else None
        m.nn.functional.layer_norm(xt, (cols,), weight, bias).backward(m.tensor(g).bfloat16())
        outs.append([(str(t.grad.dtype).split(".")[-1], t.grad.float().numpy()) for t in (weight, bias)
                     if t is not None])
    for (dt, t), (dl, lab) in zip(*outs):
        assert dt == dl
        np.testing.assert_array_equal(lab, t)


@pytest.mark.parametrize("shape", [(4, 16, 5, 5), (6, 8), (3, 4, 10)])
@pytest.mark.parametrize("affine", [True, False])
def test_bfloat16_batch_norm_eval_is_torchs(shape, affine):
    """``model.bfloat16().eval()``: ATen's inference batch norm computes ``alpha = w / sqrt(rv + eps)`` and
    ``beta = b - rm alpha`` in float32 and rounds ``x alpha + beta`` once; numpy's bfloat16 ufuncs rounded
    every step (a third of the outputs differed, by up to 8 ulps)."""
    rng = np.random.default_rng(len(shape))
    c = shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    rm, rv = rng.standard_normal(c).astype(np.float32), rng.uniform(0.5, 2, c).astype(np.float32)
    outs = []
    for m in (torch, tapelab):
        bf = m.bfloat16
        y = m.nn.functional.batch_norm(m.tensor(x).to(bf), m.tensor(rm).to(bf), m.tensor(rv).to(bf),
                                       m.tensor(w).to(bf) if affine else None, m.tensor(b).to(bf) if affine else None,
                                       training=False)
        outs.append((str(y.dtype).split(".")[-1], y.float().numpy()))
    assert outs[0][0] == outs[1][0]
    np.testing.assert_array_equal(outs[1][1], outs[0][1])


@pytest.mark.parametrize("shape,normalized", [((5, 7, 300), (300,)), ((4, 6, 20), (6, 20)), ((9, 3), (3,))])
def test_native_layer_norm_statistics_are_the_forwards_and_not_differentiable(shape, normalized):
    """``torch.native_layer_norm``'s saved mean and 1/std are the kernel's own (ATen's Welford moments, bit
    for bit) and, as PyTorch declares them, not differentiable outputs (tapelab's came from separate mean
    and var ops, an ulp off, and required grad)."""
    x = (np.random.default_rng(7).standard_normal(shape) * 3 + 1).astype(np.float32)
    outs = []
    for m in (torch, tapelab):
        y, mean, rstd = m.native_layer_norm(m.tensor(x, requires_grad=True), normalized, None, None, 1e-5)
        outs.append([(t.requires_grad, tuple(t.shape), t.detach().numpy()) for t in (y, mean, rstd)])
    for (rt, st, t), (rl, sl, lab) in zip(*outs):
        assert (rt, st) == (rl, sl)
        np.testing.assert_array_equal(lab, t)
