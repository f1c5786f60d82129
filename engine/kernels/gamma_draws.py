"""ATen's standard gamma draws (``sample_gamma``: Marsaglia-Tsang) in one compiled loop over the twister state.

``core/cpu_stream.py``'s Python loop took each double uniform by its own call (a numba call, the state's view
and an ``np.empty`` per number): 27 ms for 2,048 draws against PyTorch's 0.4 ms. This is the same loop on the
same words in the same order, with Python's float arithmetic and libm calls, so the draws are the same floats;
the generator's cached Box-Muller normal comes in and goes back out through ``normal``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .twister import words

__all__ = ["gamma"]

_JIT = dict(cache=True, nogil=True, error_model="numpy")
_LOW21 = np.uint64((1 << 21) - 1)
_S32 = np.uint64(32)
_F32_0331 = float(np.float32(0.0331))
_F32_THIRD = float(np.float32(1.0) / np.float32(3.0))   # ATen subtracts the float 1.0f / 3.0f for every dtype


@njit(**_JIT, inline="always")
def _uniform(key, pair):
    """One double uniform: a 53-bit integer from two words (the first gives the high 21 bits) times 2**-53."""
    words(key, pair)
    return np.float64(((np.uint64(pair[0]) & _LOW21) << _S32) | np.uint64(pair[1])) * 2.0 ** -53


@njit(**_JIT, inline="always")
def _normal(key, pair, normal):
    """``at::normal_distribution<double>``: Box-Muller's cosine, its sine kept in ``normal`` for the next call."""
    if normal[0] != 0.0:
        normal[0] = 0.0
        return normal[1]
    u1 = _uniform(key, pair)
    u2 = _uniform(key, pair)
    radius = math.sqrt(-2.0 * math.log1p(-u2))
    theta = 2.0 * math.pi * u1
    normal[0], normal[1] = 1.0, radius * math.sin(theta)
    return radius * math.cos(theta)


@njit(**_JIT, inline="always")
def _rounded(v, single):
    return np.float64(np.float32(v)) if single else v


@njit(**_JIT)
def gamma(key, alphas, single, normal, out):
    """``out[i]``: a standard gamma draw for shape ``alphas[i]``, in order; ``single``: the arithmetic ATen does in
    the input's precision rounded to float32; ``normal``: [valid, value] of the generator's cached normal."""
    pair = np.empty(2, np.uint32)
    for i in range(alphas.shape[0]):
        alpha = alphas[i]
        scale = 1.0
        if alpha < 1.0:
            if alpha == 0.0:
                out[i] = 0.0
                continue
            scale *= (1.0 - _uniform(key, pair)) ** _rounded(1.0 / alpha, single)
            alpha = _rounded(alpha + 1.0, single)
        d = _rounded(alpha - _F32_THIRD, single)
        c = 1.0 / math.sqrt(9.0 * d)
        while True:
            x = _normal(key, pair, normal)
            y = 1.0 + c * x
            while y <= 0:
                x = _normal(key, pair, normal)
                y = 1.0 + c * x
            v = y * y * y
            u = 1.0 - _uniform(key, pair)
            xx = x * x
            if u < 1.0 - _F32_0331 * xx * xx or math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
                out[i] = scale * d * v
                break
