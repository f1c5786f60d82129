"""float32 exp, log, tanh and erf for numba loops: range reduction plus a fitted polynomial.

numba's scalar ``math.exp``/``tanh``/``erf`` call libm once per element (no SVML in llvmlite),
7-14x slower than numpy's vectorised loops, and ``fastmath`` breaks overflow to inf. These are
branch-free float32 formulas (both sides of a case computed, then a select: a branch on random
data mispredicts and costs 5x) that LLVM can vectorise, in the scheme Cephes and Eigen use: reduce
the argument exactly, evaluate a short polynomial, scale by a power of two built from its bits.
The coefficients were fitted for this file (least squares on Chebyshev nodes, float64).
The only fastmath flag is ``contract`` (mul+add become one FMA, rounded once: as accurate or more);
``nnan``/``ninf`` would let LLVM drop the selects that give inf and nan.
Bounds, measured against float64 libm rounded to float32 by tests/test_compile_fastmath.py over
2^24 points spread across the whole float32 range plus the edges (0, denormals, the overflow
and underflow thresholds, +-inf, nan):

=========  =====================================================
exp32      <= 2 ulp (normal results); inf above 88.7228, 0 below -103.97
log32      <= 2 ulp; -inf at 0, nan below 0, denormal inputs exact in exponent
tanh32     <= 3 ulp; +-1 once e^2|x| overflows, x itself below 2^-12
erf32      <= 3 ulp; +-1 beyond |x| >= 4
=========  =====================================================

``sigmoid`` and ``gelu`` need no function of their own: the ops' forwards are written with
exp/erf/tanh, so the compiler composes these. Measured the same way: sigmoid <= 3 ulp where the
result is normal (x > -87.3; below -88.7 it is 0, as eager float32's ``1/(1+exp(-x))``), gelu
<= 4 ulp for x >= -1 and, below, within 2 ulp of 1 (relative to x) of eager float32's own
cancellation in ``1 + erf``.
Imported by the eager kernels beside it and by tapelab.compile's generated kernels (numba is optional:
``pip install tapelab[jit]``).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["exp32", "log32", "tanh32", "erf32", "maximum", "minimum", "select", "fma"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", fastmath={"contract"})


@intrinsic
def _bits_to_f32(typingctx, i):
    """The float32 whose bits are the int32 ``i`` (a bitcast, free in registers)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def _f32_to_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (float32, or float64): LLVM's exact ``llvm.fma``, as ATen's fused
    multiply-adds (its compiler contracts some, its ``Vectorized::fmadd`` others), whatever ``fastmath`` says."""
    if not all(isinstance(t, types.Float) for t in (a, b, c)) or len({t.bitwidth for t in (a, b, c)}) != 1 \
            or a.bitwidth not in (32, 64):
        return None
    width = a.bitwidth

    def codegen(context, builder, signature, args):
        real = ir.FloatType() if width == 32 else ir.DoubleType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(real, [real] * 3), f"llvm.fma.f{width}")
        return builder.call(fn, args)
    return a(a, a, a), codegen


@intrinsic
def select(typingctx, cond, a, b):
    """``a if cond else b`` as one LLVM ``select``: numba's conditional expression is a branch,
    which stops the loop from vectorising (4x on tanh)."""
    if not isinstance(cond, types.Boolean) or a != b:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])
    return a(cond, a, b), codegen


# exp: x = n ln2 + r, |r| <= ln2/2; ln2 split so n*_LN2_HI is exact for |n| < 2^9
_LOG2E = F(1.4426950408889634)
_LN2_HI, _LN2_LO = F(0.693359375), F(-2.12194440e-4)
_ROUND = F(12582912.0)
_E0, _E1, _E2, _E3, _E4, _E5 = (F(c) for c in (0.5000000013462222, 0.1666666671900771, 0.04166646497610965,
                                                0.008333298480357151, 0.0013933643523677507, 0.0001989927622123444))


@njit(**_JIT)
def _exp_reduced(x):
    """e^x as (y, n) with e^x = y 2^n, y in [sqrt(1/2), sqrt(2)]: no clamps, so x must be finite
    and |x| <= 104 (the callers clamp to what they need)."""
    n = (x * _LOG2E + _ROUND) - _ROUND               # round to nearest by the 1.5 * 2^23 trick (no libm call)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    p = ((((_E5 * r + _E4) * r + _E3) * r + _E2) * r + _E1) * r + _E0
    return p * (r * r) + r + F(1.0), np.int32(n)


@njit(**_JIT)
def exp32(x):
    xc = select(x > F(-104.0), x, F(-104.0))          # selects, not branches: the loop vectorises
    xc = select(xc < F(89.0), xc, F(89.0))            # (nan picks -104 here, and itself at the end)
    y, k = _exp_reduced(xc)
    k1 = k >> 1                      # two factors keep 2^k1, 2^k2 normal for k in [-150, 128]
    k2 = k - k1
    y = y * _bits_to_f32(np.int32((k1 + 127) << 23)) * _bits_to_f32(np.int32((k2 + 127) << 23))
    return select(x == x, y, x)


# log: x = m 2^e, m in [sqrt(1/2), sqrt(2)), log(1+f) = f - f^2/2 + f^3 P(f)
_L = tuple(F(c) for c in (0.3333332856418264, -0.2500029652197341, 0.2000147134496428, -0.16642250850244297,
                          0.1420211432279746, -0.12972145261161896, 0.1271267875541743, -0.08102270154233479))
_SQRT2 = F(1.4142135623730951)


@njit(**_JIT)
def log32(x):
    small = x < F(1.1754943508222875e-38)            # denormal: scale into the normal range first
    xs = select(small, x * F(8388608.0), x)
    b = _f32_to_bits(xs)
    e = ((b >> 23) & 0xFF) - np.int32(127) - select(small, np.int32(23), np.int32(0))
    m = _bits_to_f32(np.int32((b & 0x7FFFFF) | 0x3F800000))
    big = m > _SQRT2
    m = select(big, m * F(0.5), m)
    e = select(big, e + np.int32(1), e)
    f = m - F(1.0)
    p = _L[7]
    p = p * f + _L[6]
    p = p * f + _L[5]
    p = p * f + _L[4]
    p = p * f + _L[3]
    p = p * f + _L[2]
    p = p * f + _L[1]
    p = p * f + _L[0]
    ef = F(e)
    y = f * f * f * p - F(0.5) * f * f + ef * _LN2_LO
    y = (f + y) + ef * _LN2_HI
    y = select(x == F(0.0), F(-np.inf), y)
    y = select(x < F(0.0), F(np.nan), y)
    return select((x == np.inf) | (x != x), x, y)


# tanh: x + x^3 P(x^2) below 0.625, 1 - 2/(e^2|x| + 1) above
_T = tuple(F(c) for c in (-0.3333333139049893, 0.13332890195573738, -0.05386387908576563, 0.021045563736091944,
                          -0.006155063330026323))


@njit(**_JIT)
def tanh32(x):
    a = abs(x)
    z = x * x
    small = x + x * z * ((((_T[4] * z + _T[3]) * z + _T[2]) * z + _T[1]) * z + _T[0])
    # e^2a for 2a in [0, 19] only: tanh rounds to 1 from 9.01 on, so the clamp changes nothing, 2^n
    # stays normal (one scale factor) and nan needs no test of its own (it takes ``small`` below);
    # 13 fewer instructions per 8 lanes than calling exp32, 1.2x on tanh alone
    ac = select(a < F(9.5), a, F(9.5))
    e, n = _exp_reduced(ac + ac)
    big = F(1.0) - F(2.0) / (e * _bits_to_f32(np.int32((n + 127) << 23)) + F(1.0))
    big = select(x > 0, big, -big)
    y = select(a >= F(0.625), big, small)                   # nan: small, which is nan
    return select(a < F(2.44140625e-4), x, y)               # x^3/3 is below half an ulp (-0 stays -0)


# erf: x P(x^2) below 1; 1 - e^-x^2 Q(1/x) on [1, 4); +-1 beyond
_R = tuple(F(c) for c in (1.1283791665927294, -0.3761262987668224, 0.11283625717990053, -0.02685539922782336,
                          0.005191218026148317, -0.0008034843975296135, 7.933485981627408e-05))
_Q = tuple(F(c) for c in (0.00012575778957843773, 0.5616814878337912, 0.021224172385517992, -0.3789607464510315,
                          0.23908537357053447, 0.222558301508338, -0.5183950053459511, 0.4245884454873023,
                          -0.17400144127992018, 0.029677235900596163))


@njit(**_JIT)
def erf32(x):
    a = abs(x)
    z = x * x
    small = x * ((((((_R[6] * z + _R[5]) * z + _R[4]) * z + _R[3]) * z + _R[2]) * z + _R[1]) * z + _R[0])
    t = F(1.0) / a
    q = _Q[9]
    q = q * t + _Q[8]
    q = q * t + _Q[7]
    q = q * t + _Q[6]
    q = q * t + _Q[5]
    q = q * t + _Q[4]
    q = q * t + _Q[3]
    q = q * t + _Q[2]
    q = q * t + _Q[1]
    q = q * t + _Q[0]
    e, n = _exp_reduced(-select(z < F(16.0), z, F(16.0)))   # e^-x^2 where it is used (|x| < 4): one
    big = F(1.0) - e * _bits_to_f32(np.int32((n + 127) << 23)) * q   # normal scale factor, as tanh32's
    big = select(a >= F(4.0), F(1.0), big)
    big = select(x > 0, big, -big)
    return select(a >= F(1.0), big, small)                  # nan: small, which is nan


@njit(**_JIT)
def maximum(a, b):
    """numpy's maximum: nan if either is nan."""
    return select((a > b) | (a != a), a, b)


@njit(**_JIT)
def minimum(a, b):
    return select((a < b) | (a != a), a, b)
