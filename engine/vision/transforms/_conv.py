"""Depthwise 2-d convolution as PyTorch's CPU kernel rounds it (Gaussian blur, sharpness).

PyTorch's depthwise float convolution accumulates the taps in row-major order, each a fused
multiply-add onto the running sum; the engine's ``conv2d`` sums in another order, a last-bit
difference in a third of the pixels. One kernel for every channel.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...kernels.fastmath import fma


@njit(cache=True, nogil=True, error_model="numpy")
def _taps(x, k, out):
    oh, ow = out.shape[1], out.shape[2]
    for n in range(x.shape[0]):
        for i in range(k.shape[0]):
            for j in range(k.shape[1]):
                w = k[i, j]
                for y in range(oh):
                    for c in range(ow):
                        out[n, y, c] = fma(x[n, y + i, c + j], w, out[n, y, c])


def depthwise(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``conv2d(x, kernel.expand(C, 1, kh, kw), groups=C)`` of a (N, C, H, W) float array, no padding."""
    n, c, h, w = x.shape
    kh, kw = kernel.shape
    flat = np.ascontiguousarray(x.reshape(n * c, h, w))
    out = np.zeros((n * c, h - kh + 1, w - kw + 1), dtype=x.dtype)
    _taps(flat, np.ascontiguousarray(kernel, dtype=x.dtype), out)
    return out.reshape(n, c, h - kh + 1, w - kw + 1)
