"""ATen's order for the float32 2-norm over a contiguous last dimension, so a printed norm rounds as
PyTorch's.

PyTorch's cpu ``linalg.vector_norm`` (``norm``, ``Tensor.norm``, and so ``clip_grad_norm_``'s
per-gradient and total norms) reduces a contiguous last dimension, or all of a contiguous tensor,
through one 256-bit vector of partial sums: lane ``j`` of eight adds ``x*x`` (product rounded, then
sum rounded) of the elements ``j, j+8, ...`` of the whole-vector prefix, and the lanes are then
summed in order. Its compiler splits the scalar tail of ``n % 8`` elements: four products rounded
and added in order when there are four or more, the last ones with a fused multiply-add (here in
float64, exact for a float32 square). Over a 50257x16 gradient numpy's pairwise sum and BLAS's
``dot`` differ from it in the fifth significant digit; this order is bit-equal to torch 2.13's on
every length tried.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["norm2_rows"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)
_LANES = 8


@njit(**_JIT)
def _rows(a, out):
    n = a.shape[1]
    body = n - n % _LANES
    zero = np.float32(0)
    for r in range(a.shape[0]):
        # the eight lanes as eight locals: LLVM packs them into one vector register (an array of
        # partial sums stayed in memory, 4x slower than torch on a 32 x 50176 per-sample gradient)
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
        for i in range(0, body, _LANES):
            v0, v1, v2, v3 = a[r, i], a[r, i + 1], a[r, i + 2], a[r, i + 3]
            v4, v5, v6, v7 = a[r, i + 4], a[r, i + 5], a[r, i + 6], a[r, i + 7]
            s0 += v0 * v0
            s1 += v1 * v1
            s2 += v2 * v2
            s3 += v3 * v3
            s4 += v4 * v4
            s5 += v5 * v5
            s6 += v6 * v6
            s7 += v7 * v7
        total = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
        d = body
        if n - d >= 4:
            for k in range(4):
                v = a[r, d + k]
                total += v * v
            d += 4
        for k in range(d, n):
            v = np.float64(a[r, k])
            total = np.float32(np.float64(total) + v * v)
        out[r] = np.sqrt(total)


def norm2_rows(a: np.ndarray) -> np.ndarray:
    """The 2-norm of each row of the C-contiguous float32 ``(rows, n)`` array ``a``."""
    out = np.empty(a.shape[0], np.float32)
    _rows(a, out)
    return out
