"""Linear and bilinear upsampling in ATen's cpu arithmetic: one pass over the output, each value a
chain of fused multiply-adds over its taps with the taps' weights multiplied first (bilinear: ``x01 w01``,
then ``+ x00 w00``, ``+ x10 w10``, ``+ x11 w11``, as GCC contracts ATen's four-term sum), and the backward
scatter in output order, ``g_in += (w_h w_w) g`` fused. Each call takes a block of whole planes
(``kernels.parallel`` cuts the planes between threads). ``nn/_upsample.py`` computes the taps and
weights and keeps the numpy form of the same arithmetic (without numba); the matrix products the op
replaced rounded differently in 35-50% of the outputs."""
from __future__ import annotations

import numpy as np
from numba import njit

from .fastmath import fma

__all__ = ["linear1d", "linear1d_backward", "bilinear2d", "bilinear2d_backward", "trilinear3d_backward",
           "trilinear3d_separable", "bilinear2d_separable"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT)
def linear1d(x, out, i0, i1, w0, w1):
    """``x`` (planes, n_in) -> ``out`` (planes, n_out)."""
    for p in range(x.shape[0]):
        for o in range(out.shape[1]):
            out[p, o] = fma(x[p, i0[o]], w0[o], x[p, i1[o]] * w1[o])


@njit(**_JIT)
def linear1d_backward(g, out, i0, i1, w0, w1):
    """Adds each output gradient into its two taps, in output order (``out`` zeroed)."""
    for p in range(g.shape[0]):
        for o in range(g.shape[1]):
            v = g[p, o]
            out[p, i0[o]] = fma(w0[o], v, out[p, i0[o]])
            out[p, i1[o]] = fma(w1[o], v, out[p, i1[o]])


@njit(**_JIT)
def bilinear2d(x, out, h0, h1, a, b, w0, w1, c, d):
    """``x`` (planes, H, W) -> ``out`` (planes, OH, OW); ``a``/``b`` the rows' weights, ``c``/``d`` the columns'."""
    for p in range(x.shape[0]):
        for oh in range(out.shape[1]):
            r0, r1, wa, wb = h0[oh], h1[oh], a[oh], b[oh]
            for ow in range(out.shape[2]):
                q0, q1, wc, wd = w0[ow], w1[ow], c[ow], d[ow]
                acc = x[p, r0, q1] * (wa * wd)
                acc = fma(x[p, r0, q0], wa * wc, acc)
                acc = fma(x[p, r1, q0], wb * wc, acc)
                out[p, oh, ow] = fma(x[p, r1, q1], wb * wd, acc)


@njit(**_JIT)
def bilinear2d_backward(g, out, h0, h1, a, b, w0, w1, c, d):
    """Adds each output gradient into its four taps, in output order (``out`` zeroed)."""
    for p in range(g.shape[0]):
        for oh in range(g.shape[1]):
            r0, r1, wa, wb = h0[oh], h1[oh], a[oh], b[oh]
            for ow in range(g.shape[2]):
                q0, q1, wc, wd = w0[ow], w1[ow], c[ow], d[ow]
                v = g[p, oh, ow]
                out[p, r0, q0] = fma(wa * wc, v, out[p, r0, q0])
                out[p, r0, q1] = fma(wa * wd, v, out[p, r0, q1])
                out[p, r1, q0] = fma(wb * wc, v, out[p, r1, q0])
                out[p, r1, q1] = fma(wb * wd, v, out[p, r1, q1])


@njit(**_JIT)
def trilinear3d_backward(g, out, d0, d1, da, db, h0, h1, ha, hb, w0, w1, wa, wb):
    """Adds ``(wd wh ww) g`` (the weight's product rounded, then one fused multiply-add) into the eight
    taps, in output order (``out`` zeroed)."""
    for p in range(g.shape[0]):
        for od in range(g.shape[1]):
            i0, i1, ea, eb = d0[od], d1[od], da[od], db[od]
            for oh in range(g.shape[2]):
                j0, j1, fa, fb = h0[oh], h1[oh], ha[oh], hb[oh]
                for ow in range(g.shape[3]):
                    k0, k1, ga, gb = w0[ow], w1[ow], wa[ow], wb[ow]
                    v = g[p, od, oh, ow]
                    out[p, i0, j0, k0] = fma(ea * fa * ga, v, out[p, i0, j0, k0])
                    out[p, i0, j0, k1] = fma(ea * fa * gb, v, out[p, i0, j0, k1])
                    out[p, i0, j1, k0] = fma(ea * fb * ga, v, out[p, i0, j1, k0])
                    out[p, i0, j1, k1] = fma(ea * fb * gb, v, out[p, i0, j1, k1])
                    out[p, i1, j0, k0] = fma(eb * fa * ga, v, out[p, i1, j0, k0])
                    out[p, i1, j0, k1] = fma(eb * fa * gb, v, out[p, i1, j0, k1])
                    out[p, i1, j1, k0] = fma(eb * fb * ga, v, out[p, i1, j1, k0])
                    out[p, i1, j1, k1] = fma(eb * fb * gb, v, out[p, i1, j1, k1])


@njit(**_JIT)
def trilinear3d_separable(x, out, d0, d1, da, db, h0, h1, ha, hb, w0, w1, wa, wb):
    """``x`` (planes, D, H, W) -> ``out`` (planes, OD, OH, OW) as ATen's generic ``Interpolate<3, .., 2>``
    (trilinear has no channels-first vector kernel): each level ``fma(t0, w0, t1 * w1)``, the width
    innermost. Each level's value is rounded to the dtype and depends only on the input row and the
    output column (then the output row), so a pass along the width, one along the height and one
    along the depth give the same bits, the last two contiguous and vectorised."""
    D, H, OD, OH, OW = x.shape[1], x.shape[2], out.shape[1], out.shape[2], out.shape[3]
    u = np.empty((D, H, OW), x.dtype)
    v = np.empty((D, OH, OW), x.dtype)
    for p in range(x.shape[0]):
        for i in range(D):
            for j in range(H):
                row, ur = x[p, i, j], u[i, j]
                for ow in range(OW):
                    ur[ow] = fma(row[w0[ow]], wa[ow], row[w1[ow]] * wb[ow])
            for oh in range(OH):
                ua, ub, fa, fb, vr = u[i, h0[oh]], u[i, h1[oh]], ha[oh], hb[oh], v[i, oh]
                for ow in range(OW):
                    vr[ow] = fma(ua[ow], fa, ub[ow] * fb)
        for od in range(OD):
            va, vb, ea, eb = v[d0[od]], v[d1[od]], da[od], db[od]
            for oh in range(OH):
                ra, rb, o = va[oh], vb[oh], out[p, od, oh]
                for ow in range(OW):
                    o[ow] = fma(ra[ow], ea, rb[ow] * eb)


@njit(**_JIT)
def bilinear2d_separable(x, out, h0, h1, a, b, w0, w1, c, d):
    """ATen's generic ``Interpolate<2, .., 2>`` (its kernel for channels-first input whose output has
    ``OH + OW > 128``, unless one thread and three channels): ``fma(t0, a, t1 b)`` over the rows' values
    ``t = fma(x0, c, x1 d)``, by a pass along the width, then one along the height."""
    H, OH, OW = x.shape[1], out.shape[1], out.shape[2]
    u = np.empty((H, OW), x.dtype)
    for p in range(x.shape[0]):
        for r in range(H):
            row, ur = x[p, r], u[r]
            for ow in range(OW):
                ur[ow] = fma(row[w0[ow]], c[ow], row[w1[ow]] * d[ow])
        for oh in range(OH):
            ua, ub, wa, wb, o = u[h0[oh]], u[h1[oh]], a[oh], b[oh], out[p, oh]
            for ow in range(OW):
                o[ow] = fma(ua[ow], wa, ub[ow] * wb)
