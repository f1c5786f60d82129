"""A few-channel convolution's weight gradient, and stride-1 im2col (``im2col_stride1``), as numba
loops (``nn/_ops.py`` loads them through ``kernels.loops("conv")`` once ``kernels.use`` says yes).

A stem's 1-3 input channels make im2col's GEMM 9-27 columns wide, and copying the columns and the
channel-major output gradient costs more than the products (the CNN's 1 -> 16 conv at 28x28: 0.35-
0.65 ms, PyTorch 0.14-0.26). Stride 1 lets each kernel offset be one long dot product instead:
every output-gradient row sits in a zero-filled grid as wide as the padded input, so the input
value under offset (ki, kj) of grid position f is the padded image's element f + ki * width + kj,
and ``gw[o, c, ki, kj]`` is the sum over images of ``dot(grid, padded[off:off + len(grid)])``, a
contiguous loop that vectorises. Each (o, c, offset) is computed alone, so splitting the output
channels over threads gives the same floats.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["weight_stride1", "forward_stride1", "im2col_stride1"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _rows_into(src, dst, first, width):
    """Rows of ``src (rows, cols)`` into flat ``dst`` at ``first``, ``first + width``, ... (slices,
    so the copies vectorise: an offset inside an index would not)."""
    cols = src.shape[1]
    for i in range(src.shape[0]):
        at = first + i * width
        out = dst[at:at + cols]
        row = src[i]
        for j in range(cols):
            out[j] = row[j]


@njit(**_JIT, fastmath={"reassoc", "contract", "nsz", "arcp"})
def _dot(a, b):
    """``sum(a * b)`` (reassociated: the loop vectorises; an offset inside the index would not)."""
    s = np.float32(0.0)
    for f in range(a.shape[0]):
        s += a[f] * b[f]
    return s


@njit(**_JIT)
def weight_stride1(x, gy, pt, pl, kh, kw, gw, o0, o1):
    """Output channels ``o0:o1`` of ``gw (O, C, kh, kw)`` (float64 sums, written whole), the weight
    gradient of a stride-1, undilated, one-group convolution of ``x (N, C, H, W)`` padded by ``pt``
    rows and ``pl`` columns on top and left, for ``gy (N, O, OH, OW)``. Its scratch is its own (a
    flat output-gradient grid and the padded image, ``width`` the padded input's, OW + kw - 1), so
    ranges may run at once as one region."""
    n, c = x.shape[0], x.shape[1]
    oh, ow = gy.shape[2], gy.shape[3]
    width = ow + kw - 1
    size = oh * width
    grid = np.zeros(size, x.dtype)
    buf = np.empty((c, (oh + kh - 1) * width + kw), x.dtype)
    gw[o0:o1] = 0.0
    for b in range(n):
        buf[:] = 0.0
        for ch in range(c):
            _rows_into(x[b, ch], buf[ch], pt * width + pl, width)
        for o in range(o0, o1):
            _rows_into(gy[b, o], grid, 0, width)
            for ch in range(c):
                pad = buf[ch]
                for ki in range(kh):
                    for kj in range(kw):
                        off = ki * width + kj
                        gw[o, ch, ki, kj] += _dot(grid, pad[off:off + size])


@njit(**_JIT, fastmath={"contract"})
def forward_stride1(x, w, pt, pl, y, b0, b1):
    """Images ``b0:b1`` of ``y (N, O, OH, OW)``, the stride-1, undilated, one-group convolution of a
    one-channel ``x (N, 1, H, W)`` padded by ``pt`` rows and ``pl`` columns on top and left with ``w (O, 1,
    kh, kw)``: each image in a zero grid as wide as the padded input (``weight_stride1``'s layout), so
    kernel offset (ki, kj) is the contiguous run from ``ki * width + kj`` and each output channel's
    grid is ``kh * kw`` multiply-adds of whole runs, four channels sharing each load. im2col's 9-column
    GEMM copied the columns and the output (the CNN's 1 -> 16 stem at 28x28: 236 / 268 us at one / two
    threads, this loop 191 / 100, torch 226 / 102). Each output is ``fma(w, x, acc)`` over the offsets in
    order from zero, whatever the images' split."""
    o, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    oh, ow = y.shape[2], y.shape[3]
    width = ow + kw - 1
    size = oh * width
    pad = np.zeros((oh + kh - 1) * width + kw, x.dtype)
    acc = np.empty((4, size), x.dtype)
    for b in range(b0, b1):
        _rows_into(x[b, 0], pad, pt * width + pl, width)
        for o0 in range(0, o, 4):
            nb = min(4, o - o0)
            acc[:] = 0.0
            for ki in range(kh):
                for kj in range(kw):
                    src = pad[ki * width + kj:ki * width + kj + size]
                    if nb == 4:
                        w0, w1, w2, w3 = w[o0, 0, ki, kj], w[o0 + 1, 0, ki, kj], w[o0 + 2, 0, ki, kj], w[o0 + 3, 0, ki, kj]
                        a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
                        for f in range(size):
                            v = src[f]
                            a0[f] += w0 * v
                            a1[f] += w1 * v
                            a2[f] += w2 * v
                            a3[f] += w3 * v
                    else:
                        for q in range(nb):
                            wq, aq = w[o0 + q, 0, ki, kj], acc[q]
                            for f in range(size):
                                aq[f] += wq * src[f]
            for q in range(nb):
                for r in range(oh):
                    row, a = y[b, o0 + q, r], acc[q, r * width:r * width + ow]
                    for c in range(ow):
                        row[c] = a[c]


@njit(**_JIT)
def im2col_stride1(x, pt, pl, kh, kw, oh, ow, cols):
    """im2col of ``x (N, C, H, W)`` zero-padded by ``pt`` rows and ``pl`` columns on top and left
    (and to an ``oh x ow`` output at the bottom and right), stride 1, undilated, into ``cols (N *
    OH * OW, kh * kw * C)`` (columns in (ki, kj, c) order,
    as ``nn/_ops.py``'s ``_cols_rows``). Each image goes channels last into a padded scratch
    first, so a window row is one contiguous run of ``kw * C`` floats: numpy's copy of the strided
    window view moved runs of C floats (0.42 ms of the CNN's 16 -> 32 forward at one thread)."""
    n, c, h, w = x.shape
    hp, wp = oh + kh - 1, ow + kw - 1
    run = kw * c
    p = np.zeros((hp, wp * c), x.dtype)
    for b in range(n):
        for ch in range(c):
            for r in range(min(h, hp - pt)):
                pr = p[r + pt]
                xr = x[b, ch, r]
                for q in range(min(w, wp - pl)):
                    pr[(q + pl) * c + ch] = xr[q]
        for i in range(oh):
            for j in range(ow):
                dst = cols[(b * oh + i) * ow + j]
                for a in range(kh):
                    src = p[i + a, j * c:j * c + run]
                    out = dst[a * run:(a + 1) * run]
                    for k in range(run):
                        out[k] = src[k]
