"""Gaps found running probabilistic and scientific programs under tapelab (session 34, helper h8)."""
import numpy as np
import pytest
import torch as real_torch

import tapelab as tl


def _pair(values, dtype):
    return real_torch.tensor(values, dtype=dtype), tl.tensor(values, dtype=getattr(tl, str(dtype).split(".")[1]))


@pytest.mark.parametrize("dtype", [real_torch.float32, real_torch.float64])
def test_von_mises_log_prob_and_variance_are_pytorchs_polynomials(dtype):
    """PyTorch's VonMises uses the Abramowitz-Stegun polynomials for log I0 and I1 (about 1e-7 off the
    true functions), on both sides of the 3.75 switch; the density must be its numbers, not scipy's."""
    k_values = [0.05, 0.9, 2.5, 3.7, 3.8, 7.0, 40.0]
    t_loc, l_loc = _pair([0.3] * len(k_values), dtype)
    t_k, l_k = _pair(k_values, dtype)
    t_x, l_x = _pair([-2.0, -0.4, 0.0, 1.1, 2.9, 0.31, 3.1], dtype)
    t_d, l_d = real_torch.distributions.VonMises(t_loc, t_k), tl.distributions.VonMises(l_loc, l_k)
    np.testing.assert_array_equal(l_d.log_prob(l_x).numpy(), t_d.log_prob(t_x).numpy())
    if dtype == real_torch.float64:
        np.testing.assert_array_equal(l_d.variance.numpy(), t_d.variance.numpy())
    else:  # float32 exp/log of under 64 numbers are numpy's, not VML's: an ulp apart (bench/README.md)
        np.testing.assert_allclose(l_d.variance.numpy(), t_d.variance.numpy(), rtol=2e-6, atol=0)


def test_von_mises_log_prob_gradient_matches_pytorch():
    k = [0.5, 3.0, 5.0]
    t_k = real_torch.tensor(k, dtype=real_torch.float64, requires_grad=True)
    l_k = tl.tensor(k, dtype=tl.float64, requires_grad=True)
    x = [0.2, -1.0, 2.0]
    real_torch.distributions.VonMises(real_torch.zeros(3, dtype=real_torch.float64), t_k).log_prob(
        real_torch.tensor(x, dtype=real_torch.float64)).sum().backward()
    tl.distributions.VonMises(tl.zeros(3, dtype=tl.float64), l_k).log_prob(
        tl.tensor(x, dtype=tl.float64)).sum().backward()
    np.testing.assert_allclose(l_k.grad.numpy(), t_k.grad.numpy(), rtol=1e-14, atol=0)


_TRIGAMMA_POINTS = np.concatenate([np.linspace(-5.3, 40.0, 401), np.geomspace(1e-6, 1e6, 97), [-2.5, 0.25, 0.5, 1.0]])


def test_trigamma_is_pytorchs_series_bit_for_bit():
    """polygamma(1, x) is ATen's series (about 1e-10 off scipy's zeta): float64 equal bit for bit."""
    got = tl.polygamma(1, tl.tensor(_TRIGAMMA_POINTS, dtype=tl.float64)).numpy()
    want = real_torch.polygamma(1, real_torch.tensor(_TRIGAMMA_POINTS, dtype=real_torch.float64)).numpy()
    np.testing.assert_array_equal(got, want)


def test_trigamma_float32_matches_pytorch():
    got = tl.polygamma(1, tl.tensor(_TRIGAMMA_POINTS, dtype=tl.float32))
    want = real_torch.polygamma(1, real_torch.tensor(_TRIGAMMA_POINTS, dtype=real_torch.float32))
    assert got.dtype == tl.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=0)


def test_lgamma_and_digamma_higher_derivatives_match_pytorch():
    """A PINN-style third derivative of lgamma and second of digamma go through trigamma."""
    x = [0.05, 0.2, 0.7, 1.3, 2.9, 7.5, 30.0]
    grads = []
    for lib in (real_torch, tl):
        xt = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        y = (lib.lgamma(xt) + lib.digamma(xt) * 0.5).sum()
        g1 = lib.autograd.grad(y, xt, create_graph=True)[0]
        g2 = lib.autograd.grad(g1.sum(), xt, create_graph=True)[0]
        g3 = lib.autograd.grad(g2.sum(), xt)[0]
        grads.append([g.detach().numpy() for g in (g1, g2, g3)])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_trigamma_gradcheck():
    x = tl.tensor([0.3, 1.7, 4.0], dtype=tl.float64, requires_grad=True)
    assert tl.autograd.gradcheck(lambda t: tl.polygamma(1, t), (x,))
