"""Gaps found by running new families of research programs seeded under torch and under
``install_aliases()`` and diffing what they print: a Fourier neural operator (rfft2/irfft2, complex
weights, complex einsum), S4D (complex parameters through ``view_as_complex``, Vandermonde kernels,
FFT convolution), a minimal Mamba (selective scan loop, softplus, depthwise conv1d, tied embeddings),
KAN layers (B-spline bases, ``linalg.lstsq``, LBFGS), MAML (``autograd.grad(create_graph=True)``
through ``functional_call``; ``torch.func`` grad/vmap/jacrev), a PINN (grad of grad, LBFGS with a
closure, ``autograd.functional.hessian``), a DDPM on 2-D toy data with an EMA of the weights,
stable-baselines3's PPO code paths (distributions, ``clip_grad_norm_``, state-dict round trips through
``BytesIO``) and EGNN/GAT message passing (``scatter_add_``, ``scatter_reduce``, ``index_add_``).
Each test exercises the API pattern directly and compares with real torch (no program is imported)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import tapelab


# ---------------------------------------------------------------- message passing: scatter_reduce gradients
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin", "mean", "sum"])
def test_scatter_reduce_gradients_match_torch(reduce, include_self):
    """Graph pooling by ``scatter_reduce``: 'prod' had no gradient at all, and amax/amin with
    ``include_self=False`` split a tie with the unused input differently from PyTorch (which counts
    it). Small integers make ties and zeros (one and several per place) common."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.integers(-2, 3, (4, 3)).astype(np.float64)
        src = rng.integers(-2, 3, (6, 3)).astype(np.float64)
        idx, g = rng.integers(0, 4, (6, 3)), rng.standard_normal((4, 3))
        results = []
        for m in (tapelab, torch):
            a, s = m.tensor(x, requires_grad=True), m.tensor(src, requires_grad=True)
            out = a.scatter_reduce(0, m.tensor(idx), s, reduce=reduce, include_self=include_self)
            results.append([out.detach().numpy(), *(t.numpy() for t in m.autograd.grad(out, (a, s), m.tensor(g)))])
        for ours, theirs in zip(*results):
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_double_backward_matches_torch(include_self):
    """The prod gradient is built from ops, so it differentiates again (a lone zero factor included)."""
    rng = np.random.default_rng(1)
    x, src = rng.standard_normal((4, 3)), rng.standard_normal((6, 3))
    src[0, 0] = x[1, 1] = 0
    idx = rng.integers(0, 4, (6, 3))
    results = []
    for m in (tapelab, torch):
        a, s = m.tensor(x, requires_grad=True), m.tensor(src, requires_grad=True)
        out = a.scatter_reduce(0, m.tensor(idx), s, reduce="prod", include_self=include_self)
        ga, gs = m.autograd.grad((out ** 2).sum(), (a, s), create_graph=True)
        results.append([t.detach().numpy() for t in (ga, gs, *m.autograd.grad(ga.sum() + (gs ** 2).sum(), (a, s)))])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
