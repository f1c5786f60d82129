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


OPS = [
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
]
