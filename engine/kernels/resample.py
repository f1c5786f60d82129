"""Bicubic and antialiased resampling, adaptive and windowed average pooling, in ATen's cpu arithmetic
(``nn/_resample.py`` computes the taps and weights and declares the ops; ``nn/_ops.py``'s average pool
takes ``avg_pool3d``). Each loop takes whole planes (``(planes, ...)`` contiguous, float32 or float64:
numba compiles one version per dtype), so ``kernels.parallel`` can cut the planes between threads.

- bicubic forward (ATen's generic ``Interpolate<2, .., 4>``, GCC-contracted): along the width
  ``x1 w1``, then ``+ x0 w0``, ``+ x2 w2``, ``+ x3 w3`` as fused multiply-adds; the four rows' values
  combined with the height weights in the same order (``cubic2d_separable``: a pass per dim).
- bicubic backward (``UpSampleBicubic2d.cpp``, compiled without FMA): each output gradient ``g``
  added as ``(g wy) wx`` into its 16 taps, the column tap outermost, in output order.
- adaptive average pool: a window's plain sum in row-major order, divided by each window extent in turn
  (``sum / kd / kh / kw``); backward adds ``g / kd / kh / kw`` into the window in output order.
- average pool: the window's sum over its in-bounds part divided once by the integer divisor (the
  padded window's size, the in-bounds size, or ``divisor_override``); backward adds ``g / divisor``.
- antialias passes (``separable_upsample_generic_Nd_kernel_impl``): one dim at a time, the width first,
  each output ``x0 w0``, then the window's products added unfused in whole blocks of 4 (float32) or
  2 (float64) taps (GCC's in-order vectorisation of the loop), the rest fused; backward adds
  ``(wx wy) g`` fused, in output order.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fastmath import fma

__all__ = ["cubic2d_backward", "adaptive_avg3d", "adaptive_avg3d_backward", "avg_pool3d",
           "avg_pool3d_backward", "aa_rows", "aa_cols", "aa2d_backward", "cubic2d_backward_planes",
           "adaptive_avg_planes", "adaptive_avg_planes_backward", "cubic2d_separable",
           "aa2d_backward_planes", "trilinear3d_backward_planes"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _tap4(row, i, w, o):
    acc = row[i[1, o]] * w[1, o]
    acc = fma(row[i[0, o]], w[0, o], acc)
    acc = fma(row[i[2, o]], w[2, o], acc)
    return fma(row[i[3, o]], w[3, o], acc)


@njit(**_JIT)
def cubic2d_backward(g, out, hi, hw, wi, ww):
    """Adds ``(g wy) wx`` into the 16 taps of each output, in output order (``out`` zeroed)."""
    for p in range(g.shape[0]):
        for oh in range(g.shape[1]):
            for ow in range(g.shape[2]):
                v = g[p, oh, ow]
                for ii in range(4):
                    c, wx = wi[ii, ow], ww[ii, ow]
                    for jj in range(4):
                        r = hi[jj, oh]
                        out[p, r, c] += (v * hw[jj, oh]) * wx


@njit(**_JIT)
def adaptive_avg3d(x, out, d0, d1, h0, h1, w0, w1, f):
    """``x`` (planes, D, H, W) -> ``out`` (planes, OD, OH, OW): window ``[d0[o], d1[o])`` per dim. ``f``
    (one element of the dtype) turns the integer extents into the dtype, as C++ converts them before
    dividing (numba would divide float32 by an integer in float64)."""
    for p in range(x.shape[0]):
        for od in range(out.shape[1]):
            f[0] = d1[od] - d0[od]
            kd = f[0]
            for oh in range(out.shape[2]):
                f[0] = h1[oh] - h0[oh]
                kh = f[0]
                for ow in range(out.shape[3]):
                    f[0] = w1[ow] - w0[ow]
                    kw = f[0]
                    f[0] = 0
                    s = f[0]
                    for i in range(d0[od], d1[od]):
                        for j in range(h0[oh], h1[oh]):
                            for k in range(w0[ow], w1[ow]):
                                s += x[p, i, j, k]
                    out[p, od, oh, ow] = s / kd / kh / kw


@njit(**_JIT)
def adaptive_avg3d_backward(g, out, d0, d1, h0, h1, w0, w1, f):
    for p in range(g.shape[0]):
        for od in range(g.shape[1]):
            f[0] = d1[od] - d0[od]
            kd = f[0]
            for oh in range(g.shape[2]):
                f[0] = h1[oh] - h0[oh]
                kh = f[0]
                for ow in range(g.shape[3]):
                    f[0] = w1[ow] - w0[ow]
                    kw = f[0]
                    v = g[p, od, oh, ow] / kd / kh / kw
                    for i in range(d0[od], d1[od]):
                        for j in range(h0[oh], h1[oh]):
                            for k in range(w0[ow], w1[ow]):
                                out[p, i, j, k] += v


@njit(**_JIT, inline="always")
def _window(o, k, s, pad, n):
    """ATen's window along one dim: its clipped bounds and the padded extent counted by ``count_include_pad``."""
    lo = o * s - pad
    hi = min(lo + k, n + pad)
    size = hi - lo
    return max(lo, 0), min(hi, n), size


@njit(**_JIT)
def avg_pool3d(x, out, kd, kh, kw, sd, sh, sw, pd, ph, pw, include_pad, divisor, f):
    """``cpu_avg_pool``/``cpu_avg_pool3d``: ``divisor`` 0 unless ``divisor_override``; an output whose
    window lies wholly in the padding stays 0."""
    D, H, W = x.shape[1], x.shape[2], x.shape[3]
    for p in range(x.shape[0]):
        for od in range(out.shape[1]):
            i0, i1, nd = _window(od, kd, sd, pd, D)
            for oh in range(out.shape[2]):
                j0, j1, nh = _window(oh, kh, sh, ph, H)
                for ow in range(out.shape[3]):
                    k0, k1, nw = _window(ow, kw, sw, pw, W)
                    f[0] = 0
                    s = f[0]
                    if i0 >= i1 or j0 >= j1 or k0 >= k1:
                        out[p, od, oh, ow] = s
                        continue
                    for i in range(i0, i1):
                        for j in range(j0, j1):
                            for k in range(k0, k1):
                                s += x[p, i, j, k]
                    if divisor:
                        div = divisor
                    elif include_pad:
                        div = nd * nh * nw
                    else:
                        div = (i1 - i0) * (j1 - j0) * (k1 - k0)
                    f[0] = div
                    out[p, od, oh, ow] = s / f[0]


@njit(**_JIT)
def avg_pool3d_backward(g, out, kd, kh, kw, sd, sh, sw, pd, ph, pw, include_pad, divisor, f):
    D, H, W = out.shape[1], out.shape[2], out.shape[3]
    for p in range(g.shape[0]):
        for od in range(g.shape[1]):
            i0, i1, nd = _window(od, kd, sd, pd, D)
            for oh in range(g.shape[2]):
                j0, j1, nh = _window(oh, kh, sh, ph, H)
                for ow in range(g.shape[3]):
                    k0, k1, nw = _window(ow, kw, sw, pw, W)
                    if divisor:
                        div = divisor
                    elif include_pad:
                        div = nd * nh * nw
                    else:
                        div = (i1 - i0) * (j1 - j0) * (k1 - k0)
                    f[0] = div
                    v = g[p, od, oh, ow] / f[0]
                    for i in range(i0, i1):
                        for j in range(j0, j1):
                            for k in range(k0, k1):
                                out[p, i, j, k] += v


@njit(**_JIT, inline="always")
def _aa_sum(x, r, b, step, n, w, o, vec):
    """``x[r + b + j step] w[o, j]`` summed over ``j < n`` as GCC compiles ATen's loop: the first product,
    then ``vec``-wide blocks (4 floats, 2 doubles) whose products are added one by one unfused, then the
    remainder as fused multiply-adds."""
    acc = x[r + b] * w[o, 0]
    full = 1 + (n - 1) // vec * vec
    for j in range(1, full):
        acc = acc + x[r + b + j * step] * w[o, j]
    for j in range(full, n):
        acc = fma(x[r + b + j * step], w[o, j], acc)
    return acc


@njit(**_JIT)
def aa_rows(x, out, lo, size, w, vec):
    """One antialias pass along the last dim: ``x`` (rows, n) -> ``out`` (rows, m); output ``o`` reads
    ``x[lo[o] : lo[o] + size[o]]`` with weights ``w[o, :size[o]]``."""
    flat = x.reshape(-1)
    n = x.shape[1]
    for r in range(x.shape[0]):
        for o in range(out.shape[1]):
            out[r, o] = _aa_sum(flat, r * n, lo[o], 1, size[o], w, o, vec)


@njit(**_JIT)
def aa_cols(x, out, lo, size, w, vec):
    """The pass along the middle dim: ``x`` (planes, n, W) -> ``out`` (planes, m, W)."""
    flat = x.reshape(-1)
    n, W = x.shape[1], x.shape[2]
    for p in range(x.shape[0]):
        for o in range(out.shape[1]):
            for c in range(W):
                out[p, o, c] = _aa_sum(flat, p * n * W + c, lo[o] * W, W, size[o], w, o, vec)


@njit(**_JIT)
def aa2d_backward(g, out, hlo, hsize, hw, wlo, wsize, ww):
    """``cpu_upsample_genNd_backward_aa``: ``out[y, x] += (wx wy) g`` fused, in output order (``out`` zeroed)."""
    for p in range(g.shape[0]):
        for oh in range(g.shape[1]):
            y0 = hlo[oh]
            for ow in range(g.shape[2]):
                x0 = wlo[ow]
                v = g[p, oh, ow]
                for y in range(hsize[oh]):
                    wy = hw[oh, y]
                    for xx in range(wsize[ow]):
                        out[p, y0 + y, x0 + xx] = fma(ww[ow, xx] * wy, v, out[p, y0 + y, x0 + xx])


# ---------------------------------------------------------------- many planes: planes innermost
# The same arithmetic per value, computed for a block of ``_Q`` planes at once: the block is copied
# into a buffer with the planes last (one pass), every tap then reads ``_Q`` contiguous values and the
# operations run as vectors across planes (the per-plane loops above are dependent chains with
# data-dependent trip counts); results go back plane-first. The plane loops run to ``nq``, a runtime
# bound: LLVM vectorises those (a constant 16 it unrolls into scalar code). For ViT position embeddings (768 planes)
# and pooled feature maps (thousands of planes).
_Q = 64


@njit(**_JIT, inline="always")
def _load_block(x, p0, nq, buf):
    """``buf[..., q] = x[p0 + q]`` for a (planes, A, B) array (any trailing dims flattened to A, B)."""
    for q in range(nq):
        for a in range(x.shape[1]):
            for b in range(x.shape[2]):
                buf[a, b, q] = x[p0 + q, a, b]


@njit(**_JIT, inline="always")
def _store_block(buf, out, p0, nq):
    for q in range(nq):
        for a in range(out.shape[1]):
            for b in range(out.shape[2]):
                out[p0 + q, a, b] = buf[a, b, q]


@njit(**_JIT)
def cubic2d_backward_planes(g, out, hi, hw, wi, ww):
    """``cubic2d_backward`` with the planes innermost (``out`` need not be zeroed)."""
    H, W, OH, OW = out.shape[1], out.shape[2], g.shape[1], g.shape[2]
    block = min(_Q, g.shape[0])
    gb = np.zeros((OH, OW, block), g.dtype)
    acc = np.empty((H, W, block), g.dtype)
    gy = np.empty((4, block), g.dtype)
    for p0 in range(0, g.shape[0], block):
        nq = min(block, g.shape[0] - p0)
        _load_block(g, p0, nq, gb)
        acc[...] = 0
        for oh in range(OH):
            for ow in range(OW):
                gv = gb[oh, ow]
                for jj in range(4):   # the products g wy, each used by four column taps
                    wy, gyj = hw[jj, oh], gy[jj]
                    for q in range(nq):
                        gyj[q] = gv[q] * wy
                for ii in range(4):
                    c, wx = wi[ii, ow], ww[ii, ow]
                    for jj in range(4):
                        dst, gyj = acc[hi[jj, oh], c], gy[jj]
                        for q in range(nq):
                            dst[q] += gyj[q] * wx
        _store_block(acc, out, p0, nq)


@njit(**_JIT)
def adaptive_avg_planes(x, out, d0, d1, h0, h1, w0, w1, f, H, W):
    """``adaptive_avg3d`` with the planes innermost; ``x`` (planes, D, H*W), ``out`` (planes, OD, OH*OW)."""
    OD, OH, OW = d1.shape[0], h1.shape[0], w1.shape[0]
    buf = np.zeros((x.shape[1], x.shape[2], _Q), x.dtype)
    res = np.empty((OD, OH * OW, _Q), x.dtype)
    s = np.empty(_Q, x.dtype)
    for p0 in range(0, x.shape[0], _Q):
        nq = min(_Q, x.shape[0] - p0)
        _load_block(x, p0, nq, buf)
        for od in range(OD):
            f[0] = d1[od] - d0[od]
            kd = f[0]
            for oh in range(OH):
                f[0] = h1[oh] - h0[oh]
                kh = f[0]
                for ow in range(OW):
                    f[0] = w1[ow] - w0[ow]
                    kw = f[0]
                    for q in range(nq):
                        s[q] = 0
                    for i in range(d0[od], d1[od]):
                        for j in range(h0[oh], h1[oh]):
                            for k in range(w0[ow], w1[ow]):
                                for q in range(nq):
                                    s[q] += buf[i, j * W + k, q]
                    for q in range(nq):
                        res[od, oh * OW + ow, q] = s[q] / kd / kh / kw
        _store_block(res, out, p0, nq)


@njit(**_JIT)
def adaptive_avg_planes_backward(g, out, d0, d1, h0, h1, w0, w1, f, H, W):
    """``adaptive_avg3d_backward`` with the planes innermost; ``g`` (planes, OD, OH*OW), ``out``
    (planes, D, H*W), need not be zeroed."""
    OD, OH, OW = d1.shape[0], h1.shape[0], w1.shape[0]
    gb = np.zeros((OD, OH * OW, _Q), g.dtype)
    acc = np.empty((out.shape[1], out.shape[2], _Q), g.dtype)
    v = np.empty(_Q, g.dtype)
    for p0 in range(0, g.shape[0], _Q):
        nq = min(_Q, g.shape[0] - p0)
        _load_block(g, p0, nq, gb)
        acc[...] = 0
        for od in range(OD):
            f[0] = d1[od] - d0[od]
            kd = f[0]
            for oh in range(OH):
                f[0] = h1[oh] - h0[oh]
                kh = f[0]
                for ow in range(OW):
                    f[0] = w1[ow] - w0[ow]
                    kw = f[0]
                    for q in range(nq):
                        v[q] = gb[od, oh * OW + ow, q] / kd / kh / kw
                    for i in range(d0[od], d1[od]):
                        for j in range(h0[oh], h1[oh]):
                            for k in range(w0[ow], w1[ow]):
                                for q in range(nq):
                                    acc[i, j * W + k, q] += v[q]
        _store_block(acc, out, p0, nq)


# ---------------------------------------------------------------- separable forwards
# ATen's nested ``Interpolate`` rounds each level's value to the dtype (float's opmath is float), and
# the inner level's value depends only on the input row and the output column: computing it once per
# input row (a pass along the width), then combining rows (a pass along the height, contiguous and
# vectorised), gives the same bits with 4 + 4 operations per output instead of 20.
@njit(**_JIT)
def cubic2d_separable(x, out, hi, hw, wi, ww):
    H, OH, OW = x.shape[1], out.shape[1], out.shape[2]
    u = np.empty((H, OW), x.dtype)
    for p in range(x.shape[0]):
        for r in range(H):
            row, ur = x[p, r], u[r]
            for ow in range(OW):
                ur[ow] = _tap4(row, wi, ww, ow)
        for oh in range(OH):
            u0, u1, u2, u3 = u[hi[0, oh]], u[hi[1, oh]], u[hi[2, oh]], u[hi[3, oh]]
            a0, a1, a2, a3 = hw[0, oh], hw[1, oh], hw[2, oh], hw[3, oh]
            o = out[p, oh]
            for ow in range(OW):
                o[ow] = fma(u3[ow], a3, fma(u2[ow], a2, fma(u0[ow], a0, u1[ow] * a1)))


@njit(**_JIT)
def aa2d_backward_planes(g, out, hlo, hsize, hw, wlo, wsize, ww):
    """``aa2d_backward`` with the planes innermost (``out`` need not be zeroed)."""
    H, W, OH, OW = out.shape[1], out.shape[2], g.shape[1], g.shape[2]
    block = min(_Q, g.shape[0])
    gb = np.zeros((OH, OW, block), g.dtype)
    acc = np.empty((H, W, block), g.dtype)
    for p0 in range(0, g.shape[0], block):
        nq = min(block, g.shape[0] - p0)
        _load_block(g, p0, nq, gb)
        acc[...] = 0
        for oh in range(OH):
            y0 = hlo[oh]
            for ow in range(OW):
                x0 = wlo[ow]
                gv = gb[oh, ow]
                for y in range(hsize[oh]):
                    wy = hw[oh, y]
                    for xx in range(wsize[ow]):
                        w = ww[ow, xx] * wy
                        dst = acc[y0 + y, x0 + xx]
                        for q in range(nq):
                            dst[q] = fma(w, gv[q], dst[q])
        _store_block(acc, out, p0, nq)


@njit(**_JIT)
def trilinear3d_backward_planes(g, out, d0, d1, da, db, h0, h1, ha, hb, w0, w1, wa, wb, W, OW):
    """``upsample.trilinear3d_backward`` with the planes innermost: ``g`` (planes, OD, OH*OW), ``out``
    (planes, D, H*W), need not be zeroed."""
    OD, OH = d0.shape[0], h0.shape[0]
    block = min(_Q, g.shape[0])
    gb = np.zeros((g.shape[1], g.shape[2], block), g.dtype)
    acc = np.empty((out.shape[1], out.shape[2], block), g.dtype)
    for p0 in range(0, g.shape[0], block):
        nq = min(block, g.shape[0] - p0)
        _load_block(g, p0, nq, gb)
        acc[...] = 0
        for od in range(OD):
            i0, i1, ea, eb = d0[od], d1[od], da[od], db[od]
            for oh in range(OH):
                j0, j1, fa, fb = h0[oh], h1[oh], ha[oh], hb[oh]
                for ow in range(OW):
                    k0, k1, ga, gc = w0[ow], w1[ow], wa[ow], wb[ow]
                    gv = gb[od, oh * OW + ow]
                    for i, e in ((i0, ea), (i1, eb)):
                        for j, f in ((j0, fa), (j1, fb)):
                            for k, c in ((k0, ga), (k1, gc)):
                                w = e * f * c
                                dst = acc[i, j * W + k]
                                for q in range(nq):
                                    dst[q] = fma(w, gv[q], dst[q])
        _store_block(acc, out, p0, nq)
