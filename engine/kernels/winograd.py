"""The Winograd input and output transforms as numba loops (``nn/_winograd.py`` loads it through
``kernels.loops("winograd")`` once ``kernels.use`` says yes).

numpy's whole-array passes (one per nonzero of B^T, twice) write through strided temporaries;
here each image's column transform goes to a scratch that stays in cache and the row transform
reads it from there: 2.2x faster than the numpy passes for F(2, 3) on the ResNet block's shape.
Every inner loop is a multiply-add of one contiguous run into another (few pointers, so LLVM
vectorises it), with the nonzero coefficients taken in the order ``_winograd._combine`` takes
them and no fused multiply-add: the results equal the numpy passes'. Images are split over threads.

The output transform reads the per-tap GEMMs' channels-last products, combines each tile's rows
then columns (A^T M A, separably: the numpy form's one Kronecker GEMM sums in another order, so
the two agree to rounding) into a small channels-last scratch and writes NCHW output rows from
it: no ``(m^2, T*O)`` intermediate, no strided scatter and no final transposing copy.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["input_transform", "output_transform"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT)
def _combine(bt, row, terms, idx, offsets, out):
    """``out = sum_q bt[row, q] * terms[idx[q], offsets[q]:]`` over the nonzero coefficients, in order."""
    first = True
    for q in range(bt.shape[1]):
        coef = bt[row, q]
        if coef == 0:
            continue
        t = terms[idx[q], offsets[q]:]       # a slice: plain ``t[k]`` below (an offset index
        if first:                            # would be wrapped, and the loop not vectorised)
            for k in range(out.shape[0]):
                out[k] = t[k] * coef
            first = False
        else:
            for k in range(out.shape[0]):
                out[k] = out[k] + t[k] * coef


@njit(**_JIT)
def input_transform(cw, images, p, v, bt):
    """For each image ``b`` of ``images``: ``p (N, rows, m, (tw + 1) * C)``, the padded
    channels-last input with columns split by residue mod m, into ``v (a, a, N, th, tw * C)`` =
    B^T d B; ``cw (len(images), a, rows, tw * C)`` is scratch (``kernels.parallel`` cuts it and
    ``images`` into one block per thread)."""
    rows, m = p.shape[1], p.shape[2]
    a, th, span = v.shape[0], v.shape[3], v.shape[4]
    c = p.shape[3] - span
    col_idx = np.empty(a, np.int64)       # patch column q: residue q % m, shifted q // m tiles
    col_off = np.empty(a, np.int64)
    row_off = np.zeros(a, np.int64)
    for q in range(a):
        col_idx[q] = q % m
        col_off[q] = (q // m) * c
    row_idx = np.empty(a, np.int64)
    for k in range(images.shape[0]):
        b = images[k]
        s = cw[k]
        for r in range(rows):
            for j in range(a):
                _combine(bt, j, p[b, r], col_idx, col_off, s[j, r])
        for i in range(th):
            for q in range(a):
                row_idx[q] = m * i + q
            for j in range(a):
                for ii in range(a):
                    _combine(bt, ii, s[j], row_idx, row_off, v[ii, j, b, i])


@njit(**_JIT)
def _axpy(coef, src, dst, first):
    """``dst = src * coef`` (``first``) or ``dst += src * coef``."""
    if first:
        for k in range(dst.shape[0]):
            dst[k] = src[k] * coef
    else:
        for k in range(dst.shape[0]):
            dst[k] = dst[k] + src[k] * coef


@njit(**_JIT)
def output_transform(s, images, prod, at, y):
    """For each image ``b`` of ``images``: ``prod (a^2, N, th, tw * O)``, the products of every
    tile's Winograd taps (channels last), into ``y (N, O, oh, ow)`` = A^T M A per tile, the last
    partial tiles cropped; ``s (len(images), m a + m^2, tw * O)`` is scratch (``kernels.parallel``
    cuts it and ``images`` into one block per thread)."""
    m, a = at.shape
    th, span = prod.shape[2], prod.shape[3]
    o, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    tw = span // o
    for kk in range(images.shape[0]):
        b = images[kk]
        t = s[kk, :m * a]                           # t[r a + c] = sum_q A^T[r, q] M[q, c], a tile row at once
        u = s[kk, m * a:]                           # u[r m + cc] = sum_c A^T[cc, c] t[r a + c]
        yb = y[b]
        for i in range(th):
            for r in range(m):
                for c in range(a):
                    first = True
                    for q in range(a):
                        if at[r, q] != 0:
                            _axpy(at[r, q], prod[q * a + c, b, i], t[r * a + c], first)
                            first = False
            for r in range(m):
                for cc in range(m):
                    first = True
                    for c in range(a):
                        if at[cc, c] != 0:
                            _axpy(at[cc, c], t[r * a + c], u[r * m + cc], first)
                            first = False
            for r in range(min(m, oh - m * i)):
                ur = u[r * m:r * m + m]
                for ch in range(o):
                    yr = yb[ch, m * i + r]
                    for j in range(ow // m):
                        for cc in range(m):
                            yr[m * j + cc] = ur[cc, j * o + ch]
                    for col in range(ow - ow % m, ow):
                        yr[col] = ur[col - m * (ow // m), (ow // m) * o + ch]
