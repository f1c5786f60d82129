"""A depthwise convolution's (``groups == in == out channels``, MobileNet's and ConvNeXt's) forward, input
gradient and weight gradient as numba loops (``nn/_ops.py`` loads them through ``kernels.loops("depthwise")``
once ``kernels.use`` says yes).

im2col with one group per channel makes a GEMM of one output row and ``kh * kw`` columns per channel, and
its copies cost more than the products (8x64x56x56 7x7: 54 ms forward, torch 2.8). Here each channel's
plane is its own: the taps outer, the output row the vectorised inner loop, the row range inside the
input worked out once per tap and row (no bounds test in the inner loop). Every plane (forward, input
gradient) and every channel's weight sums (over all its images, in order) is computed alone, so splitting
them over threads gives the same floats. Any stride, padding, dilation and output size (a transposed
convolution's output padding included).
"""
from __future__ import annotations

from numba import njit

__all__ = ["forward", "input_grad", "weight_grad"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _span(start: int, step: int, size: int, count: int):
    """``(lo, hi)``: the ``i`` in ``0:count`` whose position ``start + i * step`` lies in ``0:size``."""
    lo = 0 if start >= 0 else (-start + step - 1) // step
    hi = 0 if start >= size else min(count, (size - 1 - start) // step + 1)
    return lo, max(lo, hi)


@njit(**_JIT, fastmath={"contract"})
def forward(x, w, sh, sw, pt, pl, dh, dw, y, p0, p1):
    """Planes ``p0:p1`` of ``y (N*C, OH, OW) = x (N*C, H, W)`` correlated with its channel's ``w (C, kh, kw)``."""
    c, kh, kw = w.shape
    h, wd = x.shape[1], x.shape[2]
    oh, ow = y.shape[1], y.shape[2]
    for p in range(p0, p1):
        src, out, k = x[p], y[p], w[p % c]
        out[:, :] = 0
        for ki in range(kh):
            r0, r1 = _span(ki * dh - pt, sh, h, oh)
            for kj in range(kw):
                start = kj * dw - pl
                q0, q1 = _span(start, sw, wd, ow)
                wv = k[ki, kj]
                for r in range(r0, r1):
                    row, dst = src[r * sh + ki * dh - pt], out[r]
                    for q in range(q0, q1):
                        dst[q] += wv * row[q * sw + start]


@njit(**_JIT, fastmath={"contract"})
def input_grad(gy, w, sh, sw, pt, pl, dh, dw, gx, p0, p1):
    """Planes ``p0:p1`` of the input gradient ``gx (N*C, H, W)`` from ``gy (N*C, OH, OW)``: each tap's
    weight times an output row, added into the input row under it."""
    c, kh, kw = w.shape
    h, wd = gx.shape[1], gx.shape[2]
    oh, ow = gy.shape[1], gy.shape[2]
    for p in range(p0, p1):
        src, out, k = gy[p], gx[p], w[p % c]
        out[:, :] = 0
        for ki in range(kh):
            r0, r1 = _span(ki * dh - pt, sh, h, oh)
            for kj in range(kw):
                start = kj * dw - pl
                q0, q1 = _span(start, sw, wd, ow)
                wv = k[ki, kj]
                for r in range(r0, r1):
                    row, dst = src[r], out[r * sh + ki * dh - pt]
                    for q in range(q0, q1):
                        dst[q * sw + start] += wv * row[q]


@njit(**_JIT, fastmath=True)
def weight_grad(x, gy, sh, sw, pt, pl, dh, dw, gw, c0, c1):
    """Channels ``c0:c1`` of the weight gradient ``gw (C, kh, kw)`` (float64) from ``x (N, C, H, W)`` and
    ``gy (N, C, OH, OW)``: per tap, the dot products of output rows with the input rows under them, summed
    over rows and images in float64 (a vector reduction)."""
    n, _, h, wd = x.shape
    oh, ow = gy.shape[2], gy.shape[3]
    kh, kw = gw.shape[1], gw.shape[2]
    for ch in range(c0, c1):
        for ki in range(kh):
            r0, r1 = _span(ki * dh - pt, sh, h, oh)
            for kj in range(kw):
                start = kj * dw - pl
                q0, q1 = _span(start, sw, wd, ow)
                total = 0.0
                for i in range(n):
                    src, g = x[i, ch], gy[i, ch]
                    for r in range(r0, r1):
                        row, grow = src[r * sh + ki * dh - pt], g[r]
                        for q in range(q0, q1):
                            total += float(grow[q]) * float(row[q * sw + start])
                gw[ch, ki, kj] = total
