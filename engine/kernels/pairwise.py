"""numpy's pairwise float32 sums as one loop: ``add.reduce`` of a C-contiguous ``(N, C, L)`` array over
dims 0 and 2 (a convolution bias's gradient, ``g.sum((0, 2, 3))``) is, per channel, ``0 + pw(row 0) +
pw(row 1) + ...`` in float32, where ``pw`` is numpy's pairwise sum of a contiguous row (eight partial
sums from the first eight values, one add each per 8 values, for at most 128; halves on an 8-multiple
otherwise; a sequential sum under 8). numpy runs the eight partial sums as scalars (~0.65 cycles a
value); here they are one vector (``lanes.lane_loop``), the channels split over the threads: the same
additions in the same order, so the same floats."""
from __future__ import annotations

import numpy as np
from numba import njit

from .lanes import lane_loop

__all__ = ["channel_sums"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)
F = np.float32
_partials = lane_loop(8, dot=False, fold=False)


@njit(**_JIT)
def _pairwise(a, lo, n):
    """numpy's ``pairwise_sum`` of ``a[lo:lo + n]`` (float32)."""
    if n < 8:
        res = F(0.0)
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r = _partials(a[lo:lo + n], n)
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(lo + n - n % 8, lo + n):
            res += a[i]
        return res
    half = n // 2
    half -= half % 8
    return _pairwise(a, lo, half) + _pairwise(a, lo + half, n - half)


@njit(**_JIT)
def channel_sums(x, out, lo, hi):
    """``out[c] = add.reduce(x[:, c, :])`` in numpy's order for channels ``lo:hi`` of ``x (N, C, L)``."""
    n, c, length = x.shape
    flat = x.reshape(-1)
    for ch in range(lo, hi):
        acc = F(0.0)
        for i in range(n):
            acc += _pairwise(flat, (i * c + ch) * length, length)
        out[ch] = acc
