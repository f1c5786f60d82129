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

__all__ = ["weight_stride1", "im2col_stride1"]

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
