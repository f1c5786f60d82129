"""Non-overlapping 2-D max-pool's backward as a numba loop (``nn/_ops.py`` loads it through
``kernels.loops("pool")`` once ``kernels.use`` says yes).

numpy's block path makes a mask per kernel offset, then a masked write per offset (~10 strided
passes for 2x2); here each window is read once. (The forward stays numpy's SIMD maximum passes.)
The window's first maximum in row-major order wins, the first NaN if it holds one (as the numpy
masks and PyTorch's argmax), so both paths give the same values and gradients.
"""
from __future__ import annotations

import math

from numba import njit

__all__ = ["max_blocks_put"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _first_max(x, n, c, i0, j0, kh, kw):
    """The (row, column) of the window's first maximum (first NaN if any) and its value."""
    best = x[n, c, i0, j0]
    bi, bj = i0, j0
    if math.isnan(best):
        return bi, bj, best
    for di in range(kh):
        for dj in range(kw):
            v = x[n, c, i0 + di, j0 + dj]
            if v > best or math.isnan(v):
                best, bi, bj = v, i0 + di, j0 + dj
                if math.isnan(v):
                    return bi, bj, best
    return bi, bj, best


@njit(**_JIT)
def max_blocks_put(x, res, g, kh, kw):
    """``res`` (zeros, shape of ``x``) gets ``g[n, c, i, j]`` at each block's first maximum."""
    for n in range(g.shape[0]):
        for c in range(g.shape[1]):
            for i in range(g.shape[2]):
                for j in range(g.shape[3]):
                    bi, bj, _ = _first_max(x, n, c, i * kh, j * kw, kh, kw)
                    res[n, c, bi, bj] = g[n, c, i, j]
