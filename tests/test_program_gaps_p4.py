"""Gaps found by running programs on diffusers, torchmetrics, accelerate, torchdiffeq, pyro/gpytorch,
kornia and transformers' Trainer unchanged under ``install_aliases()``: the torch API call sequence
each library uses, exercised directly and compared with real torch (none of those libraries is
imported here)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tapelab


def _same(ours, theirs) -> None:
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    if ours.dtype == tapelab.bfloat16:
        ours, theirs = ours.float(), theirs.float()
    np.testing.assert_array_equal(ours.detach().cpu().numpy(), theirs.detach().cpu().numpy())


# ---------------------------------------------------------------- diffusers' schedulers: CPU scans in double
def test_alphas_cumprod_and_euler_step_match_torch_bitwise():
    """diffusers builds ``alphas_cumprod = cumprod(1 - betas)`` in float32; PyTorch's CPU scan runs in
    double, so a float32 running product was ulps off, and Euler's v-prediction step (``sample +
    derivative * dt`` cancels all but 0.15% of ``sample``) amplified that to 5e-5 of the sample."""
    betas = [min(1 - math.cos((i + 1.008) / 1.008 * math.pi / 2) ** 2 / math.cos((i + 0.008) / 1.008 * math.pi / 2) ** 2,
                 0.999) for i in range(100)]
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    results = []
    for m in (tapelab, torch):
        alphas_cumprod = m.cumprod(1.0 - m.tensor(betas, dtype=m.float32), dim=0)
        sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
        sigma, nxt = sigmas[-1], sigmas[50]
        sample = m.tensor(x) * (sigma ** 2 + 1) ** 0.5
        eps = m.tanh(sample / (sigma ** 2 + 1) ** 0.5 * 0.3)
        pred = eps * (-sigma / (sigma ** 2 + 1) ** 0.5) + sample / (sigma ** 2 + 1)
        results.append((alphas_cumprod, sample + (sample - pred) / sigma * (nxt - sigma)))
    for ours, theirs in zip(*results):
        _same(ours, theirs)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "complex64"])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_round_a_double_accumulator_like_torch_cpu(dt, op):
    """Long scans and their gradients, bitwise against torch: float32 and complex64 accumulate in
    double, float16 and bfloat16 in float32 (tapelab has no complex cumprod gradient)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((400, 3))
    if dt == "complex64":
        a = a + 1j * rng.standard_normal((400, 3))
    a = 1 + 0.01 * a if op == "cumprod" else a
    g = rng.standard_normal((400, 3))
    results = []
    for m in (tapelab, torch):
        x = m.tensor(a).to(getattr(m, dt)).requires_grad_(op == "cumsum" or dt != "complex64")
        y = getattr(m, op)(x, 0)
        if x.requires_grad:
            y.backward(m.tensor(g).to(y.dtype))
        results.append((y, x.grad if x.requires_grad else y))
    for ours, theirs in zip(*results):
        _same(ours, theirs)


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "int32"])
def test_scan_dtype_argument_gives_that_dtype(dt):
    """``cumsum(x, dtype=float32)`` casts first and returns float32 (a bfloat16 input came back bfloat16)."""
    a = np.random.default_rng(2).standard_normal(300) * 4
    ours = tapelab.cumsum(tapelab.tensor(a).to(getattr(tapelab, dt)), 0, dtype=tapelab.float32)
    _same(ours, torch.cumsum(torch.tensor(a).to(getattr(torch, dt)), 0, dtype=torch.float32))
