"""Gaps found by running LLM-from-scratch programs unchanged under ``install_aliases()`` and diffing
what they print against real torch: rasbt's LLMs-from-scratch (chapters 2-7, appendices D and E,
the KV-cache, GQA/MLA/SWA/MoE and Llama 3 / Qwen3 / Gemma 3 bonus code), karpathy's llama2.c,
build-nanogpt and llm.c's PyTorch reference, each with a tiny config. Each test states the
behaviour on its own, with both torch and tapelab imported, and compares real values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels


# ---------------------------------------------------------------- 2-norm summation order
# appendix D and build-nanogpt print clip_grad_norm_'s result; ATen sums a contiguous last dim in
# eight float32 (four float64) lanes, which numpy's pairwise sum and BLAS's dot round differently
# over a 50257x16 embedding gradient (the fifth digit of the printed norm). The order is the numba
# loop's (kernels/vecnorm.py); with the loops off numpy's sum stays within float32 rounding.
_LOOPS = pytest.mark.skipif(not kernels.enabled(), reason="ATen's order is a numba loop here")


@_LOOPS
@pytest.mark.parametrize("n", [1, 3, 4, 7, 8, 13, 15, 1001, 50257 * 16 + 3])
def test_vector_norm_sums_in_atens_lanes(n):
    a = (np.random.default_rng(n).standard_normal(n) * 0.05).astype(np.float32)
    want = torch.linalg.vector_norm(torch.tensor(a)).item()
    assert tapelab.linalg.vector_norm(tapelab.tensor(a)).item() == want
    assert tapelab.tensor(a).norm().item() == want
    assert tapelab.norm(tapelab.tensor(a).reshape(1, -1), dim=-1).item() == want


@_LOOPS
def test_vector_norm_random_lengths_bit_equal_to_torch():
    rng = np.random.default_rng(7)
    for _ in range(300):
        a = (rng.standard_normal(int(rng.integers(1, 3000))) * rng.uniform(0.01, 3)).astype(np.float32)
        assert tapelab.linalg.vector_norm(tapelab.tensor(a)).item() == torch.linalg.vector_norm(torch.tensor(a)).item()


@_LOOPS
@pytest.mark.parametrize("dim, keepdim", [(-1, False), ((1, 2), True), (None, False), ((0, 1), False), (0, True)])
def test_vector_norm_over_dims_matches_torch_bitwise(dim, keepdim):
    a = np.random.default_rng(0).standard_normal((5, 3, 1001)).astype(np.float32)
    want = torch.linalg.vector_norm(torch.tensor(a), dim=dim, keepdim=keepdim)
    got = tapelab.linalg.vector_norm(tapelab.tensor(a), dim=dim, keepdim=keepdim)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("loops", [pytest.param(True, marks=_LOOPS), False])
def test_clip_grad_norm_total_matches_torch_bitwise(loops):
    rng = np.random.default_rng(0)
    arrays = [(rng.standard_normal(s) * 0.05).astype(np.float32)
              for s in [(50257, 16), (48, 16), (16,), (64, 16), (16, 64), (2, 16)]]
    results = []
    kernels.set_enabled(loops)
    for lib in (torch, tapelab):
        params = [lib.nn.Parameter(lib.tensor(a)) for a in arrays]
        for p, a in zip(params, arrays):
            p.grad = lib.tensor(a)
        total = lib.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        results.append((total.item(), [p.grad.numpy().copy() for p in params]))
    (want, want_grads), (got, got_grads) = results
    if loops:
        assert got == want
        for g, w in zip(got_grads, want_grads):
            np.testing.assert_array_equal(g, w)
    else:   # numpy's sums without the loops: float32 rounding
        assert got == pytest.approx(want, rel=1e-5)


def test_vector_norm_backward_unchanged():
    a = np.random.default_rng(1).standard_normal((4, 33)).astype(np.float32)
    x, y = torch.tensor(a, requires_grad=True), tapelab.tensor(a, requires_grad=True)
    torch.linalg.vector_norm(x, dim=-1).sum().backward()
    tapelab.linalg.vector_norm(y, dim=-1).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), x.grad.numpy(), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- reduced-precision arithmetic
# The bonus GQA/MLA/SWA/MoE scripts run their GPT in bfloat16, whose GELU is
# 0.5 * x * (1 + tanh(c * (x + 0.044715 * torch.pow(x, 3)))): ATen's pow by 3 is x*x*x with each
# product rounded, so a single-rounded power changed the greedy tokens after a few steps.
def _bits_equal(got, want):
    g, w = got.detach().double().numpy(), want.detach().double().numpy()
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(g[~np.isnan(g)], w[~np.isnan(w)])


_VALUES = (np.random.default_rng(3).standard_normal(20000) * 3).astype(np.float32)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("exponent", [2, 3, -2, 3.0, -1])
def test_pow_by_small_integers_rounds_as_atens_products(dtype, exponent):
    want = torch.pow(torch.tensor(_VALUES).to(getattr(torch, dtype)), exponent)
    x = tapelab.tensor(_VALUES).to(getattr(tapelab, dtype))
    _bits_equal(tapelab.pow(x, exponent), want)
    _bits_equal(x ** exponent, want)


def test_pow_by_three_gradient_matches_torch():
    a = _VALUES[:50]
    x, y = torch.tensor(a, requires_grad=True), tapelab.tensor(a, requires_grad=True)
    torch.pow(x, 3).sum().backward()
    tapelab.pow(y, 3).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), x.grad.numpy(), rtol=1e-6)


# A float16 tensor times or over a Python float keeps the number in float32 (ATen's opmath), as
# bfloat16 already did; numpy's weak scalar rounded it to float16 first.
@pytest.mark.parametrize("form", ["x * 0.3", "0.044715 * x", "x / 3.7", "torch.mul(x, 0.3)", "torch.div(x, 3.7)",
                                  "x + 0.3", "x - 0.3"])
def test_float16_tensor_and_python_float_round_once(form):
    want = eval(form, {"torch": torch, "x": torch.tensor(_VALUES).half()})
    got = eval(form, {"torch": tapelab, "x": tapelab.tensor(_VALUES).half()})
    assert got.dtype == tapelab.float16
    _bits_equal(got, want)


# PyTorch's Tensor.__rtruediv__ is self.reciprocal() * other: two roundings, and the graph of a
# MulBackward0 over a ReciprocalBackward0.
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_number_over_tensor_is_reciprocal_times_number(dtype):
    want = 0.3 / torch.tensor(_VALUES).to(getattr(torch, dtype))
    _bits_equal(0.3 / tapelab.tensor(_VALUES).to(getattr(tapelab, dtype)), want)


def test_number_over_tensor_graph_and_gradient_match_torch():
    a = np.array([2.0, -3.0, 0.5], np.float32)
    x, y = torch.tensor(a, requires_grad=True), tapelab.tensor(a, requires_grad=True)
    tx, ty = 1.5 / x, 1.5 / y
    assert ty.grad_fn.name() == tx.grad_fn.name() == "MulBackward0"
    assert ty.grad_fn.next_functions[0][0].name() == tx.grad_fn.next_functions[0][0].name()
    tx.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), x.grad.numpy(), rtol=1e-6)
    assert (1 / tapelab.tensor([2, 4])).tolist() == (1 / torch.tensor([2, 4])).tolist()


# The Llama 3 / Qwen3 from-scratch models run in bfloat16: nn.RMSNorm and the SwiGLU's SiLU compute
# in float32 and round once in ATen (RMSNorm's default eps is float32's), where a chain of bfloat16
# ops rounded at each step and the greedy tokens drifted after a few steps.
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("eps", [1e-5, None])
@pytest.mark.parametrize("weight", [True, False])
def test_rms_norm_reduced_precision_rounds_once(dtype, eps, weight):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((64, 64)).astype(np.float32), (1 + 0.1 * rng.standard_normal(64)).astype(np.float32)
    outs = []
    for lib in (torch, tapelab):
        dt = getattr(lib, dtype)
        norm = lib.nn.RMSNorm(64, eps=eps, elementwise_affine=weight, dtype=dt)
        if weight:
            with lib.no_grad():
                norm.weight.copy_(lib.tensor(w))
        outs.append(norm(lib.tensor(x).to(dt)))
    assert outs[1].dtype == getattr(tapelab, dtype)
    _bits_equal(outs[1], outs[0])


@pytest.mark.parametrize("name", ["silu", "mish", "softplus", "elu", "selu", "celu", "hardswish", "leaky_relu"])
def test_composite_activations_in_bfloat16_round_once(name):
    want = getattr(torch.nn.functional, name)(torch.tensor(_VALUES).bfloat16())
    x = tapelab.tensor(_VALUES).bfloat16()
    got = getattr(tapelab.nn.functional, name)(x)
    assert got.dtype == tapelab.bfloat16
    _bits_equal(got, want)
    if name in ("silu", "mish", "elu", "hardswish", "leaky_relu"):
        y = x.clone()
        getattr(tapelab.nn.functional, name)(y, inplace=True)
        _bits_equal(y, want)


def test_silu_bfloat16_gradient_flows_in_bfloat16():
    a = _VALUES[:64]
    x, y = torch.tensor(a).bfloat16().requires_grad_(), tapelab.tensor(a).bfloat16().requires_grad_()
    torch.nn.functional.silu(x).float().sum().backward()
    tapelab.nn.functional.silu(y).float().sum().backward()
    assert y.grad.dtype == tapelab.bfloat16
    np.testing.assert_allclose(y.grad.float().numpy(), x.grad.float().numpy(), atol=1e-2)


# build-nanogpt samples with topk(softmax(bf16 logits), 50): tied probabilities come out of ATen's
# std::partial_sort (k * 64 <= n) in its heap's order, not by position, and multinomial then picks
# a different token.
@_LOOPS
@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_in_partial_sort_order(largest):
    rng = np.random.default_rng(0)
    for trial in range(60):
        n = int(rng.integers(64, 3000))
        k = int(rng.integers(1, n // 64 + 1))
        a = rng.integers(0, int(rng.integers(2, 20)), (3, n)).astype(np.float32)
        if trial % 7 == 0:
            a[0, rng.integers(0, n, 5)] = np.nan
        want = torch.topk(torch.tensor(a), k, largest=largest)
        got = tapelab.topk(tapelab.tensor(a), k, largest=largest)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        _bits_equal(got.values, want.values)


@_LOOPS
def test_topk_of_bfloat16_probabilities_matches_torch():
    a = (np.random.default_rng(0).standard_normal((4, 50304)) * 0.05).astype(np.float32)
    want = torch.topk(torch.softmax(torch.tensor(a).bfloat16(), -1), 50, dim=-1)
    got = tapelab.topk(tapelab.softmax(tapelab.tensor(a).bfloat16(), -1), 50, dim=-1)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    a3 = np.random.default_rng(1).integers(0, 3, (2, 200, 5)).astype(np.float32)
    want = torch.topk(torch.tensor(a3), 3, dim=1)
    got = tapelab.topk(tapelab.tensor(a3), 3, dim=1)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
