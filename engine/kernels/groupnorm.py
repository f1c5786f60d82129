"""Group norm over contiguous ``(N, C, HxW)`` float32 arrays, forward and backward, as ATen's cpu
kernel (``group_norm_kernel.cpp``, contiguous path) rounds them, so outputs and the three gradients
are PyTorch's bit for bit (the numpy formula of ``(x - mean) / sqrt(var + eps)`` then ``* w + b``
differed in about half the elements, forward and backward).

Forward: each ``(n, g)`` row of ``D * HxW`` values gets layer_norm's moments (ATen calls the same
``RowwiseMoments``: ``rowwise._rows_mean_rstd``); without weight and bias ``y = (x - mean) * rstd``,
else per channel ``scale = rstd * w``, ``bias = fma(-scale, mean, b)``, ``y = fma(scale, x, bias)``.

Backward: per ``(n, c)`` the lane sums ``ds = sum(g x)``, ``db = sum(g)`` over ``HxW`` (``map2_reduce_all``
/ ``reduce_all``, layer_norm backward's ``_ln_dots``); per ``(n, g)`` the channel sums of ``ds w`` and
``db w`` in eight lanes (``CalcDsDb``: whole vectors fused, the lanes added in order, the tail fused),
``c2 = fma(db, mean, -ds) rstd^3 / (D HxW)``, ``c3 = fma(-c2, mean, -(db rstd / (D HxW)))``,
``gx = fma(c2, x, (rstd w) g) + c3``; ``gw[c]`` the sum over ``n`` of ``fma(-db, mean, ds) rstd`` and ``gb[c]``
of ``db``, in order. ATen's ``parallel_for`` splits only rows, each computed alone, but it runs its
lambda inline at one thread (or one group) and through its threads' copy otherwise, and GCC compiled
the two copies' ``CalcDsDb`` tail differently (``_weighted_group_sums``): the one difference the thread
count makes.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fastmath import fma
from .lanes import layer_norm_dots
from .rowwise import _moment_scratch, _ROWS, _rows_mean_rstd, _seq_dot, _seq_sum

__all__ = ["group_norm", "group_norm_backward"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True)
_LANES = 8
_dots = layer_norm_dots(False, fused_tail=False)


@njit(**_JIT)
def group_norm(x, G, w, b, eps, out, mean, rstd):
    """``out`` (``x``'s shape ``(N, C, HxW)``) normalised over each ``(n, g)`` group, ``w``/``b`` (``(C,)``;
    empty: not applied) per channel; the groups' mean and 1/std into ``mean``, ``rstd`` (``(N * G,)``)."""
    N, C, HW = x.shape
    D = C // G
    rows, orows = x.reshape(N * G, D * HW), out.reshape(N * G, D * HW)
    scratch = _moment_scratch(D * HW)
    affine = w.shape[0] > 0 or b.shape[0] > 0
    for r0 in range(0, N * G, _ROWS):
        r1 = min(N * G, r0 + _ROWS)
        _rows_mean_rstd(rows, r0, r1 - r0, eps, mean, rstd, scratch)
        for r in range(r0, r1):
            mu, a = mean[r], rstd[r]
            if not affine:
                for k in range(D * HW):
                    orows[r, k] = (rows[r, k] - mu) * a
                continue
            n, g = r // G, r % G
            for j in range(D):
                c = g * D + j
                scale = a * w[c] if w.shape[0] > 0 else a
                bias = fma(-scale, mu, b[c] if b.shape[0] > 0 else F(0.0))
                xc, oc = x[n, c], out[n, c]
                for k in range(HW):
                    oc[k] = fma(scale, xc[k], bias)


@njit(**_JIT)
def _channel_sums(g, x, ds, db):
    """``ds[n, c] = sum(g x)``, ``db[n, c] = sum(g)`` over each ``(n, c)`` row of ``HxW``, ATen's lane order."""
    N, C, HW = x.shape
    for n in range(N):
        for c in range(C):
            if HW < _LANES:
                ds[n, c], db[n, c] = _seq_dot(g[n, c], x[n, c], HW), _seq_sum(g[n, c], HW)
            else:
                ds[n, c], db[n, c] = _dots(g[n, c], x[n, c], HW)


@njit(**_JIT)
def _weighted_group_sums(ds, db, w, has_w, c0, D, inline):
    """``CalcDsDb`` and its tail: the sums over channels ``c0 .. c0 + D - 1`` of ``ds w`` and ``db w``. The
    tail's multiply-adds are fused, except (``inline``) the first four of a tail of four or more: GCC
    vectorised the tail of the copy of ATen's loop that ``parallel_for`` runs inline (one thread, or one
    group), products rounded and added in order, and left the copy its threads run scalar."""
    d = D // _LANES * _LANES
    ls = np.zeros(_LANES, F)
    lb = np.zeros(_LANES, F)
    for j in range(0, d, _LANES):
        for lane in range(_LANES):
            c = c0 + j + lane
            wc = w[c] if has_w else F(1.0)
            ls[lane] = fma(ds[c], wc, ls[lane])
            lb[lane] = fma(db[c], wc, lb[lane])
    s, t = F(0.0), F(0.0)
    for lane in range(_LANES):
        s += ls[lane]
        t += lb[lane]
    plain = d + 4 if inline and D - d >= 4 else d
    for j in range(d, D):
        c = c0 + j
        wc = w[c] if has_w else F(1.0)
        if j < plain:
            s += ds[c] * wc
            t += db[c] * wc
        else:
            s = fma(ds[c], wc, s)
            t = fma(db[c], wc, t)
    return s, t


@njit(**_JIT)
def group_norm_backward(g, x, G, mean, rstd, w, has_w, threads, gx, gw, gb):
    """The gradients of ``group_norm`` from the forward's ``mean``/``rstd``: ``gx`` (``x``'s shape; empty:
    not computed), ``gw``, ``gb`` (``(C,)``; empty: not computed). ``w`` is read only when ``has_w``;
    ``threads`` is the intra-op thread count ATen's ``parallel_for`` would see (it picks the loop's copy)."""
    N, C, HW = x.shape
    D = C // G
    ds = np.empty((N, C), F)
    db = np.empty((N, C), F)
    _channel_sums(g, x, ds, db)
    s = F(1.0) / F(D * HW)
    inline = threads < 2 or N * G < 2
    if gx.size > 0:
        for n in range(N):
            for gr in range(G):
                i = n * G + gr
                mu, a = mean[i], rstd[i]
                sds, sdb = _weighted_group_sums(ds[n], db[n], w, has_w, gr * D, D, inline)
                c2 = fma(sdb, mu, -sds) * a * a * a * s
                c3 = fma(-(sdb * a), s, -(c2 * mu))
                for j in range(D):
                    c = gr * D + j
                    c1 = a * w[c] if has_w else a
                    gc, xc, oc = g[n, c], x[n, c], gx[n, c]
                    for k in range(HW):
                        oc[k] = fma(c1, gc[k], c2 * xc[k]) + c3
    if gw.size > 0:
        for c in range(C):
            acc = F(0.0)
            for n in range(N):
                i = n * G + c // D
                acc = fma(fma(-db[n, c], mean[i], ds[n, c]), rstd[i], acc)
            gw[c] = acc
    if gb.size > 0:
        for c in range(C):
            acc = F(0.0)
            for n in range(N):
                acc += db[n, c]
            gb[c] = acc
