"""``torch.special``'s functions on ``scipy.special`` (``cupyx.scipy.special`` on cuda), each one
declared op under PyTorch's aten name, with a gradient for every differentiable argument,
including those PyTorch leaves without one: the Bessel families by their recurrences, ``zeta`` in
both arguments (engine/ops/special_series.py), ``beta`` and ``betainc`` (the incomplete gamma,
differentiable in ``a`` too, is ``igamma`` in engine/ops/special.py).
"""
from __future__ import annotations

import math

from ..base import backend as _backend
from ..core.dispatch import apply
from ..core.registry import Op, kernel_refusal
from ._util import Tensor, unbroadcast as ub
from .compare import where
from .elementwise import _wants, exp, log, sign
from .special import digamma, polygamma
from .special_limits import scipy_bessel as _bessel
from .special_series import betainc_da, exp_derivative, zeta_dx

__all__ = ["erfcx", "ndtri", "log_ndtr", "i0e", "i1e", "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
           "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "zeta", "beta", "betainc"]

_special = _backend.special
_SQRT_2PI = math.sqrt(2 * math.pi)


def _sp(fname: str):
    """The forward of a one-argument scipy.special ufunc, keeping the input's float dtype."""
    # in float64 then rounded: scipy's float32 loops lose digits (Ai(-10) by 3e-3)
    return lambda xp, a: getattr(_special(xp), fname)(a.astype("float64")).astype(a.dtype, copy=False)


def _unary(name: str, fwd, vjp, save_output: bool = False) -> Op:
    return Op(name, fwd, vjp, promote="float", elementwise=True, save_output=save_output,
              complex_error=kernel_refusal(name.removeprefix("special_")))


def _at_zero(a, value, body):
    """``body(a with 1 at 0)``, and ``value`` where ``a`` is 0 (the x -> 0 limit of a ratio)."""
    safe = where(a == 0, 1.0, a)
    return where(a == 0, value, body(safe))


# ---------------------------------------------------------------- error function family
_erfcx = _unary("special_erfcx", _sp("erfcx"),
                lambda g, out, a: (g * (2 * a * out - 2 / math.sqrt(math.pi)),), save_output=True)
# d/dx log Phi(x) = phi(x) / Phi(x) = exp(-x^2/2 - log Phi(x)) / sqrt(2 pi)
_log_ndtr = _unary("special_log_ndtr", _sp("log_ndtr"),
                   lambda g, out, a: (g * exp(-0.5 * a * a - out) / _SQRT_2PI,), save_output=True)

# d/dp ndtri(p) = 1 / phi(ndtri(p)) = sqrt(2 pi) exp(ndtri(p)^2 / 2)
_ndtri = _unary("special_ndtri", _sp("ndtri"), lambda g, out, a: (g * _SQRT_2PI * exp(0.5 * out * out),),
                save_output=True)

# ---------------------------------------------------------------- modified Bessel, first kind
# _bessel (all Bessel functions): scipy's values on every backend, also where cupy's kernels differ
# (+-inf, large x: engine/ops/special_limits.py)
_i0 = _unary("special_modified_bessel_i0", _bessel("i0"), lambda g, out, a: (g * apply(_i1, a),))
_i1 = _unary("special_modified_bessel_i1", _bessel("i1"),
             lambda g, out, a: (g * _at_zero(a, 0.5, lambda s: apply(_i0, a) - out / s),), save_output=True)
# exponentially scaled: i0e = e^-|x| i0, i1e = e^-|x| i1
_i0e = _unary("special_i0e", _bessel("i0e"), lambda g, out, a: (g * (apply(_i1e, a) - sign(a) * out),),
              save_output=True)
_i1e = _unary("special_i1e", _bessel("i1e"),
              lambda g, out, a: (g * _at_zero(a, 0.5, lambda s: apply(_i0e, a) - out * (sign(a) + 1 / s)),),
              save_output=True)

# ---------------------------------------------------------------- modified Bessel, second kind
_k0 = _unary("special_modified_bessel_k0", _bessel("k0"), lambda g, out, a: (-g * apply(_k1, a),))
_k1 = _unary("special_modified_bessel_k1", _bessel("k1"),
             lambda g, out, a: (g * (-apply(_k0, a) - out / a),), save_output=True)
# scaled: k0e = e^x k0, k1e = e^x k1
_k0e = _unary("special_scaled_modified_bessel_k0", _bessel("k0e"),
              lambda g, out, a: (g * (out - apply(_k1e, a)),), save_output=True)
_k1e = _unary("special_scaled_modified_bessel_k1", _bessel("k1e"),
              lambda g, out, a: (g * (out * (1 - 1 / a) - apply(_k0e, a)),), save_output=True)

# ---------------------------------------------------------------- Bessel J and Y
_j0 = _unary("special_bessel_j0", _bessel("j0"), lambda g, out, a: (-g * apply(_j1, a),))
_j1 = _unary("special_bessel_j1", _bessel("j1"),
             lambda g, out, a: (g * _at_zero(a, 0.5, lambda s: apply(_j0, a) - out / s),), save_output=True)
_y0 = _unary("special_bessel_y0", _bessel("y0"), lambda g, out, a: (-g * apply(_y1, a),))
_y1 = _unary("special_bessel_y1", _bessel("y1"),
             lambda g, out, a: (g * (apply(_y0, a) - out / a),), save_output=True)


# ---------------------------------------------------------------- spherical Bessel j0 = sin x / x
# Taylor coefficients of j0 and j1 about 0 (by powers of x^2), used for |x| < 1/2 where the closed
# forms cancel; beyond x^10 the terms are below 1e-17 there
_SPH_SERIES = ((1.0, -1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800),
               (1 / 3, -1 / 30, 1 / 840, -1 / 45360, 1 / 3991680, -1 / 518918400))


def _sph_fwd(order: int):
    def fwd(xp, a):
        x = a.astype("float64")
        small = xp.abs(x) < 0.5
        safe = xp.where(small | ~xp.isfinite(x), 1.0, x)
        closed = xp.sin(safe) / safe if order == 0 else xp.sin(safe) / safe ** 2 - xp.cos(safe) / safe
        x2 = x * x
        series = sum(c * x2 ** i for i, c in enumerate(_SPH_SERIES[order])) * (x if order else 1.0)
        out = xp.where(small, series, xp.where(xp.isinf(x), 0.0, closed))     # PyTorch's limit at +-inf
        return xp.where(xp.isnan(x), x, out).astype(a.dtype, copy=False)
    return fwd


_sph_j0 = _unary("special_spherical_bessel_j0", _sph_fwd(0), lambda g, out, a: (-g * apply(_sph_j1, a),))
# j1' = j0 - 2 j1 / x, and 1/3 at 0
_sph_j1 = _unary("spherical_bessel_j1", _sph_fwd(1),
                 lambda g, out, a: (g * _at_zero(a, 1 / 3, lambda s: apply(_sph_j0, a) - 2 * out / s),),
                 save_output=True)


# ---------------------------------------------------------------- Airy Ai: Ai'' = x Ai
def _airy(index: int):
    # in float64 as _sp; cupy 14 has no airy: on cuda scipy's on the host (backend.HOST_SPECIAL)
    def fwd(xp, a):
        return _special(xp).airy(a.astype("float64"))[index].astype(a.dtype, copy=False)
    return fwd


_airy_ai = _unary("special_airy_ai", _airy(0), lambda g, out, a: (g * apply(_airy_ai_prime, a),))
_airy_ai_prime = _unary("airy_ai_prime", _airy(1), lambda g, out, a: (g * a * apply(_airy_ai, a),))


# ---------------------------------------------------------------- Hurwitz zeta
def _zeta_vjp(g, out, x, q):
    # d/dq zeta(x, q) = -x zeta(x + 1, q); d/dx by Euler–Maclaurin (special_series.zeta_dx)
    gx = ub(g * apply(_zeta_dx, x, q, order=1), x) if _wants(x) else None
    gq = ub(g * -x * apply(_zeta, x + 1, q), q) if _wants(q) else None
    return gx, gq


def _zeta_dx_vjp(g, out, x, q, *, order):
    # Z_d(x, q) = sum (-ln(k+q))^d (k+q)^-x: dZ_d/dx = Z_(d+1), dZ_d/dq = -d Z_(d-1)(x+1, q) - x Z_d(x+1, q)
    gx = ub(g * apply(_zeta_dx, x, q, order=order + 1), x) if _wants(x) else None
    if not _wants(q):
        return gx, None
    lower = apply(_zeta_dx, x + 1, q, order=order - 1) if order > 1 else apply(_zeta, x + 1, q)
    return gx, ub(g * (-order * lower - x * apply(_zeta_dx, x + 1, q, order=order)), q)


def _zeta_fwd(xp, x, q):
    return _special(xp).zeta(x, q).astype(x.dtype, copy=False)


def _zeta_dx_fwd(xp, x, q, *, order):
    out = zeta_dx(xp, x.astype("float64"), q.astype("float64"), order)
    return xp.where(x > 1, out, xp.nan).astype(x.dtype, copy=False)


_zeta = Op("special_zeta", _zeta_fwd, _zeta_vjp, promote="float", elementwise=True,
           complex_error=kernel_refusal("zeta"))
_zeta_dx = Op("special_zeta_dx", _zeta_dx_fwd, _zeta_dx_vjp, promote="float", elementwise=True)


# ---------------------------------------------------------------- beta and the regularised incomplete beta
def _beta_vjp(g, out, a, b):
    both = digamma(a + b)
    return (ub(g * out * (digamma(a) - both), a) if _wants(a) else None,
            ub(g * out * (digamma(b) - both), b) if _wants(b) else None)


_beta = Op("special_beta", lambda xp, a, b: _special(xp).beta(a, b).astype(a.dtype, copy=False), _beta_vjp,
           promote="float", elementwise=True, save_output=True)

def _betainc_dparam_fwd(xp, a, b, x, *, da, db):
    """``d^da/da d^db/db I_x(a, b)`` by the differentiated series of ``special_series.betainc_da``."""
    f64 = [v.astype("float64") for v in (a, b, x)]
    return betainc_da(xp, _special(xp), *f64, da, db).astype(a.dtype, copy=False)


def _density_partial(a, b, x):
    """``partial(p, q)`` of the log density (a-1) ln x + (b-1) ln(1-x) - ln B(a, b), in Tensor ops."""
    def partial(p, q):
        if p + q == 1:
            return (log(x) if p else log(1 - x)) - digamma(a if p else b) + digamma(a + b)
        if q == 0 or p == 0:
            return polygamma(p + q - 1, a + b) - polygamma(p + q - 1, a if p else b)
        return polygamma(p + q - 1, a + b)
    return partial


def _betainc_dparam_vjp(g, out, a, b, x, *, da, db):
    # in a and b: the next order; in x: the derivatives of the density x^(a-1) (1-x)^(b-1) / B(a, b)
    ga = ub(g * apply(_betainc_dparam, a, b, x, da=da + 1, db=db), a) if _wants(a) else None
    gb = ub(g * apply(_betainc_dparam, a, b, x, da=da, db=db + 1), b) if _wants(b) else None
    if not _wants(x):
        return ga, gb, None
    return ga, gb, ub(g * _beta_density(a, b, x) * exp_derivative(da, db, _density_partial(a, b, x)), x)


_betainc_dparam = Op("special_betainc_dparam", _betainc_dparam_fwd, _betainc_dparam_vjp, promote="float",
                     elementwise=True)


def _beta_density(a, b, x):
    """d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b)."""
    return exp((a - 1) * log(x) + (b - 1) * log(1 - x)) / apply(_beta, a, b)


def _betainc_vjp(g, out, a, b, x):
    ga = ub(g * apply(_betainc_dparam, a, b, x, da=1, db=0), a) if _wants(a) else None
    gb = ub(g * apply(_betainc_dparam, a, b, x, da=0, db=1), b) if _wants(b) else None
    return ga, gb, (ub(g * _beta_density(a, b, x), x) if _wants(x) else None)


_betainc = Op("special_betainc", lambda xp, a, b, x: _special(xp).betainc(a, b, x).astype(a.dtype, copy=False),
              _betainc_vjp, promote="float", elementwise=True)


# ---------------------------------------------------------------- public functions
def _fn(op: Op, name: str, doc: str):
    def fn(input: Tensor, *, out=None) -> Tensor:
        result = apply(op, input)
        return result if out is None else out.copy_(result)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


erfcx = _fn(_erfcx, "erfcx", "The scaled complementary error function ``exp(x^2) erfc(x)``.")
ndtri = _fn(_ndtri, "ndtri", "The inverse of the standard normal CDF.")
log_ndtr = _fn(_log_ndtr, "log_ndtr", "The log of the standard normal CDF, accurate far in the left tail.")
i0e = _fn(_i0e, "i0e", "``exp(-|x|) I0(x)``.")
i1e = _fn(_i1e, "i1e", "``exp(-|x|) I1(x)``.")
airy_ai = _fn(_airy_ai, "airy_ai", "The Airy function Ai (its gradient is Ai', whose own is x Ai).")
bessel_j0 = _fn(_j0, "bessel_j0", "The Bessel function of the first kind, order 0.")
bessel_j1 = _fn(_j1, "bessel_j1", "The Bessel function of the first kind, order 1.")
bessel_y0 = _fn(_y0, "bessel_y0", "The Bessel function of the second kind, order 0.")
bessel_y1 = _fn(_y1, "bessel_y1", "The Bessel function of the second kind, order 1.")
modified_bessel_i0 = _fn(_i0, "modified_bessel_i0", "The modified Bessel function of the first kind, order 0.")
modified_bessel_i1 = _fn(_i1, "modified_bessel_i1", "The modified Bessel function of the first kind, order 1.")
modified_bessel_k0 = _fn(_k0, "modified_bessel_k0", "The modified Bessel function of the second kind, order 0.")
modified_bessel_k1 = _fn(_k1, "modified_bessel_k1", "The modified Bessel function of the second kind, order 1.")
scaled_modified_bessel_k0 = _fn(_k0e, "scaled_modified_bessel_k0", "``exp(x) K0(x)``.")
scaled_modified_bessel_k1 = _fn(_k1e, "scaled_modified_bessel_k1", "``exp(x) K1(x)``.")
spherical_bessel_j0 = _fn(_sph_j0, "spherical_bessel_j0", "``sin(x) / x``, the spherical Bessel function j0.")


def zeta(input, other, *, out=None) -> Tensor:
    """The Hurwitz zeta function ``sum_k (k + other)^-input``, differentiable in both arguments."""
    result = apply(_zeta, input, other)
    return result if out is None else out.copy_(result)


def beta(input, other) -> Tensor:
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)`` (not in PyTorch; SciPy's values)."""
    return apply(_beta, input, other)


def betainc(a, b, x) -> Tensor:
    """The regularised incomplete beta ``I_x(a, b)`` (not in PyTorch; SciPy's values), differentiable to any
    order in all three: in a and b by its differentiated power series (within 1e-14 of mpmath where measured)."""
    return apply(_betainc, a, b, x)
