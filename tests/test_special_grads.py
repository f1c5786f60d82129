"""tapelab.special beyond the op database: the gradients PyTorch does not have (Bessel families,
Airy, the orthogonal polynomials, zeta in x, gammainc/gammaincc in a, beta/betainc, second derivatives
in the shape parameters included), checked by finite differences in float64 and, for the numerical
ones, against mpmath; SciPy's values for the functions PyTorch lacks; the tape records each declared
op; PyTorch's names are all there."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.special as sps
import torch

import tapelab
from tapelab.autograd import gradcheck, gradgradcheck

S = tapelab.special
R = np.random.default_rng(7)


def _t(values) -> tapelab.Tensor:
    return tapelab.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def test_every_torch_special_name_is_there():
    names = [n for n in dir(torch.special) if not n.startswith("_")
             and n not in ("Tensor", "torch", "common_args", "multi_dim_common")]
    assert [n for n in names if not hasattr(S, n)] == []
    assert {"beta", "betaln", "betainc"} <= set(S.__all__)


ANY, POS = R.uniform(-3, 3, 5), R.uniform(0.3, 3, 5)
UNARY = {"airy_ai": ANY, "bessel_j0": ANY, "bessel_j1": np.r_[ANY, 0.0], "bessel_y0": POS, "bessel_y1": POS,
         "modified_bessel_i0": ANY, "modified_bessel_i1": np.r_[ANY, 0.0], "modified_bessel_k0": POS,
         "modified_bessel_k1": POS, "scaled_modified_bessel_k0": POS, "scaled_modified_bessel_k1": POS,
         "spherical_bessel_j0": np.r_[ANY, 0.0, 0.3], "erfcx": ANY, "i0e": ANY, "i1e": np.r_[ANY, 0.0],
         "log_ndtr": ANY, "ndtri": R.uniform(0.05, 0.95, 4)}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients_by_finite_differences(name):
    fn = getattr(S, name)
    x = _t(UNARY[name])
    assert gradcheck(fn, (x,)) and gradgradcheck(fn, (x,))


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                                  "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
                                  "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
                                  "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
                                  "laguerre_polynomial_l", "legendre_polynomial_p"])
def test_polynomial_gradients(name):
    n = tapelab.tensor([0.0, 1.0, 2.0, 5.0, 9.0])
    fn = lambda x: getattr(S, name)(x, n)   # noqa: E731
    x = _t(R.uniform(-1.1, 1.1, 5))
    assert gradcheck(fn, (x,)) and gradgradcheck(fn, (x,))
    # the exact derivative: T_n' = n U_(n-1), He_n' = n He_(n-1)
    if name in ("chebyshev_polynomial_t", "hermite_polynomial_he"):
        lower = S.chebyshev_polynomial_u if name.endswith("_t") else S.hermite_polynomial_he
        (g,) = tapelab.autograd.grad(fn(x).sum(), x)
        np.testing.assert_allclose(g.numpy(), (n * lower(x.detach(), n - 1)).numpy(), rtol=1e-12, atol=1e-12)


def test_zeta_derivative_in_x_against_mpmath():
    x, q = np.array([1.5, 2.0, 3.3, 10.0, 40.0]), np.array([0.3, 1.0, 2.5, 0.7, 5.0])
    xt = _t(x)
    (g,) = tapelab.autograd.grad(S.zeta(xt, tapelab.tensor(q)).sum(), xt)
    want = [float(mpmath.zeta(a, b, derivative=1)) for a, b in zip(x, q)]
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-13)
    assert gradcheck(S.zeta, (_t(R.uniform(1.5, 4, 4)), _t(R.uniform(0.5, 3, 4))))
    assert gradgradcheck(S.zeta, (_t(R.uniform(1.5, 4, 3)), _t(R.uniform(0.5, 3, 3))))


def test_zeta_gradient_in_q_matches_torch():
    x, q = R.uniform(1.5, 4, 4), R.uniform(0.5, 3, 4)
    tq = torch.tensor(q, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.special.zeta(torch.tensor(x), tq).sum(), tq)
    lq = _t(q)
    (lg,) = tapelab.autograd.grad(S.zeta(tapelab.tensor(x), lq).sum(), lq)
    np.testing.assert_allclose(lg.numpy(), tg.numpy(), rtol=1e-12)


def test_gammainc_derivative_in_a_against_mpmath():
    worst = 0.0
    for a in (0.05, 0.5, 1.0, 3.0, 10.0, 50.0, 200.0):
        for x in (1e-3, 0.5, 2.0, 10.0, 60.0, 250.0):
            at = _t([a])
            (g,) = tapelab.autograd.grad(S.gammainc(at, tapelab.tensor([x], dtype=tapelab.float64)).sum(), at)
            with mpmath.workdps(30):
                want = float(mpmath.diff(lambda s: mpmath.gammainc(s, 0, x, regularized=True), a))
            worst = max(worst, abs(float(g[0]) - want))
            (gc,) = tapelab.autograd.grad(S.gammaincc(at, tapelab.tensor([x], dtype=tapelab.float64)).sum(), at)
            assert float(gc[0]) == pytest.approx(-float(g[0]), abs=1e-15)
    assert worst < 1e-12


def test_gammainc_second_and_third_derivatives_in_a_against_mpmath():
    """The a-derivative op differentiates again (the next order of the same series and quadrature)."""
    worst = 0.0
    for a in (0.05, 1.0, 10.0, 200.0):
        for x in (1e-3, 2.0, 60.0, 400.0):
            at = _t([a])
            (g1,) = tapelab.autograd.grad(S.gammainc(at, tapelab.tensor([x], dtype=tapelab.float64)).sum(), at,
                                          create_graph=True)
            (g2,) = tapelab.autograd.grad(g1.sum(), at)
            with mpmath.workdps(30):
                want = float(mpmath.diff(lambda s: mpmath.gammainc(s, 0, x, regularized=True), a, 2))
            worst = max(worst, abs(float(g2[0]) - want))
    assert worst < 1e-12     # measured 4e-15
    at = _t([2.5])
    (g1,) = tapelab.autograd.grad(S.gammainc(at, tapelab.tensor([1.7], dtype=tapelab.float64)).sum(), at,
                                  create_graph=True)
    (g2,) = tapelab.autograd.grad(g1.sum(), at, create_graph=True)
    (g3,) = tapelab.autograd.grad(g2.sum(), at)
    with mpmath.workdps(30):
        want = float(mpmath.diff(lambda s: mpmath.gammainc(s, 0, 1.7, regularized=True), 2.5, 3))
    assert float(g3[0]) == pytest.approx(want, abs=1e-12)


def test_gammainc_gradients_by_finite_differences():
    a, x = _t(R.uniform(0.5, 4, 4)), _t(R.uniform(0.2, 6, 4))
    assert gradcheck(S.gammainc, (a, x)) and gradcheck(S.gammaincc, (a, x))
    # far above the transition (the Gauss–Laguerre side)
    assert gradcheck(S.gammaincc, (_t([0.5, 2.0, 30.0]), _t([20.0, 40.0, 80.0])))
    # second derivatives in a, in x and mixed, on both sides of the transition
    assert gradgradcheck(S.gammainc, (a, x)) and gradgradcheck(S.gammaincc, (a, x))
    assert gradgradcheck(tapelab.igamma, (a, x)) and gradgradcheck(tapelab.igammac, (a, x))
    assert gradgradcheck(S.gammaincc, (_t([0.5, 2.0, 30.0]), _t([20.0, 40.0, 80.0])))


def test_torch_igamma_now_has_the_a_gradient():
    a = _t([1.5])
    tapelab.igamma(a, tapelab.tensor([2.0])).sum().backward()
    assert np.isfinite(a.grad.numpy()).all()


def test_beta_family_against_scipy():
    a, b, x = R.uniform(0.3, 4, 6), R.uniform(0.3, 4, 6), R.uniform(0.05, 0.95, 6)
    A, B, X = (tapelab.tensor(v) for v in (a, b, x))
    np.testing.assert_allclose(S.beta(A, B).numpy(), sps.beta(a, b), rtol=1e-13)
    np.testing.assert_allclose(S.betaln(A, B).numpy(), sps.betaln(a, b), rtol=1e-12)
    np.testing.assert_allclose(S.betainc(A, B, X).numpy(), sps.betainc(a, b, x), rtol=1e-13)
    edges = S.betainc(tapelab.tensor([1.0, 2.0, 2.0, np.nan]), tapelab.tensor([1.0, 3.0, 3.0, 1.0]),
                      tapelab.tensor([0.0, 1.0, 0.5, 0.5])).numpy()
    np.testing.assert_allclose(edges, sps.betainc([1.0, 2.0, 2.0, np.nan], [1.0, 3.0, 3.0, 1.0], [0.0, 1.0, 0.5, 0.5]))


def test_beta_family_gradients():
    a, b = _t(R.uniform(0.5, 4, 4)), _t(R.uniform(0.5, 3, 4))
    assert gradcheck(S.beta, (a, b)) and gradgradcheck(S.beta, (a, b))
    assert gradcheck(S.betaln, (a, b)) and gradgradcheck(S.betaln, (a, b))
    x = _t(R.uniform(0.1, 0.9, 4))
    assert gradcheck(S.betainc, (a, b, x)) and gradgradcheck(S.betainc, (a, b, x))
    # both sides of the symmetry switch x = (a+1)/(a+b+2), small and large parameters
    assert gradgradcheck(S.betainc, (_t([0.3, 8.0, 2.0]), _t([0.4, 0.5, 12.0]), _t([0.9, 0.95, 0.05])))


def test_betainc_derivatives_in_a_and_b_against_mpmath():
    """First, second and mixed derivatives in a and b (the differentiated series), and a third order."""
    worst = 0.0
    f64 = tapelab.float64
    for a, b, x in ((0.2, 0.3, 0.01), (2.5, 1.5, 0.4), (8.0, 0.3, 0.99), (30.0, 7.0, 0.8), (1.0, 30.0, 0.3)):
        at, bt = _t([a]), _t([b])
        (ga, gb) = tapelab.autograd.grad(S.betainc(at, bt, tapelab.tensor([x], dtype=f64)).sum(), (at, bt),
                                         create_graph=True)
        (gaa, gab) = tapelab.autograd.grad(ga.sum(), (at, bt), retain_graph=True)
        (gbb,) = tapelab.autograd.grad(gb.sum(), bt)
        with mpmath.workdps(30):
            f = lambda s, u: mpmath.betainc(s, u, 0, x, regularized=True)   # noqa: E731
            for got, order in ((ga, (1, 0)), (gb, (0, 1)), (gaa, (2, 0)), (gab, (1, 1)), (gbb, (0, 2))):
                worst = max(worst, abs(float(got[0]) - float(mpmath.diff(f, (a, b), order))))
    assert worst < 1e-12     # measured 7e-15 over a wider grid (engine/ops/special_series.py)
    at, bt = _t([2.5]), _t([1.5])
    (g1,) = tapelab.autograd.grad(S.betainc(at, bt, tapelab.tensor([0.4], dtype=f64)).sum(), at, create_graph=True)
    (g2,) = tapelab.autograd.grad(g1.sum(), bt, create_graph=True)
    (g3,) = tapelab.autograd.grad(g2.sum(), at)
    with mpmath.workdps(30):
        want = float(mpmath.diff(lambda s, u: mpmath.betainc(s, u, 0, 0.4, regularized=True), (2.5, 1.5), (2, 1)))
    assert float(g3[0]) == pytest.approx(want, abs=1e-12)


def test_special_ops_are_recorded_on_the_tape():
    x = tapelab.tensor([0.5, 1.5], requires_grad=True)
    with tapelab.tape() as t:
        (S.bessel_j0(x) + S.zeta(x + 2, 1.0) + S.chebyshev_polynomial_t(x, 3) + S.gammainc(x, 1.0)).sum()
    ops = [n.op for n in t.nodes]
    for name in ("special_bessel_j0", "special_zeta", "special_chebyshev_polynomial_t", "igamma"):
        assert name in ops
