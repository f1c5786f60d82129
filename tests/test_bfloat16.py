"""tapelab.bfloat16 against torch.bfloat16: conversions bit for bit, promotion, arithmetic,
reductions, autograd, printing, finfo and checkpoints (tapelab's format and foreign files)."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import tapelab
from tapelab.base.backend import simulated_cuda


def _bits(t) -> np.ndarray:
    """The 16 stored bits of a bfloat16 tensor of either library (every NaN as one pattern: the
    payload PyTorch's vectorised and scalar paths give a NaN differs)."""
    if isinstance(t, torch.Tensor):
        bits, nan = t.view(torch.int16).numpy(), t.isnan().numpy()
    else:
        bits, nan = np.asarray(t).view(np.int16), t.isnan().numpy()
    return np.where(nan, -1, bits)


def _hard_values() -> np.ndarray:
    """Ties, values one float32 ulp from a tie, subnormals, overflow, nan and signed zero."""
    rng = np.random.default_rng(0)
    ties = (np.arange(0x3C00, 0x3C50, dtype=np.int32) << 16 | 0x8000).view(np.float32)
    ties = np.concatenate([ties, -ties])
    near = np.concatenate([np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    special = np.array([0.0, -0.0, 1e-40, -3e-39, 3.4e38, -3.39e38, np.inf, -np.inf, np.nan], np.float32)
    return np.concatenate([ties, near, special, rng.standard_normal(200).astype(np.float32) * 1e3])


@pytest.mark.parametrize("source", ["float32", "float64", "float16", "int64"])
def test_conversion_rounds_like_torch_bit_for_bit(source):
    x = _hard_values()
    if source == "float64":   # PyTorch rounds a double to float32 first: a value between two ties shows it
        x = np.concatenate([x.astype(np.float64), 1.0 + 2.0 ** -8 + 2.0 ** -30 * np.arange(1, 5)])
    elif source == "float16":
        x = x[np.isfinite(x) & (np.abs(x) < 6e4)].astype(np.float16)
    elif source == "int64":
        x = np.array([0, 1, -7, 255, 257, 16_777_217, -(2 ** 40) - 12345], np.int64)
    got = tapelab.from_numpy(x).to(tapelab.bfloat16)
    want = torch.from_numpy(x).to(torch.bfloat16)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    np.testing.assert_array_equal(_bits(got.float().bfloat16()), _bits(want))


def test_python_data_rounds_like_torch():
    data = [1.00390625 + 2 ** -30, 1.0 + 2 ** -8, 3.0000001, -2.5e-39, 1e39, 7]
    np.testing.assert_array_equal(_bits(tapelab.tensor(data, dtype=tapelab.bfloat16)),
                                  _bits(torch.tensor(data, dtype=torch.bfloat16)))


@pytest.mark.parametrize("other", ["float16", "float32", "float64", "int8", "int64", "uint8", "bool"])
def test_promotion_matches_torch(other):
    a, b = tapelab.ones(2, dtype=tapelab.bfloat16), tapelab.ones(2, dtype=getattr(tapelab, other))
    ta, tb = torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=getattr(torch, other))
    assert (a + b).dtype.name == str((ta + tb).dtype).split(".")[1]
    assert tapelab.promote_types(tapelab.bfloat16, b.dtype).name == \
        str(torch.promote_types(torch.bfloat16, tb.dtype)).split(".")[1]
    # 0-d and scalar operands do not widen a bfloat16 tensor
    assert (a * tapelab.tensor(2.5)).dtype is tapelab.bfloat16 and (a * 2.5).dtype is tapelab.bfloat16
    assert (a + 3).dtype is tapelab.bfloat16


def _pair(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tapelab.from_numpy(x).bfloat16(), torch.from_numpy(x).bfloat16()


@pytest.mark.parametrize("fn", [
    lambda m, a: m.exp(a), lambda m, a: m.tanh(a), lambda m, a: a / (a.abs() + 1), lambda m, a: m.sqrt(a.abs()),
    lambda m, a: a.relu() - a.neg(), lambda m, a: a * a - a,
])
def test_elementwise_matches_torch_bit_for_bit(fn):
    """One float32 computation rounded once, as PyTorch's CPU kernels do for bfloat16."""
    a, ta = _pair((5, 7))
    np.testing.assert_array_equal(_bits(fn(tapelab, a)), _bits(fn(torch, ta)))


@pytest.mark.parametrize("fn", [lambda m, a: a * 3.3 + a, lambda m, a: a.sigmoid(), lambda m, a: a ** 2.5])
def test_elementwise_within_one_rounding(fn):
    """A Python scalar is rounded to bfloat16 first and sigmoid rounds per step: one bfloat16 ulp."""
    a, ta = _pair((5, 7))
    got, want = fn(tapelab, a), fn(torch, ta)
    assert got.dtype is tapelab.bfloat16 and want.dtype == torch.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 ** -7, atol=1e-3)


@pytest.mark.parametrize("fn", [
    lambda a: a.sum(), lambda a: a.sum(1), lambda a: a.mean(0), lambda a: a.var(1), lambda a: a.std(),
    lambda a: a.norm(), lambda a: a.logsumexp(1), lambda a: a.cumsum(1), lambda a: a.amax(1),
])
def test_reductions_accumulate_in_float32(fn):
    """A long bfloat16 sum accumulated in bfloat16 would be off by far more than one rounding."""
    a, ta = _pair((4, 3000), seed=1)
    got, want = fn(a), fn(ta)
    assert got.dtype is tapelab.bfloat16 and want.dtype == torch.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 ** -7, atol=1e-6)


def test_matmul_and_linear_with_gradients():
    x = np.random.default_rng(2).standard_normal((6, 32)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32)
    grads = []
    for m in (tapelab, torch):
        xb = m.tensor(x, dtype=m.bfloat16, requires_grad=True)
        wf = m.tensor(w, requires_grad=True)           # a float32 parameter cast in the graph
        out = m.nn.functional.linear(xb, wf.bfloat16())
        assert out.dtype == m.bfloat16
        (out.float() ** 2).mean().backward()
        assert xb.grad.dtype == m.bfloat16 and wf.grad.dtype == m.float32
        grads.append((out.float().detach().numpy(), xb.grad.float().numpy(), wf.grad.numpy()))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-2)


def test_conv2d_matches_torch():
    x, tx = _pair((2, 3, 8, 8))
    w, tw = _pair((4, 3, 3, 3), seed=5)
    got, want = tapelab.nn.functional.conv2d(x, w, padding=1), torch.nn.functional.conv2d(tx, tw, padding=1)
    assert got.dtype is tapelab.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 ** -7, atol=1e-2)


def test_predicates_methods_and_printing():
    t = tapelab.tensor([1.5, -2.25, 1e-3])
    b = t.bfloat16()
    assert b.is_floating_point() and tapelab.is_floating_point(b) and b.is_signed()
    assert b.dtype.is_floating_point and b.dtype.itemsize == 2 and b.element_size() == 2
    assert t.to(tapelab.bfloat16).dtype is b.dtype is tapelab.bfloat16 and b.type() == "torch.BFloat16Tensor"
    assert tapelab.nn.Linear(2, 2).bfloat16().weight.dtype is tapelab.bfloat16
    want = repr(torch.tensor([1.5, -2.25, 1e-3]).bfloat16())
    assert repr(b).replace("tapelab.", "torch.") == want
    assert b.requires_grad_().requires_grad


def test_finfo_matches_torch():
    for name in ("bfloat16", "float16", "float32", "float64"):
        got, want = tapelab.finfo(getattr(tapelab, name)), torch.finfo(getattr(torch, name))
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(got, field) == getattr(want, field), (name, field)


def test_checkpoint_roundtrip_and_foreign_files(tmp_path):
    a, ta = _pair((3, 4))
    path = tmp_path / "bf16.safetensors"
    tapelab.save({"a": a, "p": tapelab.nn.Parameter(a.clone())}, path)
    back = tapelab.load(path)
    assert back["a"].dtype is tapelab.bfloat16 and back["p"].requires_grad
    np.testing.assert_array_equal(_bits(back["a"]), _bits(ta))
    from safetensors.torch import load, save
    np.testing.assert_array_equal(_bits(load(path.read_bytes())["a"]), _bits(ta))   # torch reads ours
    foreign = tapelab.load(io.BytesIO(save({"w": ta})))                             # we read torch's
    np.testing.assert_array_equal(_bits(foreign["w"]), _bits(ta))


def test_cuda_refuses_bfloat16_with_a_type_error():
    with simulated_cuda():
        with pytest.raises(TypeError, match="bfloat16"):
            tapelab.ones(2, dtype=tapelab.bfloat16).to("cuda")
        assert tapelab.ones(2, dtype=tapelab.bfloat16).float().to("cuda").dtype is tapelab.float32
        with pytest.raises(TypeError, match="cupy has no bfloat16"):
            tapelab.zeros(2, dtype=tapelab.bfloat16, device="cuda")


def test_legacy_constructor_like_torch():
    for m in (tapelab, torch):
        x = m.BFloat16Tensor([1.5, 2.0])
        assert x.dtype == m.bfloat16 and isinstance(x, m.BFloat16Tensor)
        assert not isinstance(m.ones(2), m.BFloat16Tensor) and x.type().endswith(".BFloat16Tensor")


def test_attention_stays_in_bfloat16_with_gradients():
    x = np.random.default_rng(7).standard_normal((2, 8, 16)).astype(np.float32)
    results = []
    for m in (tapelab, torch):
        a = m.tensor(x, requires_grad=True)
        b = a.bfloat16()
        y = m.nn.functional.scaled_dot_product_attention(b, b, b, is_causal=True)
        assert y.dtype == m.bfloat16
        (y.float() ** 2).sum().backward()
        results.append((y.float().detach().numpy(), a.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=2 ** -7, atol=1e-2)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "gelu_tanh", "sigmoid", "rsqrt", "softmax_backward",
                                  "gelu_tanh_backward", "sigmoid_backward"])
def test_reduced_precision_rows_computed_in_float32_as_pytorch(name):
    """PyTorch's CPU kernels compute bfloat16 softmax, layer_norm, gelu, sigmoid and rsqrt in float32 and round once;
    step-by-step bfloat16 arithmetic differed from it in 40-80% of the elements."""
    x = (np.random.default_rng(3).standard_normal((16, 32)) * 2).astype(np.float32)
    outs = []
    for m in (torch, tapelab):
        xb = m.tensor(x).to(m.bfloat16).requires_grad_(name.endswith("backward"))
        f = {"softmax": lambda t: m.softmax(t, -1), "layer_norm": lambda t: m.nn.functional.layer_norm(t, (32,)),
             "gelu_tanh": lambda t: m.nn.functional.gelu(t, approximate="tanh"), "sigmoid": m.sigmoid,
             "rsqrt": lambda t: (t.abs() + 0.25).rsqrt()}[name.split("_backward")[0]]
        y = f(xb)
        if name.endswith("backward"):
            (y * m.linspace(-1, 1, 32).to(m.bfloat16)).sum().backward()
            y = xb.grad
        assert y.dtype == m.bfloat16
        outs.append(y.float().detach().numpy())
    assert (outs[0] != outs[1]).mean() <= 0.02, (outs[0] != outs[1]).mean()


@pytest.mark.parametrize("name", ["mul", "rmul", "div", "mul_", "add", "rsub", "add_"])
def test_bfloat16_with_a_python_float_rounds_as_pytorch(name):
    """PyTorch multiplies and divides a bfloat16 tensor by a Python float kept in float32 and rounds the
    result once (numpy rounded the number to bfloat16 first: 38% of ``x * 3.4445`` differed by one
    unit); it adds and subtracts the number rounded to bfloat16, as numpy does."""
    x = (np.random.default_rng(5).standard_normal(4096) * 3).astype(np.float32)
    f = {"mul": lambda t: t * 3.4445, "rmul": lambda t: 0.3371 * t, "div": lambda t: t / 3.3,
         "mul_": lambda t: t.clone().mul_(1.2345), "add": lambda t: t + 0.1234, "rsub": lambda t: 1.777 - t,
         "add_": lambda t: t.clone().add_(0.377)}[name]
    outs = []
    for m in (torch, tapelab):
        y = f(m.tensor(x).to(m.bfloat16))
        assert y.dtype == m.bfloat16
        outs.append(y.float().numpy())
    assert (outs[0] != outs[1]).mean() <= 0.011
