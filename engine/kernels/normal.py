"""ATen's float32 ``normal_`` fill in numba: Box-Muller over blocks of 16 uniforms with Cephes'
float32 ``logf`` and ``sincosf``, as ATen's AVX2 kernel evaluates them (its fused multiply-adds
where GCC contracts them, nothing else contracted). ``core/cpu_stream.py`` keeps the numpy form of
the same arithmetic (without numba); that form made some forty passes with float64 temporaries for
its multiply-adds: ``randn(50176)`` took 1.43 ms, with this loop 0.35 ms (PyTorch 0.17 ms; the
twister's words alone take 0.13 ms here)."""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .fastmath import _bits_to_f32, _f32_to_bits, fma, select

__all__ = ["fill_f32", "fill_f64"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True)   # no fastmath: every rounding as written
_TINY = F(np.array([0x00800000], np.int32).view(np.float32)[0])
_TWO_PI = F(2 * math.pi)


@intrinsic
def _sqrt(typingctx, x):
    """float32 ``sqrt`` as LLVM's ``llvm.sqrt``: one instruction, correctly rounded as libm's
    ``sqrtf``, which numba calls for ``np.sqrt`` of a scalar."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32]), "llvm.sqrt.f32")
        return builder.call(fn, args)
    return types.float32(types.float32), codegen


@njit(**_JIT, inline="always")
def _log(x):
    """Cephes' ``logf`` for x in (0, 1]."""
    x = select(x > _TINY, x, _TINY)
    bits = _f32_to_bits(x)
    e = F((bits >> 23) - 0x7F) + F(1)
    x = _bits_to_f32(np.int32((bits & np.int32(-0x7F800001)) | np.int32(0x3F000000)))   # mantissa in [0.5, 1)
    small = x < F(0.707106781186547524)
    x = (x - F(1)) + select(small, x, F(0))
    e = e - select(small, F(1), F(0))
    z = x * x
    y = fma(F(7.0376836292E-2), x, F(-1.1514610310E-1))
    y = fma(y, x, F(1.1676998740E-1))
    y = fma(y, x, F(-1.2420140846E-1))
    y = fma(y, x, F(1.4249322787E-1))
    y = fma(y, x, F(-1.6668057665E-1))
    y = fma(y, x, F(2.0000714765E-1))
    y = fma(y, x, F(-2.4999993993E-1))
    y = fma(y, x, F(3.3333331174E-1))
    y = y * x
    y = fma(y, z, e * F(-2.12194440e-4))
    y = fma(z, F(-0.5), y)
    return fma(e, F(0.693359375), x + y)


@njit(**_JIT, inline="always")
def _sincos(x):
    """Cephes' ``sincosf`` for x >= 0: (sin, cos)."""
    j = np.int32(x * F(1.27323954473516))
    j = (j + 1) & np.int32(-2)
    y = F(j)
    x = fma(y, F(-0.78515625), x)
    x = fma(y, F(-2.4187564849853515625e-4), x)
    x = fma(y, F(-3.77489497744594108e-8), x)
    z = x * x
    c = fma(F(2.443315711809948E-005), z, F(-1.388731625493765E-003))
    c = fma(c, z, F(4.166664568298827E-002))
    c = fma(c * z, z, -(z * F(0.5))) + F(1)
    s = fma(F(-1.9515295891E-4), z, F(8.3321608736E-3))
    s = fma(s, z, F(-1.6666654611E-1))
    s = fma(s * z, x, x)
    sine_poly = (j & 2) == 0
    sin, cos = select(sine_poly, s, c), select(sine_poly, c, s)
    return select((j & 4) != 0, -sin, sin), select((~(j - 2) & 4) != 0, -cos, cos)


@njit(**_JIT)
def _pairs(first, second, mean, std, cos_out, sin_out):
    """Box-Muller over paired uniforms: radius from ``first[k]``, angle from ``second[k]``. One flat
    loop, branch-free (``select``), so LLVM vectorises it (a loop over a block's 8 lanes it unrolled
    and left scalar: ~6 ns a number)."""
    for k in range(first.shape[0]):
        radius = _sqrt(F(-2) * _log(F(1) - first[k]))
        sin, cos = _sincos(_TWO_PI * second[k])
        cos_out[k] = fma(radius * cos, std, mean)
        sin_out[k] = fma(radius * sin, std, mean)


@njit(**_JIT)
def _fill_blocks(uniforms, out, mean, std):
    """Blocks of 16 (``len % 16 == 0``): the first 8 of each give the radii and the cosines' places,
    the last 8 the angles and the sines' places; the halves are gathered into flat arrays first,
    so that ``_pairs`` runs as one flat loop."""
    half = uniforms.shape[0] // 2
    first, second = np.empty(half, F), np.empty(half, F)
    for k in range(half):
        first[k] = uniforms[(k >> 3) * 16 + (k & 7)]
        second[k] = uniforms[(k >> 3) * 16 + 8 + (k & 7)]
    cos, sin = np.empty(half, F), np.empty(half, F)
    _pairs(first, second, mean, std, cos, sin)
    for k in range(half):
        out[(k >> 3) * 16 + (k & 7)] = cos[k]
        out[(k >> 3) * 16 + 8 + (k & 7)] = sin[k]


def _fill(blocks, uniforms: np.ndarray, tail: np.ndarray, mean, std, out: np.ndarray) -> np.ndarray:
    n = out.shape[0]
    whole = n // 16 * 16
    blocks(uniforms[:whole], out[:whole], mean, std)
    if n % 16:
        blocks(tail[:16], out[n - 16:], mean, std)
    return out


def fill_f32(uniforms: np.ndarray, tail: np.ndarray, mean, std, out: np.ndarray) -> np.ndarray:
    """``out`` (as long as ``uniforms``, at least 16) gets ATen's normals: each whole block of 16
    from its own 16 uniforms, then, if ``len(out) % 16``, the last 16 places again from ``tail``'s
    16 fresh uniforms."""
    return _fill(_fill_blocks, uniforms, tail, np.float32(mean), np.float32(std), out)


@njit(**_JIT)
def _fill_blocks_f64(uniforms, out, mean, std):
    """ATen's ``normal_fill_16`` in double over whole blocks: glibc's ``log``, ``cos`` and ``sin`` (numba
    calls libm, as ATen's scalar loop does; numpy's own SIMD functions differ by an ulp now and then)
    and the multiply-add of the scale contracted, as GCC compiles ATen's AVX2 kernels."""
    for b in range(uniforms.shape[0] // 16):
        for j in range(8):
            radius = math.sqrt(-2.0 * math.log(1.0 - uniforms[16 * b + j]))
            theta = 2.0 * math.pi * uniforms[16 * b + 8 + j]
            out[16 * b + j] = fma(radius * math.cos(theta), std, mean)
            out[16 * b + 8 + j] = fma(radius * math.sin(theta), std, mean)


def fill_f64(uniforms: np.ndarray, tail: np.ndarray, mean, std, out: np.ndarray) -> np.ndarray:
    """``fill_f32``'s layout in double (float64 draws; half and bfloat16 round these)."""
    return _fill(_fill_blocks_f64, uniforms, tail, np.float64(mean), np.float64(std), out)
