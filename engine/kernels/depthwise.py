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

import numpy as np
from numba import njit

__all__ = ["forward", "input_grad", "weight_grad"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _span(start: int, step: int, size: int, count: int):
    """``(lo, hi)``: the ``i`` in ``0:count`` whose position ``start + i * step`` lies in ``0:size``."""
    lo = 0 if start >= 0 else (-start + step - 1) // step
    hi = 0 if start >= size else min(count, (size - 1 - start) // step + 1)
    return lo, max(lo, hi)


@njit(**_JIT, inline="always")
def _axpy(dst, d0, dstep, src, s0, sstep, count, a):
    """``dst[d0 + i * dstep] += a * src[s0 + i * sstep]`` for ``i`` in ``0:count``; contiguous slices
    where both steps are 1, so the loop vectorises (a step unknown to LLVM kept it scalar: 5x slower)."""
    if dstep == 1 and sstep == 1:
        d, v = dst[d0:d0 + count], src[s0:s0 + count]
        for i in range(count):
            d[i] += a * v[i]
    else:
        for i in range(count):
            dst[d0 + i * dstep] += a * src[s0 + i * sstep]


@njit(**_JIT, inline="always")
def _dot(u, u0, v, v0, vstep, count):
    """``sum(u[u0 + i] * v[v0 + i * vstep])`` over ``i`` in ``0:count``, in float64; slices at step 1."""
    total = 0.0
    if vstep == 1:
        a, b = u[u0:u0 + count], v[v0:v0 + count]
        for i in range(count):
            total += float(a[i]) * float(b[i])
    else:
        for i in range(count):
            total += float(u[u0 + i]) * float(v[v0 + i * vstep])
    return total


@njit(**_JIT, fastmath={"contract"})
def _forward_rows(x, w, sh, sw, pt, pl, dh, dw, y, p0, p1):
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
                    _axpy(out[r], q0, 1, src[r * sh + ki * dh - pt], q0 * sw + start, sw, q1 - q0, wv)


@njit(**_JIT, fastmath={"contract"})
def _input_grad_rows(gy, w, sh, sw, pt, pl, dh, dw, gx, p0, p1):
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
                    _axpy(out[r * sh + ki * dh - pt], q0 * sw + start, sw, src[r], q0, 1, q1 - q0, wv)


@njit(**_JIT, fastmath={"reassoc", "contract"})   # no nnan/ninf: a NaN or inf input reaches the gradient
def _weight_grad_rows(x, gy, sh, sw, pt, pl, dh, dw, gw, c0, c1):
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
                        total += _dot(g[r], q0, src[r * sh + ki * dh - pt], q0 * sw + start, sw, q1 - q0)
                gw[ch, ki, kj] = total


# Stride 1 with padding not negative: each plane in a zero grid as wide as the padded input, so a tap's
# inputs for all outputs are one contiguous run (``kernels/conv.py``'s trick) and each tap one long vector
# loop (the row loops' short rows cost their set-up: 32-wide rows ran at a third of the flat loop's speed).
@njit(**_JIT, inline="always")
def _place(src, grid, width, pt, pl):
    """``src (h, w)`` into the flat zero ``grid`` of rows ``width`` wide at row ``pt``, column ``pl``,
    clipped to the grid (the rest of ``grid`` untouched)."""
    rows = min(src.shape[0], grid.size // width - pt)
    cols = min(src.shape[1], width - pl)
    for r in range(rows):
        at = (r + pt) * width + pl
        d, v = grid[at:at + cols], src[r]
        for j in range(cols):
            d[j] = v[j]


@njit(**_JIT, inline="always")
def _take(grid, width, pt, pl, out):
    """``out (h, w)`` from the flat ``grid`` at row ``pt``, column ``pl``; zero where it reaches past the grid."""
    out[:, :] = 0
    rows = min(out.shape[0], grid.size // width - pt)
    cols = min(out.shape[1], width - pl)
    for r in range(rows):
        at = (r + pt) * width + pl
        d, v = out[r], grid[at:at + cols]
        for j in range(cols):
            d[j] = v[j]


@njit(**_JIT, fastmath={"contract"})
def _forward_flat(x, w, pt, pl, dh, dw, y, p0, p1):
    c, kh, kw = w.shape
    oh, ow = y.shape[1], y.shape[2]
    width, n = ow + dw * (kw - 1), oh * (ow + dw * (kw - 1))
    pad = np.zeros((oh + dh * (kh - 1)) * width + dw * (kw - 1), x.dtype)
    acc = np.empty(n, x.dtype)
    for p in range(p0, p1):
        k = w[p % c]
        pad[:] = 0
        _place(x[p], pad[:pad.size - dw * (kw - 1)], width, pt, pl)
        acc[:] = 0
        for ki in range(kh):
            for kj in range(kw):
                wv, run = k[ki, kj], pad[ki * dh * width + kj * dw:ki * dh * width + kj * dw + n]
                for i in range(n):
                    acc[i] += wv * run[i]
        out = y[p]
        for r in range(oh):
            d, v = out[r], acc[r * width:r * width + ow]
            for j in range(ow):
                d[j] = v[j]


@njit(**_JIT, fastmath={"contract"})
def _input_grad_flat(gy, w, pt, pl, dh, dw, gx, p0, p1):
    c, kh, kw = w.shape
    oh, ow = gy.shape[1], gy.shape[2]
    width, n = ow + dw * (kw - 1), oh * (ow + dw * (kw - 1))
    full = np.zeros((oh + dh * (kh - 1)) * width + dw * (kw - 1), gy.dtype)
    grid = np.zeros(n, gy.dtype)   # the columns past ``ow`` stay zero
    for p in range(p0, p1):
        k = w[p % c]
        _place(gy[p], grid, width, 0, 0)
        full[:] = 0
        for ki in range(kh):
            for kj in range(kw):
                wv, run = k[ki, kj], full[ki * dh * width + kj * dw:ki * dh * width + kj * dw + n]
                for i in range(n):
                    run[i] += wv * grid[i]
        _take(full[:full.size - dw * (kw - 1)], width, pt, pl, gx[p])


@njit(**_JIT, fastmath={"reassoc", "contract"})   # no nnan/ninf: a NaN or inf input reaches the gradient
def _weight_grad_flat(x, gy, pt, pl, dh, dw, gw, c0, c1):
    kh, kw = gw.shape[1], gw.shape[2]
    oh, ow = gy.shape[2], gy.shape[3]
    width, n = ow + dw * (kw - 1), oh * (ow + dw * (kw - 1))
    pad = np.zeros((oh + dh * (kh - 1)) * width + dw * (kw - 1), x.dtype)
    grid = np.zeros(n, gy.dtype)
    for ch in range(c0, c1):
        sums = np.zeros((kh, kw))
        for i in range(x.shape[0]):
            pad[:] = 0
            _place(x[i, ch], pad[:pad.size - dw * (kw - 1)], width, pt, pl)
            _place(gy[i, ch], grid, width, 0, 0)
            for ki in range(kh):
                for kj in range(kw):
                    run, total = pad[ki * dh * width + kj * dw:ki * dh * width + kj * dw + n], 0.0
                    for f in range(n):
                        total += float(grid[f]) * float(run[f])
                    sums[ki, kj] += total
        gw[ch] = sums


@njit(**_JIT)
def forward(x, w, sh, sw, pt, pl, dh, dw, y, p0, p1):
    """Planes ``p0:p1`` of ``y (N*C, OH, OW) = x (N*C, H, W)`` correlated with its channel's ``w (C, kh, kw)``."""
    if sh == sw == 1 and pt >= 0 and pl >= 0:
        _forward_flat(x, w, pt, pl, dh, dw, y, p0, p1)
    else:
        _forward_rows(x, w, sh, sw, pt, pl, dh, dw, y, p0, p1)


@njit(**_JIT)
def input_grad(gy, w, sh, sw, pt, pl, dh, dw, gx, p0, p1):
    """Planes ``p0:p1`` of the input gradient ``gx (N*C, H, W)`` from ``gy (N*C, OH, OW)``."""
    if sh == sw == 1 and pt >= 0 and pl >= 0:
        _input_grad_flat(gy, w, pt, pl, dh, dw, gx, p0, p1)
    else:
        _input_grad_rows(gy, w, sh, sw, pt, pl, dh, dw, gx, p0, p1)


@njit(**_JIT)
def _finite(x, c0, c1) -> bool:
    """Whether every value of channels ``c0:c1`` of ``x (N, C, H, W)`` is finite."""
    for i in range(x.shape[0]):
        for ch in range(c0, c1):
            for v in x[i, ch].flat:
                if not np.isfinite(v):
                    return False
    return True


@njit(**_JIT)
def weight_grad(x, gy, sh, sw, pt, pl, dh, dw, gw, c0, c1):
    """Channels ``c0:c1`` of the weight gradient ``gw (C, kh, kw)`` (float64) from ``x (N, C, H, W)`` and
    ``gy (N, C, OH, OW)``, each channel's sums over its images in order."""
    if sh == sw == 1 and pt >= 0 and pl >= 0 and _finite(x, c0, c1):
        # the flat form multiplies the grid's zero gap columns too: 0 * inf or 0 * NaN would reach taps that
        # never meet that input (torch's have none), so a channel with one takes the rows
        _weight_grad_flat(x, gy, pt, pl, dh, dw, gw, c0, c1)
    else:
        _weight_grad_rows(x, gy, sh, sw, pt, pl, dh, dw, gw, c0, c1)
