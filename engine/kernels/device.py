"""cupy kernels for eager formulas that cupy would otherwise run as several launches.

On a GPU a small op costs its launch: cupy spends 10-40 us of host time per kernel (bench/README.md,
the H200 runs), so a float32 fused multiply-add, written for numpy as float64 casts, a multiply, an
add and a cast back (six launches on cupy), is one ``fmaf`` kernel here. CUDA's ``fmaf`` is the
correctly rounded ``x * y + z``: PyTorch CUDA's arithmetic for add/sub with alpha, lerp and addcmul,
and the value numpy's float64 formula gives on the cpu. Each kernel is built on first use (cupy
caches the compiled code on disk).
"""
from __future__ import annotations

import functools

__all__ = ["fma32"]


@functools.cache
def _fma32_kernel():
    import cupy
    return cupy.ElementwiseKernel("float32 x, float32 y, float32 z", "float32 o", "o = fmaf(x, y, z)",
                                  "tapelab_fma32")


def fma32(x, y, z, out=None):
    """``fmaf(x, y, z)`` of float32 cupy arrays or scalars (broadcast), into ``out`` when given."""
    k = _fma32_kernel()
    return k(x, y, z) if out is None else k(x, y, z, out)
