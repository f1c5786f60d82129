"""A depthwise convolution's (``groups == in == out channels``, MobileNet's and ConvNeXt's) forward, input
gradient and weight gradient as numba loops (``nn/_ops.py`` loads them through ``kernels.loops("depthwise")``
once ``kernels.use`` says yes).

im2col with one group per channel makes a GEMM of one output row and ``kh * kw`` columns per channel, and
its copies cost more than the products (8x64x56x56 7x7: 54 ms forward, torch 2.8). Here the taps are outer
and each tap one long vector loop. At stride 1 a plane sits in a zero grid as wide as the padded input, so a
tap's inputs for all outputs are one contiguous run. Other strides (and negative padding) take 16 planes at a
time, channels last, so a tap's run over an output row is contiguous across its pixels and the 16 lanes, and
its input columns are dealt into ``stride`` phases (a strided tap reads one phase contiguously); the forward
and the input gradient are the same loop with the two sides' roles swapped. Every plane (forward, input
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


LANES = 16   # planes a block: one AVX-512 vector of float32


@njit(**_JIT, inline="always")
def _to_tile(src, p0, count, tile, step):
    """Planes ``p0:p0 + count`` of ``src (P, H, W)`` into ``tile (H, step, ceil(W / step), LANES)``, channels
    last, column ``c`` at ``[c % step, c // step]``; lanes past ``count`` repeat the last plane."""
    h, w = src.shape[1], src.shape[2]
    for r in range(h):
        for ph in range(step):
            for cc in range((w - ph + step - 1) // step):
                t = tile[r, ph, cc]
                for lane in range(LANES):
                    t[lane] = src[p0 + min(lane, count - 1), r, cc * step + ph]


@njit(**_JIT, inline="always")
def _from_tile(tile, step, dst, p0, count):
    """``_to_tile``'s inverse for the first ``count`` lanes."""
    h, w = dst.shape[1], dst.shape[2]
    for r in range(h):
        for ph in range(step):
            for cc in range((w - ph + step - 1) // step):
                t = tile[r, ph, cc]
                for lane in range(count):
                    dst[p0 + lane, r, cc * step + ph] = t[lane]


@njit(**_JIT, inline="always")
def _tap_runs(ki, kj, sh, sw, pt, pl, dh, dw, h, wd, oh, ow):
    """Tap ``(ki, kj)``'s output rows ``r0:r1`` and columns ``q0:q1`` that meet the input, and where the
    input's columns start in a tile dealt into ``sw`` phases: the phase and the shift within it."""
    r0, r1 = _span(ki * dh - pt, sh, h, oh)
    start = kj * dw - pl
    q0, q1 = _span(start, sw, wd, ow)
    phase = start % sw
    return r0, r1, q0, q1, phase, (start - phase) // sw


@njit(**_JIT, fastmath={"contract"})
def _planes_blocked(src, w, sh, sw, pt, pl, dh, dw, dst, adjoint, p0, p1):
    """Planes ``p0:p1`` of the forward ``dst = y (N*C, OH, OW)`` from ``src = x (N*C, H, W)``, or with
    ``adjoint`` of the input gradient ``dst = gx`` from ``src = gy``: per tap, each output row's run (the
    input's phase run under it) times the tap's 16 weights, added into the destination's run. Each
    destination value sums its taps in order from zero, as the row loops did."""
    c, kh, kw = w.shape
    x, y = (dst, src) if adjoint else (src, dst)
    h, wd, oh, ow = x.shape[1], x.shape[2], y.shape[1], y.shape[2]
    xw = (wd + sw - 1) // sw
    xt, yt = np.empty((h, sw, xw, LANES), src.dtype), np.empty((oh, 1, ow, LANES), src.dtype)
    xf, yf = xt.reshape(-1), yt.reshape(-1)
    taps = np.empty((kh, kw, ow, LANES), w.dtype)   # each tap's 16 weights repeated along an output row
    chans = np.empty(LANES, np.int64)
    for b in range(p0, p1, LANES):
        count = min(LANES, p1 - b)
        for lane in range(LANES):
            chans[lane] = (b + min(lane, count - 1)) % c
        for ki in range(kh):
            for kj in range(kw):
                first = taps[ki, kj, 0]
                for lane in range(LANES):
                    first[lane] = w[chans[lane], ki, kj]
                for q in range(1, ow):
                    taps[ki, kj, q] = first
        if adjoint:
            _to_tile(src, b, count, yt, 1)
            xf[:] = 0
        else:
            _to_tile(src, b, count, xt, sw)
            yf[:] = 0
        for ki in range(kh):
            for kj in range(kw):
                r0, r1, q0, q1, phase, shift = _tap_runs(ki, kj, sh, sw, pt, pl, dh, dw, h, wd, oh, ow)
                n = (q1 - q0) * LANES
                k = taps[ki, kj].reshape(-1)[:n]
                for r in range(r0, r1):
                    xo = (((r * sh + ki * dh - pt) * sw + phase) * xw + q0 + shift) * LANES
                    yo = (r * ow + q0) * LANES
                    if adjoint:
                        d, v = xf[xo:xo + n], yf[yo:yo + n]
                    else:
                        d, v = yf[yo:yo + n], xf[xo:xo + n]
                    for i in range(n):
                        d[i] += k[i] * v[i]
        if adjoint:
            _from_tile(xt, sw, dst, b, count)
        else:
            _from_tile(yt, 1, dst, b, count)


@njit(**_JIT, fastmath={"reassoc", "contract"})   # no nnan/ninf: a NaN or inf input reaches the gradient
def _weight_grad_blocked(x, gy, sh, sw, pt, pl, dh, dw, gw, c0, c1):
    """Channels ``c0:c1`` of the weight gradient ``gw (C, kh, kw)`` (float64) from ``x (N, C, H, W)`` and
    ``gy (N, C, OH, OW)``, 16 channels at a time in ``_planes_blocked``'s tiles: per tap, the products of
    output-gradient runs with the input runs under them summed in float64 per output column and lane
    (one vector loop), over rows and images, then over the columns. Only real products (no padding, no gap
    column), so a NaN or inf reaches only the taps that meet it."""
    n, c, h, wd = x.shape
    oh, ow = gy.shape[2], gy.shape[3]
    kh, kw = gw.shape[1], gw.shape[2]
    xs, gs = x.reshape(n * c, h, wd), gy.reshape(n * c, oh, ow)
    xw = (wd + sw - 1) // sw
    xt, gt = np.empty((h, sw, xw, LANES), x.dtype), np.empty((oh, 1, ow, LANES), gy.dtype)
    xf, gf = xt.reshape(-1), gt.reshape(-1)
    sums = np.empty((kh, kw, ow * LANES))
    for b in range(c0, c1, LANES):
        count = min(LANES, c1 - b)
        sums[:] = 0
        for i in range(n):
            _to_tile(xs, i * c + b, count, xt, sw)
            _to_tile(gs, i * c + b, count, gt, 1)
            for ki in range(kh):
                for kj in range(kw):
                    r0, r1, q0, q1, phase, shift = _tap_runs(ki, kj, sh, sw, pt, pl, dh, dw, h, wd, oh, ow)
                    m = (q1 - q0) * LANES
                    s = sums[ki, kj, q0 * LANES:q0 * LANES + m]
                    for r in range(r0, r1):
                        xo = (((r * sh + ki * dh - pt) * sw + phase) * xw + q0 + shift) * LANES
                        g, v = gf[(r * ow + q0) * LANES:(r * ow + q0) * LANES + m], xf[xo:xo + m]
                        for f in range(m):
                            s[f] += float(g[f]) * float(v[f])
        for lane in range(count):
            for ki in range(kh):
                for kj in range(kw):
                    total = 0.0
                    for q in range(ow):
                        total += sums[ki, kj, q * LANES + lane]
                    gw[b + lane, ki, kj] = total


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
        if not np.isfinite(sums).all():
            # the grid's zero gap columns met a NaN or inf (0 * inf), reaching taps that never meet it
            # (torch's have none): the channel again with real products only
            _weight_grad_blocked(x, gy, 1, 1, pt, pl, dh, dw, gw, ch, ch + 1)


@njit(**_JIT)
def forward(x, w, sh, sw, pt, pl, dh, dw, y, p0, p1):
    """Planes ``p0:p1`` of ``y (N*C, OH, OW) = x (N*C, H, W)`` correlated with its channel's ``w (C, kh, kw)``."""
    if sh == sw == 1 and pt >= 0 and pl >= 0:
        _forward_flat(x, w, pt, pl, dh, dw, y, p0, p1)
    else:
        _planes_blocked(x, w, sh, sw, pt, pl, dh, dw, y, False, p0, p1)


@njit(**_JIT)
def input_grad(gy, w, sh, sw, pt, pl, dh, dw, gx, p0, p1):
    """Planes ``p0:p1`` of the input gradient ``gx (N*C, H, W)`` from ``gy (N*C, OH, OW)``."""
    if sh == sw == 1 and pt >= 0 and pl >= 0:
        _input_grad_flat(gy, w, pt, pl, dh, dw, gx, p0, p1)
    else:
        _planes_blocked(gy, w, sh, sw, pt, pl, dh, dw, gx, True, p0, p1)


@njit(**_JIT)
def weight_grad(x, gy, sh, sw, pt, pl, dh, dw, gw, c0, c1):
    """Channels ``c0:c1`` of the weight gradient ``gw (C, kh, kw)`` (float64) from ``x (N, C, H, W)`` and
    ``gy (N, C, OH, OW)``, each channel's sums over its images in order."""
    if sh == sw == 1 and pt >= 0 and pl >= 0:
        _weight_grad_flat(x, gy, pt, pl, dh, dw, gw, c0, c1)
    else:
        _weight_grad_blocked(x, gy, sh, sw, pt, pl, dh, dw, gw, c0, c1)
