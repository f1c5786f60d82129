"""scipy.special's Bessel functions i0 ... y1 on every backend, with scipy's values (PyTorch's too)
where cupy's kernels give others. One forward per function, the same on numpy, cupy and the
simulated device: the fix-ups are ``xp.where`` on the input classes below, and give scipy's own
values on numpy.

cupy 14 computes ``j0 j1 y0 y1 i0 i1`` with CUDA's libdevice (``j0``, ``cyl_bessel_i0``, ...),
``i0e``/``i1e`` as ``exp(-|x|) * cyl_bessel_i0(x)``, and ``k0e``/``k1e`` as ``exp(x) * k0(x)`` on its
Cephes port of ``k0``/``k1``. Against scipy (Cephes; PyTorch has the same formulas):

- at +-inf scipy gives NaN for ``i0 i1 j0 j1 y0 y1`` (its asymptotic forms take inf/inf or cos(inf)),
  CUDA the limits (inf, 0): ``_AT_INF`` holds scipy's values there, NaN stays NaN;
- ``i0e i1e`` at +-inf: scipy 0, cupy ``0 * inf = NaN``; ``k0e k1e`` at +inf: scipy 0, cupy NaN;
- for large x the products lose: ``exp(-|x|)`` is subnormal from |x| ~ 708 and ``cyl_bessel_i0``
  overflows from ~714 (``i0e = NaN``); ``k0(x)`` is subnormal from ~705 and ``exp(x)`` overflows past
  709.78 (``k0e = inf``, then NaN), where scipy gives ~0.015 and ~0.047. From |x| = 500 the scaled
  functions are their asymptotic series (A&S 9.7.1-2, to below 1e-17 relative there);
- ``i0 i1``: scipy's ``exp(|x|)`` overflows past ``_EXP_MAX`` (inf, the sign of x for i1) where the
  true value (CUDA's) is finite up to ~713.98.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import backend as _backend

__all__ = ["scipy_bessel", "BESSEL", "ASYMPTOTIC_FROM"]

_INF, _NAN = math.inf, math.nan
# the largest double whose exp is finite: scipy's i0/i1 are inf beyond it
_EXP_MAX = float(np.log(np.finfo(np.float64).max))
ASYMPTOTIC_FROM = 500.0

# scipy's values at +inf and -inf
_AT_INF = {"i0": (_NAN, _NAN), "i1": (_NAN, _NAN), "i0e": (0.0, 0.0), "i1e": (0.0, -0.0),
           "k0": (0.0, _NAN), "k1": (0.0, _NAN), "k0e": (0.0, _NAN), "k1e": (0.0, _NAN),
           "j0": (_NAN, _NAN), "j1": (_NAN, _NAN), "y0": (_NAN, _NAN), "y1": (_NAN, _NAN)}
BESSEL = tuple(_AT_INF)


def _asymptotic_coefficients(order: int, kind: str, terms: int = 12) -> tuple:
    """a_k of I_v(x) e^-x ~ sum (-1)^k a_k / x^k / sqrt(2 pi x) and K_v(x) e^x ~ sqrt(pi / 2x) sum a_k / x^k,
    a_k = prod_{j<=k} (4 v^2 - (2j - 1)^2) / (k! 8^k)."""
    mu, a, out = 4 * order * order, 1.0, [1.0]
    for k in range(1, terms):
        a *= (mu - (2 * k - 1) ** 2) / (8 * k)
        out.append(-a if kind == "i" and k % 2 else a)
    return tuple(out)


def _asymptotic(xp, fname: str, x):
    """``fname`` (i0e, i1e, k0e, k1e) by its series at ``|x| >= ASYMPTOTIC_FROM`` (other entries: junk)."""
    kind, order = fname[0], int(fname[1])
    t = xp.abs(x)
    t = xp.where(t >= ASYMPTOTIC_FROM, t, ASYMPTOTIC_FROM)      # no 1/0 warnings off the range
    r = 1.0 / t
    series = 0.0
    for c in reversed(_asymptotic_coefficients(order, kind)):  # Horner in 1/x
        series = series * r + c
    if kind == "k":
        return series * xp.sqrt(math.pi / 2 * r)
    out = series / xp.sqrt(2 * math.pi * t)
    return out * xp.sign(x) if order else out


def scipy_bessel(fname: str):
    """The forward ``fwd(xp, a)`` of ``scipy.special.<fname>`` for a Bessel function of ``BESSEL``:
    in float64, rounded to ``a``'s dtype, scipy's values at the input classes where cupy's differ."""
    at_pos_inf, at_neg_inf = _AT_INF[fname]

    def fwd(xp, a):
        x = a.astype("float64")
        out = getattr(_backend.special(xp), fname)(x)
        if fname in ("i0", "i1"):
            big = xp.where(x < 0, -_INF, _INF) if fname == "i1" else _INF
            out = xp.where(xp.abs(x) > _EXP_MAX, big, out)
        elif fname.endswith("e"):
            far = (x if fname[0] == "k" else xp.abs(x)) >= ASYMPTOTIC_FROM
            out = xp.where(far, _asymptotic(xp, fname, x), out)
        edge = xp.where(x > 0, at_pos_inf, xp.where(x < 0, at_neg_inf, x))   # NaN stays NaN
        return xp.where(xp.isfinite(x), out, edge).astype(a.dtype, copy=False)
    fwd.__name__ = f"{fname}_fwd"
    return fwd
