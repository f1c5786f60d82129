"""Gamma / Beta / Dirichlet (and Chi2, StudentT, FisherSnedecor) reparameterised gradients against PyTorch's:
ATen's ``_standard_gamma_grad`` and ``_dirichlet_grad`` (``distributions/reparam_formulas.py``) on the same
draws, and whole ``rsample`` gradients with the same seed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl

DTYPES = ("float32", "float64")


def _log_uniform(rng, low, high, n, dtype):
    return np.exp(rng.uniform(np.log(low), np.log(high), n)).astype(dtype)


def _gamma_cases(dtype):
    """Shapes from 0.01 to 1000 and torch's own draws for them (every branch of the formula)."""
    alpha = _log_uniform(np.random.default_rng(0), 0.01, 1000, 6000, dtype)
    torch.manual_seed(0)
    return alpha, torch._standard_gamma(torch.tensor(alpha)).numpy()


def _beta_cases(dtype):
    """Beta draws (torch's, as Dirichlet pairs) for concentrations 0.01 to 1000 on each side."""
    rng = np.random.default_rng(1)
    pair = np.stack([_log_uniform(rng, 0.01, 1000, 6000, dtype), _log_uniform(rng, 0.01, 1000, 6000, dtype)], -1)
    torch.manual_seed(1)
    x = torch._sample_dirichlet(torch.tensor(pair)).numpy()[:, 0]
    return x, pair[:, 0], pair.sum(-1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_standard_gamma_grad_as_aten(dtype):
    alpha, x = _gamma_cases(dtype)
    want = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
    got = tl._standard_gamma_grad(tl.tensor(alpha), tl.tensor(x)).numpy()
    assert got.dtype == want.dtype
    if dtype == "float32":      # computed in double and rounded: the same floats
        np.testing.assert_array_equal(got, want)
    else:                       # numpy's log/pow/exp against the C library's: ulps
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dirichlet_grad_as_aten(dtype):
    x, alpha, total = _beta_cases(dtype)
    want = torch._dirichlet_grad(*(torch.tensor(a) for a in (x, alpha, total))).numpy()
    got = tl._dirichlet_grad(*(tl.tensor(a) for a in (x, alpha, total))).numpy()
    assert got.dtype == want.dtype and np.isfinite(want).all()
    if dtype == "float32":   # glibc's logf is not always log rounded from double: a digamma an ulp off in 0.2%
        assert np.mean(got == want) > 0.995        # (2% relative where two digammas cancel, x near 1)
        np.testing.assert_allclose(got, want, rtol=0.05, atol=0)
    else:                       # cancellations near x = 1 amplify the libraries' ulps
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0)


def test_formulas_broadcast():
    """Operands broadcast as ATen's kernels broadcast them."""
    a, x = np.array([0.3, 2.0, 50.0]), np.array([[0.1], [1.5], [45.0]])
    want = torch._standard_gamma_grad(*(torch.tensor(v) for v in np.broadcast_arrays(a, x))).numpy()
    got = tl._standard_gamma_grad(tl.tensor(a), tl.tensor(x)).numpy()
    assert got.shape == want.shape == (3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    beta_x, alpha, total = np.array([[0.2], [0.7]]), np.array([0.5, 3.0, 9.0]), np.array(12.0)
    want = torch._dirichlet_grad(*(torch.tensor(v) for v in np.broadcast_arrays(beta_x, alpha, total))).numpy()
    got = tl._dirichlet_grad(*(tl.tensor(v) for v in (beta_x, alpha, total))).numpy()
    assert got.shape == want.shape == (2, 3)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _rsample_grads(m, name, dtype, params, shape=(40,)):
    m.manual_seed(5)
    ps = [m.tensor(np.asarray(p), dtype=getattr(m, dtype), requires_grad=True) for p in params]
    s = getattr(m.distributions, name)(*ps).rsample(shape)
    w = m.linspace(-1.0, 2.0, s.numel(), dtype=s.dtype).reshape(s.shape)
    (s * w).sum().backward()
    return s.detach().numpy(), [p.grad.numpy() for p in ps]


CASES = {
    "Gamma": [[0.02, 0.7, 3.0, 30.0, 900.0], [1.0, 2.0, 0.5, 1.5, 3.0]],
    "Beta": [[0.02, 0.7, 3.0, 30.0, 900.0], [0.3, 12.0, 0.5, 40.0, 2.0]],
    "Dirichlet": [[[0.05, 0.7, 3.0], [30.0, 400.0, 1.0], [8.0, 9.0, 7.0]]],
    "Chi2": [[0.1, 1.0, 5.0, 60.0]],
    "StudentT": [[0.5, 3.0, 30.0], [0.0, 1.0, -2.0], [1.0, 0.5, 2.0]],
    "FisherSnedecor": [[0.5, 3.0, 30.0], [2.0, 7.0, 100.0]],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_rsample_gradients_as_torch(name, dtype):
    want_s, want_g = _rsample_grads(torch, name, dtype, CASES[name])
    got_s, got_g = _rsample_grads(tl, name, dtype, CASES[name])
    np.testing.assert_array_equal(got_s, want_s)
    for got, want in zip(got_g, want_g):
        if dtype == "float32":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12)


def test_beta_vae_steps_follow_torch():
    """A small VAE-style loss with a Beta latent: encoder, Beta(a, b).rsample, decoder, KL to Beta(1, 1);
    eight SGD steps in float64, every loss and parameter as torch's."""
    rng = np.random.default_rng(2)
    data = rng.uniform(size=(16, 6))
    weights = [rng.normal(scale=0.4, size=s) for s in ((6, 4), (4,), (2, 6), (6,))]

    def train(m):
        m.manual_seed(7)
        enc_w, enc_b, dec_w, dec_b = (m.tensor(w, requires_grad=True) for w in weights)
        x = m.tensor(data)
        opt = m.optim.SGD([enc_w, enc_b, dec_w, dec_b], lr=0.05)
        prior = m.distributions.Beta(m.tensor(1.0, dtype=m.float64), m.tensor(1.0, dtype=m.float64))
        losses = []
        for _ in range(8):
            h = m.nn.functional.softplus(x @ enc_w + enc_b) + 0.05
            q = m.distributions.Beta(h[:, :2], h[:, 2:])
            z = q.rsample()
            recon = ((z @ dec_w + dec_b).sigmoid() - x).pow(2).sum(-1)
            loss = (recon + m.distributions.kl_divergence(q, prior).sum(-1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses), [p.detach().numpy() for p in (enc_w, enc_b, dec_w, dec_b)]

    want_l, want_p = train(torch)
    got_l, got_p = train(tl)
    np.testing.assert_allclose(got_l, want_l, rtol=1e-12)
    for got, want in zip(got_p, want_p):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)


def _second_derivative_error(m, name):
    m.manual_seed(0)
    a = m.tensor([[0.5, 2.0, 9.0]], requires_grad=True)
    d = m.distributions.Gamma(a, 1.0) if name == "Gamma" else m.distributions.Dirichlet(a)
    (g,) = m.autograd.grad((d.rsample() * m.tensor([1.0, 2.0, 3.0])).sum(), a, create_graph=True)
    with pytest.raises(Exception) as info:
        m.autograd.grad(g.sum(), a)
    return g.detach().numpy(), g.requires_grad, type(info.value), str(info.value)


@pytest.mark.parametrize("name", ["Gamma", "Dirichlet"])
def test_second_derivative_refused_as_torch(name):
    """Gamma's first derivative requires grad and differentiating it raises PyTorch's NotImplementedError;
    Dirichlet's backward is once-differentiable: its gradient requires no grad."""
    want, got = _second_derivative_error(torch, name), _second_derivative_error(tl, name)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1:] == want[1:]


@pytest.mark.parametrize("fn", ["_standard_gamma_grad", "_dirichlet_grad"])
def test_formula_derivative_refused_as_torch(fn):
    def error(m):
        a = m.tensor([0.5, 2.0], requires_grad=True)
        x = m.tensor([0.3, 0.6])
        y = m._standard_gamma_grad(a, x) if fn == "_standard_gamma_grad" else m._dirichlet_grad(x, a, a + 1.0)
        assert y.requires_grad
        with pytest.raises(Exception) as info:
            y.sum().backward()
        return type(info.value), str(info.value)
    assert error(tl) == error(torch)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gamma_draws_compiled_loop_is_the_python_loop(dtype):
    """kernels/gamma_draws.py draws what cpu_stream's Python loop draws (shapes 0 and 0.01-1000), and leaves the
    generator where it leaves it: the same next uniforms and the same cached Box-Muller normal."""
    from tapelab import kernels
    from tapelab.core import cpu_stream
    from tapelab.core.random import default_generator
    alphas = _log_uniform(np.random.default_rng(3), 0.01, 1000, 2000, dtype)
    alphas[[7, 400]] = 0.0
    runs = []
    old = kernels.enabled()
    try:
        for on in (False, True):
            kernels.set_enabled(on)
            tl.manual_seed(4)
            tl.randn(3)                          # an odd count: a cached normal goes in
            draws = cpu_stream.gamma(default_generator, alphas)
            runs.append((draws, tl.randn(1).numpy(), tl.rand(5).numpy()))
    finally:
        kernels.set_enabled(old)
    for python_loop, compiled in zip(*runs):
        np.testing.assert_array_equal(compiled, python_loop)
    torch.manual_seed(4)
    torch.randn(3)
    want = torch._standard_gamma(torch.tensor(alphas)).numpy()       # ATen's draws, at least the dtype's tiny
    np.testing.assert_array_equal(np.maximum(runs[1][0].astype(dtype), np.finfo(dtype).tiny), want)
