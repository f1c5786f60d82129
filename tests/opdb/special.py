"""OpInfos for the special functions and floating-point bit ops (engine/ops/special.py)."""
from __future__ import annotations

import numpy as np

from .core import OpInfo, Sample, arr, pos, rng
from .elementwise import binary, flat, ints, unary, values


def _u(name, fn, domain, **kw):
    return OpInfo(name, fn, lambda: unary(domain, ints_too=False), **kw)


def _ints(*shape, low=1, high=40):
    return rng().integers(low, high, size=shape)


def _above(low):
    return lambda *shape: rng().uniform(low, low + 2.0, size=shape)


def _sp(name, domain, **kw):
    """A torch.special function over its domain (and the unary layouts), values against PyTorch."""
    return OpInfo(f"special_{name}", lambda m, a: getattr(m.special, name)(a),
                  lambda: unary(domain, ints_too=False), **kw)


# values at 0, negatives, large values, NaN and +-inf: PyTorch's results there (forward only)
EDGES = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -3.7, 10.0, -10.0, 30.0, np.nan, np.inf, -np.inf])
# torch.special functions PyTorch gives no gradient (tapelab does: tests/test_special_grads.py checks them)
NO_TORCH_GRAD = ("airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
                 "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
                 "scaled_modified_bessel_k1", "spherical_bessel_j0")
POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p")
# PyTorch's polynomial kernels return stray values at NaN x, so the edges here are finite and infinite only
POLY_X = np.array([0.0, 0.3, -0.7, 1.0, -1.0, 1.5, -2.2, 5.0, np.inf, -np.inf])


def _edges(name, fn):
    return values(f"special_{name}_edges", fn, lambda: [Sample((EDGES,))], dtypes=("float64",), atol=1e-12, rtol=2e-8)


OPS = [
    _sp("erfcx", arr), _sp("i0e", arr), _sp("i1e", arr), _sp("log_ndtr", arr),
    _sp("ndtri", lambda *s: rng().uniform(0.05, 0.95, size=s)),
    *[_sp(n, pos if n[-2:] in ("y0", "y1", "k0", "k1") else arr, grad=False) for n in NO_TORCH_GRAD],
    *[_edges(n, lambda m, a, n=n: getattr(m.special, n)(a))
      for n in ("erfcx", "i0e", "i1e", "log_ndtr", "i0", "i1", "entr", "gammaln", "digamma", "sinc", "ndtr",
                "expit", "erf", "erfc", *NO_TORCH_GRAD)],
    values("special_ndtri_edges", lambda m, a: m.special.ndtri(a),
           lambda: [Sample((np.array([0.0, 1e-300, 0.3, 0.5, 0.999, 1.0, -0.5, 1.5, np.nan, np.inf]),))],
           dtypes=("float64",), rtol=1e-9),
    *[OpInfo(f"special_{n}", lambda m, x, k, n=n: getattr(m.special, n)(x, k),
             lambda: [Sample((rng().uniform(-1.2, 1.2, size=(2, 3)), np.array([0.0, 3.0, 7.0])), name="tensor_n"),
                      Sample((rng().uniform(-1.2, 1.2, size=(4,)), 4), name="int_n")], grad=False)
      for n in POLYNOMIALS],
    *[values(f"special_{n}_edges", lambda m, x, k, n=n: getattr(m.special, n)(x, k),
             lambda: [Sample((POLY_X[:, None], np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 8.0, 12.0])))],
             dtypes=("float64",), rtol=1e-9)
      for n in POLYNOMIALS],
    OpInfo("special_zeta", lambda m, x, q: m.special.zeta(x, q),
           lambda: [Sample((_above(1.5)(2, 3), pos(2, 3))), Sample((_above(2.0)(3), pos(2, 3)), name="bcast")],
           differentiable_args=(1,)),
    values("special_zeta_edges", lambda m, x, q: m.special.zeta(x, q),
           lambda: [Sample((np.array([1.5, 2.0, 3.0, 0.5, 1.0, np.inf, np.nan, 10.0, 2.0, 4.0]),
                            np.array([0.5, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, -2.5, 0.0, 1e3])))], dtypes=("float64",)),
    OpInfo("special_gammainc", lambda m, a, x: (m.special.gammainc(a, x), m.special.gammaincc(a, x)),
           lambda: [Sample((pos(2, 3), pos(2, 3)))], differentiable_args=(1,)),
    values("special_gammainc_edges", lambda m, a, x: (m.special.gammainc(a, x), m.special.gammaincc(a, x)),
           lambda: [Sample((np.array([0.5, 1.0, 2.0, 0.0, -1.0, np.nan, np.inf, 3.0, 3.0, 50.0]),
                            np.array([0.0, 1.0, np.inf, 1.0, 1.0, 1.0, 2.0, np.nan, -1.0, 40.0])))], dtypes=("float64",)),

    _u("digamma", lambda m, a: m.digamma(a), pos),
    _u("lgamma", lambda m, a: m.lgamma(a), pos),
    _u("lgamma_method", lambda m, a: a.lgamma(), _above(-0.9)),
    _u("polygamma", lambda m, a: m.polygamma(2, a), pos),
    _u("polygamma_method", lambda m, a: a.polygamma(1), pos),
    _u("mvlgamma", lambda m, a: m.mvlgamma(a, 3), _above(1.2)),
    _u("i0", lambda m, a: m.i0(a), arr),
    _u("sinc", lambda m, a: m.sinc(a), arr),
    OpInfo("sinc_at_zero", lambda m, a: m.sinc(a), lambda: [Sample((np.array([0.0, 0.5, -1.0, 2.0]),))],
           gradcheck=False),
    _u("logit", lambda m, a: m.logit(a), lambda *s: rng().uniform(0.05, 0.95, size=s)),
    OpInfo("logit_eps", lambda m, a: m.logit(a, 0.2), lambda: [Sample((np.array([0.05, 0.3, 0.5, 0.9]),))],
           gradcheck=False),
    _u("deg2rad", lambda m, a: m.deg2rad(a), arr),
    _u("rad2deg", lambda m, a: a.rad2deg(), arr),
    OpInfo("igamma", lambda m, a, x: m.igamma(a, x), lambda: [Sample((pos(2, 3), pos(2, 3))),
                                                             Sample((pos(3), pos(2, 3)), name="bcast")],
           differentiable_args=(1,)),
    OpInfo("igammac", lambda m, a, x: m.igammac(a, x), lambda: [Sample((pos(2, 3), pos(2, 3)))],
           differentiable_args=(1,)),
    OpInfo("copysign", lambda m, a, b: m.copysign(a, b), lambda: binary(left=False)),
    OpInfo("copysign_method", lambda m, a, b: a.copysign(b), lambda: [Sample((arr(2, 3), np.array([1.0, -0.0, -2.0])))],
           differentiable_args=(0,)),   # a finite difference of b across -0.0 flips the sign
    OpInfo("ldexp", lambda m, a, b: m.ldexp(a, b), lambda: [Sample((arr(2, 3), ints(2, 3, low=0)))],
           differentiable_args=(0,)),
    OpInfo("float_power", lambda m, a, b: m.float_power(a, b), lambda: binary(pos, arr, scalars=False)[:3]),
    OpInfo("logaddexp2", lambda m, a, b: m.logaddexp2(a, b), lambda: binary(scalars=False)),
    values("nextafter", lambda m, a, b: (m.nextafter(a, b), a.nextafter(b)), lambda: binary(scalars=False)[:3]),
    values("heaviside", lambda m, a, b: m.heaviside(a, b),
           lambda: [Sample((np.array([-1.5, 0.0, 2.0, 0.0]), np.array([0.5, 0.25, 0.5, 1.0])))]),
    values("gcd_lcm", lambda m, a, b: (m.gcd(a, b), m.lcm(a, b), a.gcd(b)),
           lambda: [Sample((_ints(2, 3), _ints(2, 3))), Sample((_ints(2, 3, low=-9), _ints(3)), name="bcast")]),
    values("shifts", lambda m, a, b: (m.bitwise_left_shift(a, b), m.bitwise_right_shift(a, b),
                                      m.bitwise_left_shift(a, 2)),
           lambda: [Sample((_ints(2, 3, low=-50, high=50), _ints(2, 3, low=0, high=5)))]),
    values("frexp", lambda m, a: tuple(m.frexp(a)), lambda: [Sample((arr(2, 3) * 10,)),
                                                             Sample((np.array([0.0, 1.0, -3.5, 1e-3]),))]),
    flat("frexp_mantissa_grad_free", lambda m, a: m.frexp(a).mantissa, lambda: [Sample((arr(3),))], grad=False),
    # ATen's reparameterised gradients of gamma and Beta draws (no derivative in PyTorch): shapes across the
    # formulas' branches, draws below 0.8, near the shape and far from it
    values("_standard_gamma_grad", lambda m, a, x: m._standard_gamma_grad(a, x),
           lambda: [Sample((np.array([0.05, 0.5, 2.0, 2.0, 12.0, 12.0, 30.0, 300.0]),
                            np.array([0.01, 0.3, 1.5, 6.0, 4.0, 12.5, 29.0, 250.0])))]),
    values("_dirichlet_grad", lambda m, x, a, t: m._dirichlet_grad(x, a, t),
           lambda: [Sample((np.array([0.02, 0.3, 0.98, 0.5, 0.45, 0.6, 0.7]),
                            np.array([0.3, 1.5, 4.0, 20.0, 9.0, 2.0, 0.8]),
                            np.array([5.0, 4.0, 4.5, 41.0, 20.0, 3.0, 6.0])))]),
]
