"""float32 exp, log, tanh and erf for numba loops: range reduction plus a fitted polynomial; and
PyTorch's own float32 exp, tanh, log, erf and gelu, bit for bit.

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

Below those, PyTorch's own float32 functions reimplemented operation by operation (FMAs where its
C code has them, none elsewhere), for the eager kernels that match PyTorch's CPU results bit for bit
(tests/test_activation_bits.py); their bounds are their originals':

==================  ===============================================================================
exp_sleef_u10       Sleef ``expf_u10`` (ATen's ``Vectorized<float>::exp``), <= 1 ulp
tanh_sleef_u10      Sleef ``tanhf_u10`` (``Vectorized::tanh``, double-float arithmetic), <= 1 ulp
log_sleef_u10       Sleef ``logf_u1`` (``Vectorized::log``, Sleef's ``_u10`` name), <= 1 ulp
log1p_sleef_core    Sleef ``log1pf_u10`` (``Vectorized::log1p``) up to 1e38 (beyond, Sleef's ``logf_u1``), <= 1 ulp
expm1_sleef_u10     Sleef ``expm1f_u10`` (``Vectorized::expm1``), <= 1 ulp
erf_aten            ATen's ``Vectorized::erf`` (Abramowitz-Stegun 7.1.26 with Sleef's exp), ~1e-7 abs
exp_u20, exp_onednn ATen's ``exp_u20`` / oneDNN's JIT exp (degree-5 polynomial), <= 20 ulp
gelu_onednn_*       oneDNN's eltwise gelu_erf: AVX512 minimax pieces / Abramowitz-Stegun below AVX512
gelu_grad_onednn    oneDNN's gelu_erf backward (every ISA)
==================  ===============================================================================

``aten_lanes`` and ``onednn_avx512`` say which of PyTorch's code paths this CPU takes (the vector width
decides which elements take ATen's scalar path, and the row sums' order).

``sigmoid`` and ``gelu`` need no function of their own in compiled code: the ops' forwards are written
with exp/erf/tanh, so the compiler composes exp32/erf32/tanh32. Measured the same way: sigmoid <= 3 ulp where the
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

__all__ = ["exp32", "log32", "tanh32", "erf32", "maximum", "minimum", "select", "fma", "exp_sleef_u10", "erf_aten",
           "tanh_sleef_u10", "log_sleef_u10", "pow_sleef_u10", "log1p_sleef_core",
           "expm1_sleef_u10", "exp_onednn", "exp_u20", "gelu_onednn_avx512", "gelu_onednn_avx2",
           "gelu_grad_onednn", "gelu16_onednn_avx512", "aten_lanes", "onednn_avx512", "onednn_fp16"]

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


# ---------------------------------------------------------------- ATen's own float32 functions, bit for bit
# PyTorch's vectorised CPU kernels (Vectorized<float>, AVX2 and AVX512 alike) take exp, tanh and log from
# Sleef's u10 functions and erf from a polynomial of ATen's own (vec512_float.h / vec256_float.h). These
# reproduce them operation by operation: each multiply-add Sleef's FMA builds (and ATen's intrinsics) fuse
# is an explicit ``fma``; no other is fused (``_JIT_EXACT`` has no ``contract``), so the results are the
# same floats, not just as accurate. The rounding to an integer is the 1.5 * 2^23 trick, read as bits (no
# float-to-int conversion: nan or inf gives a harmless integer, and the selects at the end give the result).
_JIT_EXACT = dict(cache=True, error_model="numpy")
_JIT_INLINE = dict(_JIT_EXACT, inline="always")   # numba-IR inlining: LLVM's inliner gives up on tanh's depth (50x)
_R_LN2 = F(1.442695040888963407359924681001892137426645954152985934135449406931)
_L2U, _L2L = F(0.693145751953125), F(1.428606765330187045e-06)
_MAGIC_BITS = np.int32(0x4B400000)                     # the bits of 1.5 * 2^23
_S = tuple(F(c) for c in (0.000198527617612853646278381, 0.00139304355252534151077271, 0.00833336077630519866943359,
                          0.0416664853692054748535156, 0.166666671633720397949219, 0.5))
_SIGN = np.int32(-2147483648)


@njit(**_JIT_INLINE)
def _rint(u):
    """``(float(rint(u)), int32(rint(u)))``, round half to even as ``cvtps2dq``; exact for |u| < 2^22."""
    t = u + _ROUND
    return t - _ROUND, np.int32(_f32_to_bits(t) - _MAGIC_BITS)


@njit(**_JIT_INLINE)
def _ldexp2(u, q):
    """``u 2^q`` as Sleef's ``vldexp2``: two factors 2^(q>>1), 2^(q - q>>1), each rounding once."""
    h = np.int32(q >> np.int32(1))
    return u * _bits_to_f32(np.int32((h + np.int32(127)) << np.int32(23))) \
        * _bits_to_f32(np.int32(np.int32(q - h + np.int32(127)) << np.int32(23)))


@njit(**_JIT_EXACT)
def exp_sleef_u10(d):
    """Sleef's ``expf_u10`` (its ``xexpf``, FMA build): ATen's ``Vectorized<float>::exp``."""
    qf, q = _rint(d * _R_LN2)
    s = fma(qf, -_L2U, d)
    s = fma(qf, -_L2L, s)
    u = fma(_S[0], s, _S[1])
    u = fma(u, s, _S[2])
    u = fma(u, s, _S[3])
    u = fma(u, s, _S[4])
    u = fma(u, s, _S[5])
    u = F(1.0) + fma(s * s, u, s)
    u = _ldexp2(u, q)
    u = select(d < F(-104.0), F(0.0), u)
    u = select(F(100.0) < d, F(np.inf), u)
    return select(d == d, u, d)                       # nan: q above is garbage, give d itself


_P = F(0.3275911)
_PE = tuple(F(c) for c in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


@njit(**_JIT_INLINE)
def erf_aten(x):
    """ATen's ``Vectorized<float>::erf``: Abramowitz-Stegun 7.1.26 with Sleef's exp, ``sign(x) (1 - r t e^-x^2)``
    (a few ulp from erf; PyTorch's float32 gelu is built on it)."""
    a = abs(x)
    t = F(1.0) / fma(_P, a, F(1.0))
    r = fma(_PE[4], t, _PE[3])
    r = fma(r, t, _PE[2])
    r = fma(r, t, _PE[1])
    r = fma(r, t, _PE[0])
    e = exp_sleef_u10(-(x * x))
    y = fma(-e * t, r, F(1.0))
    return _bits_to_f32(np.int32(_f32_to_bits(y) ^ (_f32_to_bits(x) & _SIGN)))


# double-float arithmetic (Sleef's df.h, FMA branch): a value is a pair (x, y), x + y unevaluated
@njit(**_JIT_INLINE)
def _dfadd2_ff(x, y):
    s = x + y
    v = s - x
    return s, (x - (s - v)) + (y - v)


@njit(**_JIT_INLINE)
def _dfadd2_f2f(xx, xy, y):
    s = xx + y
    v = s - xx
    return s, ((xx - (s - v)) + (y - v)) + xy


@njit(**_JIT_INLINE)
def _dfadd2_f2f2(xx, xy, yx, yy):
    s = xx + yx
    v = s - xx
    return s, ((xx - (s - v)) + (yx - v)) + (xy + yy)


@njit(**_JIT_INLINE)
def _dfadd_f2f2(xx, xy, yx, yy):
    """|x| >= |y|."""
    s = xx + yx
    return s, (((xx - s) + yx) + xy) + yy


@njit(**_JIT_INLINE)
def _dfadd_ff2(x, yx, yy):
    s = x + yx
    return s, ((x - s) + yx) + yy


@njit(**_JIT_INLINE)
def _dfadd_f2f(xx, xy, y):
    s = xx + y
    return s, ((xx - s) + y) + xy


@njit(**_JIT_INLINE)
def _dfmul_f2f(xx, xy, y):
    s = xx * y
    return s, fma(xy, y, fma(xx, y, -s))


@njit(**_JIT_INLINE)
def _dfmul_f2f2(xx, xy, yx, yy):
    s = xx * yx
    return s, fma(xx, yy, fma(xy, yx, fma(xx, yx, -s)))


@njit(**_JIT_INLINE)
def _dfsqu(xx, xy):
    s = xx * xx
    return s, fma(xx + xx, xy, fma(xx, xx, -s))


@njit(**_JIT_INLINE)
def _dfrec_f2(dx, dy):
    s = F(1.0) / dx
    return s, s * fma(-dy, s, fma(-dx, s, F(1.0)))


@njit(**_JIT_INLINE)
def _dfdiv(nx, ny, dx, dy):
    t = F(1.0) / dx
    s = nx * t
    u = fma(t, nx, -s)
    v = fma(-dy, t, fma(-dx, t, F(1.0)))
    return s, fma(s, v, fma(ny, t, u))


_K2 = tuple(F(c) for c in (0.1980960224e-3, 0.1394256484e-2, 0.8333456703e-2, 0.4166637361e-1))
_K2_6 = F(0.166666659414234244790680580464)


@njit(**_JIT_INLINE)
def _expk2(d):
    """Sleef's ``expk2f`` of the pair (d, 0), -17 <= d <= 89 (no flush to 0 below -104): e^d as a pair."""
    qf, q = _rint(d * _R_LN2)
    sx, sy = _dfadd2_f2f(d, F(0.0), qf * -_L2U)
    sx, sy = _dfadd2_f2f(sx, sy, qf * -_L2L)
    u = fma(_K2[0], sx, _K2[1])
    u = fma(u, sx, _K2[2])
    u = fma(u, sx, _K2[3])
    tx, ty = _dfmul_f2f(sx, sy, u)
    tx, ty = _dfadd2_f2f(tx, ty, _K2_6)
    tx, ty = _dfmul_f2f2(sx, sy, tx, ty)
    tx, ty = _dfadd2_f2f(tx, ty, F(0.5))
    qx, qy = _dfsqu(sx, sy)
    tx, ty = _dfmul_f2f2(qx, qy, tx, ty)
    tx, ty = _dfadd2_f2f2(sx, sy, tx, ty)
    tx, ty = _dfadd_ff2(F(1.0), tx, ty)
    return _ldexp2(tx, q), _ldexp2(ty, q)


@njit(**_JIT_INLINE)
def tanh_sleef_u10(x):
    """Sleef's ``tanhf_u10`` (``xtanhf``, FMA build): ATen's ``Vectorized<float>::tanh``, (e - 1/e)/(e + 1/e) in
    double-float arithmetic, 1 beyond |x| > 8.664339742."""
    a = abs(x)
    ac = select(a < F(9.0), a, F(9.0))             # past 8.66 the result is 1 anyway; nan takes 9, then nan
    dx, dy = _expk2(ac)
    ex, ey = _dfrec_f2(dx, dy)
    nx, ny = _dfadd_f2f2(dx, dy, -ex, -ey)
    mx, my = _dfadd_f2f2(dx, dy, ex, ey)
    qx, qy = _dfdiv(nx, ny, mx, my)
    y = qx + qy
    y = select((a > F(8.664339742)) | (y != y), F(1.0), y)
    y = _bits_to_f32(np.int32(_f32_to_bits(y) ^ (_f32_to_bits(x) & _SIGN)))
    return select(x == x, y, x)


_LN2_DF = (F(0.69314718246459960938), F(-1.904654323148236017e-09))
_LG = tuple(F(c) for c in (0.3027294874, 0.3996108174, 0.6666694880))


@njit(**_JIT_INLINE)
def _log_series(sx, sy, xx, xy):
    """Sleef's ``logf_u1`` and ``log1pf_u10`` end alike: ``e ln2`` (the double-float ``sx + sy``) plus
    ``2 atanh(x)`` of the double-float ratio ``x = xx + xy`` as its series, rounded to float once."""
    x2 = xx * xx
    t = fma(_LG[0], x2, _LG[1])
    t = fma(t, x2, _LG[2])
    sx, sy = _dfadd_f2f2(sx, sy, xx * F(2.0), xy * F(2.0))
    sx, sy = _dfadd_f2f(sx, sy, (x2 * xx) * t)
    return sx + sy


@njit(**_JIT_EXACT)
def log_sleef_u10(d):
    """Sleef's ``logf_u1`` (FMA build; the name ATen calls is ``Sleef_logf16_u10``): ATen's ``Vectorized<float>::log``."""
    small = d < F(1.1754943508222875e-38)
    dd = select(small, d * F(1.8446744073709552e19), d)
    e = np.int32(((_f32_to_bits(dd * F(1.0 / 0.75)) >> np.int32(23)) & np.int32(0xFF)) - np.int32(127))
    m = _bits_to_f32(np.int32(_f32_to_bits(dd) - np.int32(e << np.int32(23))))
    e = select(small, np.int32(e - np.int32(64)), e)
    ef = F(e)
    sx, sy = _dfmul_f2f(_LN2_DF[0], _LN2_DF[1], ef)
    ax, ay = _dfadd2_ff(F(-1.0), m)
    bx, by = _dfadd2_ff(F(1.0), m)
    xx, xy = _dfdiv(ax, ay, bx, by)
    r = _log_series(sx, sy, xx, xy)
    r = select(d == F(np.inf), F(np.inf), r)
    r = select((d < F(0.0)) | (d != d), F(np.nan), r)
    return select(d == F(0.0), F(-np.inf), r)



# Sleef's ``log1pf_u10`` and ``expm1f_u10`` (ATen's ``Vectorized<float>::log1p`` / ``expm1``; its float32 kernels
# run them over every element, the tail as a partial vector: ``vec::map``)
_ONE_BITS = np.int32(0x3F800000)
_NAN_ALL_ONES = np.int32(-1)                           # ``r | mask``: the bits of a NaN with every bit set


@njit(**_JIT_INLINE)
def _dfadd_ff(x, y):
    """|x| >= |y|."""
    s = x + y
    return s, (x - s) + y


@njit(**_JIT_INLINE)
def log1p_sleef_core(d):
    """Sleef's ``log1pf_u10`` (FMA build) for ``d <= 1e38``; above (and for NaN) Sleef gives ``logf_u1(d)``
    (``log_sleef_u10``), which a caller selects (a vector loop computes it only when some element needs it).
    The exponent is read from the bits (Sleef's AVX2 path); AVX512's getexp gives the same integer for every
    ``d`` whose result is not a special case."""
    dp1 = d + F(1.0)
    small = dp1 < _FLT_MIN
    w = select(small, dp1 * F(1.8446744073709552e19), dp1)
    e = np.int32(((_f32_to_bits(w * F(1.0 / 0.75)) >> np.int32(23)) & np.int32(0xFF)) - np.int32(127))
    t = _bits_to_f32(np.int32(_ONE_BITS - np.int32(e << np.int32(23))))
    m = fma(d, t, t - F(1.0))
    e = select(small, np.int32(e - np.int32(64)), e)
    sx, sy = _dfmul_f2f(_LN2_DF[0], _LN2_DF[1], F(e))
    bx, by = _dfadd_ff(F(2.0), m)
    xx, xy = _dfdiv(m, F(0.0), bx, by)
    r = _log_series(sx, sy, xx, xy)
    r = select(F(-1.0) > d, _bits_to_f32(_NAN_ALL_ONES), r)
    r = select(d == F(-1.0), F(-np.inf), r)
    return select(_f32_to_bits(d) == _SIGN, d, r)      # -0.0 stays


@njit(**_JIT_INLINE)
def expm1_sleef_u10(a):
    """Sleef's ``expm1f_u10`` (FMA build): ``expk2f(a) - 1`` in double-float arithmetic; inf above 88.72283,
    -1 below -16.635532. ``a`` is clamped to [-17, 89] first (the selects replace every result outside)."""
    ac = select(a < F(89.0), a, F(89.0))
    ac = select(ac > F(-17.0), ac, F(-17.0))
    dx, dy = _expk2(ac)
    sx, sy = _dfadd2_f2f(dx, dy, F(-1.0))
    x = sx + sy
    x = select(a > F(88.72283172607421875), F(np.inf), x)
    x = select(a < F(-16.635532333438687426013570), F(-1.0), x)
    x = select(_f32_to_bits(a) == _SIGN, a, x)          # -0.0 stays
    return select(a == a, x, a)



# Sleef's ``powf_u10`` (``xpowf``): e^(y log|x|) with the log and the product as double-floats (``logkf``,
# ``expkf``), then IEEE's special cases. int32 arithmetic wraps as the vector registers' does.
_FLT_MIN = F(1.1754943508222875e-38)
_LK = tuple(F(c) for c in (0.240320354700088500976562, 0.285112679004669189453125, 0.400007992982864379882812))
_LK_C = (F(0.66666662693023681640625), F(3.69183861259614332084311e-09))
_EK = tuple(F(c) for c in (0.00136324646882712841033936, 0.00836596917361021041870117, 0.0416710823774337768554688,
                           0.166665524244308471679688, 0.499999850988388061523438))
_TWO24 = F(16777216.0)


@njit(**_JIT_INLINE)
def _logk(d, avx512):
    """Sleef's ``logkf``: log(d) as a double-float, d > 0 (AVX512's getexp/getmant, else ilogb and ldexp)."""
    small = d < _FLT_MIN
    w = select(small, d * F(1.8446744073709552e19), d)
    p = w * F(1.0 / 0.75)
    e = np.int32(((_f32_to_bits(p) >> np.int32(23)) & np.int32(0xFF)) - np.int32(127))
    if avx512:   # getmant(d) in [0.75, 1.5) from d's own bits; e from the rounded product, as the intrinsics
        m1 = _bits_to_f32(np.int32((_f32_to_bits(w) & np.int32(0x7FFFFF)) | np.int32(0x3F800000)))
        m = select(m1 >= F(1.5), m1 * F(0.5), m1)
    else:
        m = _bits_to_f32(np.int32(_f32_to_bits(w) - np.int32(e << np.int32(23))))
    e = select(small, np.int32(e - np.int32(64)), e)
    ax, ay = _dfadd2_ff(F(-1.0), m)
    bx, by = _dfadd2_ff(F(1.0), m)
    xx, xy = _dfdiv(ax, ay, bx, by)
    x2x, x2y = _dfsqu(xx, xy)
    t = fma(_LK[0], x2x, _LK[1])
    t = fma(t, x2x, _LK[2])
    sx, sy = _dfmul_f2f(_LN2_DF[0], _LN2_DF[1], F(e))
    sx, sy = _dfadd_f2f2(sx, sy, xx * F(2.0), xy * F(2.0))
    cx, cy = _dfmul_f2f(x2x, x2y, t)
    cx, cy = _dfadd2_f2f2(cx, cy, _LK_C[0], _LK_C[1])
    px, py = _dfmul_f2f2(x2x, x2y, xx, xy)
    px, py = _dfmul_f2f2(px, py, cx, cy)
    return _dfadd_f2f2(sx, sy, px, py)


@njit(**_JIT_INLINE)
def _ldexp_sleef(x, q):
    """Sleef's ``vldexp_vf_vf_vi2``: x 2^q in five roundings (so q may reach beyond one float's exponents)."""
    q = np.int64(q)
    m = q >> 31
    m = np.int64(np.int32((((m + q) >> 6) - m) << 4))
    q = np.int64(np.int32(q - (m << 2)))
    m = m + 127
    m = select(m > 0, m, np.int64(0))
    m = select(m <= 255, m, np.int64(255))
    u = _bits_to_f32(np.int32(m << 23))
    x = x * u * u * u * u
    return x * _bits_to_f32(np.int32(np.int32(q + 127) << np.int32(23)))


@njit(**_JIT_INLINE)
def _expk(dx, dy):
    """Sleef's ``expkf``: e^(dx + dy), 0 below dx < -104."""
    u = (dx + dy) * _R_LN2
    # cvtps2dq: nearest-even, 0x80000000 out of int32's range (and for nan)
    fits = abs(u) < F(2147483648.0)
    r = select(abs(u) < F(8388608.0), (u + _ROUND) - _ROUND, u)
    q = select(fits, np.int32(np.int64(select(fits, r, F(0.0)))), np.int32(-2147483648))
    qf = F(q)
    sx, sy = _dfadd2_f2f(dx, dy, qf * -_L2U)
    sx, sy = _dfadd2_f2f(sx, sy, qf * -_L2L)
    s = sx + sy
    sy = (sx - s) + sy
    sx = s
    u = fma(_EK[0], sx, _EK[1])
    u = fma(u, sx, _EK[2])
    u = fma(u, sx, _EK[3])
    u = fma(u, sx, _EK[4])
    qx, qy = _dfsqu(sx, sy)
    tx, ty = _dfmul_f2f(qx, qy, u)
    tx, ty = _dfadd_f2f2(sx, sy, tx, ty)
    tx, ty = _dfadd_ff2(F(1.0), tx, ty)
    u = _ldexp_sleef(tx + ty, q)
    return select(dx < F(-104.0), F(0.0), u)


@njit(**_JIT_INLINE)
def pow_sleef_u10(x, y, avx512):
    """Sleef's ``powf_u10`` (FMA build): ATen's ``Vectorized<float>::pow``, <= 1 ulp."""
    ay = abs(y)
    yisint = np.trunc(y) == y or ay > _TWO24
    yisodd = yisint and ay < _TWO24 and (np.int64(np.trunc(y)) & np.int64(1)) == np.int64(1)
    lx, ly = _logk(abs(x), avx512)
    px, py = _dfmul_f2f(lx, ly, y)
    r = _expk(px, py)
    r = select(r != r, F(np.inf), r)
    r = r * select(x > F(0.0), F(1.0), select(yisint, select(yisodd, F(-1.0), F(1.0)), F(np.nan)))
    neg_y = _f32_to_bits(y) < np.int32(0)
    efx = select(neg_y, F(1.0) - abs(x), abs(x) - F(1.0))
    r = select(ay == F(np.inf), select(efx < F(0.0), F(0.0), select(efx == F(0.0), F(1.0), F(np.inf))), r)
    x_zero = x == F(0.0)
    mag = select(neg_y != x_zero, F(0.0), F(np.inf))
    mag = select(yisodd & (_f32_to_bits(x) < np.int32(0)), -mag, mag)
    r = select((abs(x) == F(np.inf)) | x_zero, mag, r)
    r = select((x != x) | (y != y), F(np.nan), r)
    return select((y == F(0.0)) | (x == F(1.0)), F(1.0), r)


# ---------------------------------------------------------------- oneDNN's gelu (erf form), bit for bit
# PyTorch's float32 ``gelu`` and ``gelu_backward`` (approximate="none") on a contiguous CPU tensor of more
# than one element call oneDNN's eltwise gelu_erf (``use_mkldnn`` in ATen's Activation.cpp), a JIT kernel
# of its own arithmetic (oneDNN's jit_uni_eltwise_injector): on AVX512 the forward is a piecewise degree-5
# minimax polynomial in |x|, 25 pieces picked by the float's exponent and two mantissa bits; on AVX2 it
# and, on every ISA, the backward are Abramowitz-Stegun's erf with oneDNN's own exp. The coefficients are
# the kernel's (its table, as float32 bits); the code follows its order of operations and FMAs.
_GELU_MINIMAX = np.array((
    # degree 0
    (0xa6f2cb94, 0x32827792, 0x3381cc0c, 0x34523d4a, 0x351ac44d, 0x35f36d88, 0x36ee8229, 0x37b8a3bb, 0x3867a213,
     0x3940033b, 0x3a2a5a1d, 0x3ae35863, 0x3b7828f2, 0x3c08b14b, 0x3c515ed3, 0xbb503236, 0xbd8d8e5e, 0xbe8abcd9,
     0xbf0c19a2, 0xbeccb328, 0x3e176ced, 0x3f470d99, 0x3f7abb28, 0x3f800000, 0x00000000),
    # degree 1
    (0x3f4c422a, 0x3f4c421f, 0x3f4c4207, 0x3f4c41cb, 0x3f4c413b, 0x3f4c3fad, 0x3f4c3a2f, 0x3f4c2d40, 0x3f4c146a,
     0x3f4bc341, 0x3f4ad08c, 0x3f48f8cf, 0x3f45fac7, 0x3f404e07, 0x3f3b980f, 0x3f48dff3, 0x3f78b21b, 0x3fbb0704,
     0x40019c32, 0x3fe536d6, 0x3f81331e, 0x3e6c8684, 0x3c98f936, 0x00000000, 0x3f800000),
    # degree 2
    (0xb62173f4, 0x3735e4cf, 0x37f2ff89, 0x388c23be, 0x3917535c, 0x39ab2ab0, 0x3a60fadb, 0x3af9b960, 0x3b6e5491,
     0x3c0a4ec5, 0x3ca5aa8c, 0x3d2138d9, 0x3d8737d4, 0x3ddfb660, 0x3e0f27ab, 0x3d94004b, 0xbe0efdeb, 0xbf1d96c3,
     0xbf89db58, 0xbf6d9897, 0xbef69fb8, 0xbdc4f8a8, 0xbbde6422, 0x00000000, 0x00000000),
    # degree 3
    (0xbe081a19, 0xbe084570, 0xbe08639b, 0xbe089837, 0xbe08f409, 0xbe09ab95, 0xbe0b66d0, 0xbe0e400a, 0xbe124df8,
     0xbe1bde02, 0xbe2f19c9, 0xbe4931bf, 0xbe685fbc, 0xbe89c95f, 0xbe96cbca, 0xbe8044aa, 0xbe0550f2, 0x3dcfd6a1,
     0x3e94c826, 0x3e79345f, 0x3decec91, 0x3ca46568, 0x3aa1e00a, 0x00000000, 0x00000000),
    # degree 4
    (0xba3d61db, 0x39f097a3, 0x3a5845dc, 0x3ab1fa35, 0x3b0cefb8, 0x3b653ab6, 0x3bcae527, 0x3c221712, 0x3c6c5840,
     0x3cc0a703, 0x3d1dcc19, 0x3d63656d, 0x3d955907, 0x3dbf9910, 0x3dd53f69, 0x3db7dcef, 0x3d639ebe, 0xba6ede48,
     0xbd22be69, 0xbd041cf1, 0xbc64f5ab, 0xbb097a32, 0xb8ebf380, 0x00000000, 0x00000000),
    # degree 5
    (0x3cb7d80c, 0x3c9b6050, 0x3c978d11, 0x3c92e850, 0x3c8d058b, 0x3c848454, 0x3c6cd623, 0x3c4c824b, 0x3c2a7935,
     0x3be0b390, 0x3b0651ac, 0xbb232f53, 0xbbd42fa0, 0xbc2c5366, 0xbc492c9e, 0xbc2a7aa6, 0xbbd55d04, 0xba823a76,
     0x3b102aa8, 0x3ae25a7e, 0x3a31f792, 0x38b84375, 0x3689bb5a, 0x00000000, 0x00000000),
), np.uint32).view(np.float32)

_GELU_IDX_BIAS = np.int32(-1038090241)                 # 0xc21fffff
_GELU_RBOUND = np.array([0x40b15cee], np.uint32).view(np.float32)[0]
_AS_P = np.array([0x3ea7ba05], np.uint32).view(np.float32)[0]
_AS_SQRT_HALF = np.array([0x3f3504f3], np.uint32).view(np.float32)[0]
_AS_INV_SQRT_PI = np.array([0x3f106eba], np.uint32).view(np.float32)[0]
_AS = tuple(np.array([0x3e827906, 0xbe91a98e, 0x3fb5f0e3, 0xbfba00e3, 0x3f87dc22], np.uint32).view(np.float32))
_OE = tuple(np.array([0x3f7ffffb, 0x3efffee3, 0x3e2aad40, 0x3d2b9d0d, 0x3c07cfce], np.uint32).view(np.float32))
_OE_LOG2E, _OE_LN_MAX, _OE_LN_MIN, _OE_LN2 = np.array([0x3fb8aa3b, 0x42b17218, 0xc2aeac50, 0x3f317218],
                                                     np.uint32).view(np.float32)


@njit(**_JIT_INLINE)
def _exp_ln2_poly(x, fused):
    low = x < _OE_LN_MIN
    v = select(x < _OE_LN_MAX, x, _OE_LN_MAX)
    v = select(v > _OE_LN_MIN, v, _OE_LN_MIN)
    fx = np.floor(fma(v, _OE_LOG2E, F(0.5)) if fused else v * _OE_LOG2E + F(0.5))
    r = fma(-fx, _OE_LN2, v)
    k = np.int32(_f32_to_bits(fx - F(1.0) + _ROUND) - _MAGIC_BITS)     # fx - 1: an integer in [-127, 127]
    scale = select(low, F(0.0), _bits_to_f32(np.int32((k + np.int32(127)) << np.int32(23))))
    p = fma(_OE[4], r, _OE[3])
    p = fma(p, r, _OE[2])
    p = fma(p, r, _OE[1])
    p = fma(p, r, _OE[0])
    p = fma(p, r, F(1.0))
    return p * scale * F(2.0)


@njit(**_JIT_EXACT)
def exp_u20(x):
    """ATen's ``Vectorized<float>::exp_u20`` (its flash-attention softmax): oneDNN's exp below, but
    ``floor(x log2 e + 1/2)`` from one FMA."""
    return _exp_ln2_poly(x, True)


@njit(**_JIT_EXACT)
def exp_onednn(x):
    """oneDNN's JIT exp (``exp_compute_vector_fwd``; ``exp_u20`` differs in one FMA): clamp to [ln FLT_MIN,
    ln FLT_MAX] (nan takes the upper bound, as ``minps``), n = floor(x log2 e + 1/2), a degree-5
    polynomial of r = x - n ln 2, times 2^(n-1) then 2; 0 below ln FLT_MIN."""
    return _exp_ln2_poly(x, False)


@njit(**_JIT_INLINE)
def gelu_onednn_avx512(s):
    """``s/2 (1 + erf(s/sqrt 2))`` as oneDNN's AVX512 gelu_erf: the minimax pieces."""
    b = _f32_to_bits(s)
    ab = np.int32(b & np.int32(0x7FFFFFFF))
    a = _bits_to_f32(ab)
    idx = np.int32(np.int32(ab + _GELU_IDX_BIAS) >> np.int32(21))
    idx = max(idx, np.int32(1))
    idx = min(idx, np.int32(24))
    idx = select(_GELU_RBOUND < a, np.int32(23), idx)
    p = fma(_GELU_MINIMAX[5, idx], a, _GELU_MINIMAX[4, idx])
    p = fma(p, a, _GELU_MINIMAX[3, idx])
    p = fma(p, a, _GELU_MINIMAX[2, idx])
    p = fma(p, a, _GELU_MINIMAX[1, idx])
    p = fma(p, a, _GELU_MINIMAX[0, idx])
    p = _bits_to_f32(np.int32(_f32_to_bits(p) ^ (b & _SIGN))) + F(1.0)
    return s * p * F(0.5)


@njit(**_JIT_INLINE)
def _erf_as(x, e):
    """``sign(x) (1 - t P(t) e)``, t = 1/(1 + p|x|), with e = exp(-x^2) given (oneDNN's order)."""
    t = F(1.0) / fma(_AS_P, abs(x), F(1.0))
    r = fma(_AS[4], t, _AS[3])
    r = fma(r, t, _AS[2])
    r = fma(r, t, _AS[1])
    r = fma(r, t, _AS[0])
    y = fma(-e * t, r, F(1.0))
    return _bits_to_f32(np.int32(_f32_to_bits(y) ^ (_f32_to_bits(x) & _SIGN)))


@njit(**_JIT_INLINE)
def gelu_onednn_avx2(s):
    """oneDNN's gelu_erf below AVX512: Abramowitz-Stegun's erf, ``S + S erf`` with S = s/2."""
    x = s * _AS_SQRT_HALF
    erf = _erf_as(x, exp_onednn(-(x * x)))
    h = s * F(0.5)
    return fma(erf, h, h)


@njit(**_JIT_INLINE)
def gelu_grad_onednn(s):
    """gelu'(s) as oneDNN's gelu_erf backward (every ISA): ``(R/sqrt(pi) Q + 1/2) + erf/2``, R = s/sqrt 2,
    Q = exp(-R^2)."""
    x = s * _AS_SQRT_HALF
    q = exp_onednn(-(x * x))
    t = x * _AS_INV_SQRT_PI * q
    erf = _erf_as(x, q)
    return fma(erf, F(0.5), t + F(0.5))


# ---------------------------------------------------------------- which of PyTorch's code paths this CPU takes
_CAPS: dict = {}


def _host_features() -> dict:
    if "features" not in _CAPS:
        try:
            from llvmlite import binding
            _CAPS["features"] = dict(binding.get_host_cpu_features())
        except Exception:     # an LLVM that cannot say: assume AVX2
            _CAPS["features"] = {}
    return _CAPS["features"]


def _has_avx512() -> bool:
    f = _host_features()
    return all(f.get(k, False) for k in ("avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"))


def aten_lanes() -> int:
    """float32 lanes in ATen's ``Vectorized<float>`` on this CPU: 16 where it picks AVX512 (AVX512 F, BW,
    VL, DQ and FMA, unless ``ATEN_CPU_CAPABILITY`` asks for less), else 8 (AVX2). Elementwise kernels
    (``cpu_kernel_vec``) run two vectors a step, so the first ``n - n % (2 lanes)`` elements take the
    vector functions and the rest the scalar (libm) ones; row reductions keep ``lanes`` partial sums."""
    if "lanes" not in _CAPS:
        import os
        want = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
        _CAPS["lanes"] = 16 if _has_avx512() and want in ("", "avx512", "avx512_vnni", "avx512_bf16") else 8
    return _CAPS["lanes"]


def onednn_avx512() -> bool:
    """Whether oneDNN's eltwise kernels run their AVX512 code here (``avx512_core``, unless
    ``ONEDNN_MAX_CPU_ISA``/``DNNL_MAX_CPU_ISA`` caps the ISA below it)."""
    if "onednn" not in _CAPS:
        import os
        cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").upper()
        _CAPS["onednn"] = _has_avx512() and not (cap and "AVX512" not in cap and cap != "ALL")
    return _CAPS["onednn"]


def onednn_fp16() -> bool:
    """Whether PyTorch runs half convolutions (transposed ones too) in oneDNN here, as ATen's
    ``mkldnn_fp16_device_check`` says (AVX512-FP16 or AMX-FP16): they then add the bias to the float32
    accumulator and round once, where ATen's own half transposed kernel rounds before the bias."""
    f = _host_features()
    return bool(f.get("avx512fp16", False) or f.get("amx-fp16", False))


# ---------------------------------------------------------------- oneDNN's AVX512 gelu, 16 at a time
# The scalar gelu_onednn_avx512 vectorises into six gathers a step (its table lookups), 3x slower than
# the old gelu; oneDNN looks its 25 pieces up with ``vpermt2ps`` (a two-register permute), and so does
# this intrinsic: out[i:i+16] = gelu(x[i:i+16]), the same arithmetic as gelu_onednn_avx512, written as
# LLVM vector IR. AVX512 only (``onednn_avx512()``: the only case that runs it).
_MINIMAX_HALVES = [[float(v) for v in row] for row in _GELU_MINIMAX]   # 6 rows of 25, padded to 32 below


@intrinsic
def gelu16_onednn_avx512(typingctx, x, out, i):
    if not (isinstance(x, types.Array) and isinstance(out, types.Array) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        xa = context.make_array(signature.args[0])(context, builder, args[0])
        oa = context.make_array(signature.args[1])(context, builder, args[1])
        f32, i32 = ir.FloatType(), ir.IntType(32)
        vf, vi = ir.VectorType(f32, 16), ir.VectorType(i32, 16)
        idx = context.cast(builder, args[2], signature.args[2], types.intp)

        def ptr(arr):
            return builder.bitcast(builder.gep(arr.data, [idx]), vf.as_pointer())

        def cf(v):
            return ir.Constant(vf, [float(np.float32(v))] * 16)

        def ci(v):
            return ir.Constant(vi, [int(v)] * 16)

        mod = builder.module
        fma_fn = cgutils.get_or_insert_function(mod, ir.FunctionType(vf, [vf, vf, vf]), "llvm.fma.v16f32")
        perm = cgutils.get_or_insert_function(mod, ir.FunctionType(vf, [vf, vi, vf]),
                                              "llvm.x86.avx512.vpermi2var.ps.512")
        s = builder.load(ptr(xa), align=4)
        b = builder.bitcast(s, vi)
        ab = builder.and_(b, ci(0x7FFFFFFF))
        a = builder.bitcast(ab, vf)
        k = builder.ashr(builder.add(ab, ci(int(_GELU_IDX_BIAS))), ci(21))
        k = builder.select(builder.icmp_signed("<", k, ci(1)), ci(1), k)
        k = builder.select(builder.icmp_signed(">", k, ci(24)), ci(24), k)
        k = builder.select(builder.fcmp_ordered("<", cf(_GELU_RBOUND), a), ci(23), k)

        def coeff(deg):
            row = _MINIMAX_HALVES[deg] + [0.0] * 7
            lo = ir.Constant(vf, [float(np.float32(v)) for v in row[:16]])
            hi = ir.Constant(vf, [float(np.float32(v)) for v in row[16:]])
            return builder.call(perm, [lo, k, hi])

        p = builder.call(fma_fn, [coeff(5), a, coeff(4)])
        for deg in (3, 2, 1, 0):
            p = builder.call(fma_fn, [p, a, coeff(deg)])
        sign = builder.and_(b, ci(-2147483648))
        p = builder.bitcast(builder.xor(builder.bitcast(p, vi), sign), vf)
        p = builder.fadd(p, cf(1.0))
        r = builder.fmul(builder.fmul(s, p), cf(0.5))
        builder.store(r, ptr(oa), align=4)
        return context.get_dummy_value()
    return types.void(x, out, i), codegen
