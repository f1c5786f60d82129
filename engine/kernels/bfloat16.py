"""bfloat16 in compiled loops: numba has no bfloat16, so a generated kernel (``compiler/cpu.py``) keeps a
bfloat16 array as its 16-bit patterns and each bfloat16 value as the float32 it equals. A bfloat16 op is
its float32 op rounded to bfloat16 (``round_bf16``), as ml_dtypes' ufuncs (eager's bfloat16 arithmetic)
compute it: round to nearest even, overflow to inf, every NaN the quiet NaN of its sign (0x7FC0/0xFFC0).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fastmath import _bits_to_f32, _f32_to_bits

__all__ = ["load_bf16", "round_bf16", "store_bf16"]

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def _rounded_bits(x):
    """The float32 bits of ``x`` rounded to bfloat16 (the low 16 bits zero)."""
    u = np.uint32(_f32_to_bits(x)) & np.uint32(0xFFFFFFFF)
    if x != x:
        return (u & np.uint32(0x80000000)) | np.uint32(0x7FC00000)
    u = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return u & np.uint32(0xFFFF0000)


@njit(**_JIT)
def load_bf16(h):
    """The float32 equal to the bfloat16 with bits ``h`` (a uint16)."""
    return _bits_to_f32(np.int32(np.uint32(h) << np.uint32(16)))


@njit(**_JIT)
def round_bf16(x):
    """float32 ``x`` rounded to the nearest bfloat16, kept as a float32."""
    return _bits_to_f32(np.int32(_rounded_bits(x)))


@njit(**_JIT)
def store_bf16(x):
    """The bits of float32 ``x`` rounded to bfloat16 (a uint16)."""
    return np.uint16(_rounded_bits(x) >> np.uint32(16))
