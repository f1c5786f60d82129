"""The numba loops of ``pool.py``: ReLU then 2x2 max-pool, forward and backward, one pass each.

Rows are ``(N*C, H, W)`` images; each 2x2 window is read once (the forward branch-free, with
``select``). The window's first maximum in row-major order wins (the
first NaN if it holds one), as eager ``max_pool_blocks``' loops choose.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels.fastmath import select

__all__ = ["relu_max_pool", "relu_max_pool_argmax", "relu_max_pool_backward", "relu_max_pool_backward_at"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _nanmax(m, v):
    """``max(m, v)`` keeping a NaN of either (``m``'s first)."""
    return select(m != m, m, select(v > m, v, select(v != v, v, m)))


@njit(**_JIT)
def relu_max_pool(x, y):
    """``y = max_pool2x2(relu(x))`` (= relu of the window's maximum; a NaN is kept, as relu keeps it)."""
    for r in range(y.shape[0]):
        for i in range(y.shape[1]):
            top, bottom, out = x[r, 2 * i], x[r, 2 * i + 1], y[r, i]
            for j in range(out.shape[0]):
                m = _nanmax(_nanmax(_nanmax(top[2 * j], top[2 * j + 1]), bottom[2 * j]), bottom[2 * j + 1])
                out[j] = select(m > F(0.0), m, select(m != m, m, F(0.0)))


@njit(**_JIT)
def relu_max_pool_argmax(x, y, k):
    """``relu_max_pool`` that also writes ``k`` (float32): the window's first maximum (0-3, row-major)
    where the output takes a gradient (positive or NaN), 4 where it does not."""
    for r in range(y.shape[0]):
        for i in range(y.shape[1]):
            top, bottom, out, kr = x[r, 2 * i], x[r, 2 * i + 1], y[r, i], k[r, i]
            for j in range(out.shape[0]):
                a, b, c, d = top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1]
                m = _nanmax(_nanmax(_nanmax(a, b), c), d)
                nan = m != m
                out[j] = select(m > F(0.0), m, select(nan, m, F(0.0)))
                at = select(_is(c, m, nan), F(2.0), F(3.0))
                at = select(_is(b, m, nan), F(1.0), at)
                at = select(_is(a, m, nan), F(0.0), at)
                kr[j] = select((m > F(0.0)) | nan, at, F(4.0))


@njit(**_JIT)
def relu_max_pool_backward_at(g, k, gx):
    """``gx`` (shape of the input): ``g`` where ``k`` (``relu_max_pool_argmax``'s) points, zeros elsewhere."""
    zero = F(0.0)
    for r in range(g.shape[0]):
        for i in range(g.shape[1]):
            gr, kr, gtop, gbottom = g[r, i], k[r, i], gx[r, 2 * i], gx[r, 2 * i + 1]
            for j in range(gr.shape[0]):
                v, at = gr[j], kr[j]
                gtop[2 * j] = select(at == F(0.0), v, zero)
                gtop[2 * j + 1] = select(at == F(1.0), v, zero)
                gbottom[2 * j] = select(at == F(2.0), v, zero)
                gbottom[2 * j + 1] = select(at == F(3.0), v, zero)


@njit(**_JIT, inline="always")
def _is(v, out, nan):
    """Whether ``v`` is the window's maximum ``out`` (a NaN when ``out`` is)."""
    return (v == out) | (nan & (v != v))


@njit(**_JIT)
def relu_max_pool_backward(g, x, y, gx):
    """``gx`` (shape of ``x``): ``g`` at each window's first maximum where the output is positive or
    NaN (threshold_backward passes those), zeros elsewhere. Each row pair is zeroed (a loop that
    vectorises), then one store per window that passes its gradient: a branch-free form of the
    first-maximum search measured 1.3x slower here (its selects do not vectorise either)."""
    zero = F(0.0)
    for r in range(y.shape[0]):
        for i in range(y.shape[1]):
            top, bottom, out, gr = x[r, 2 * i], x[r, 2 * i + 1], y[r, i], g[r, i]
            gtop, gbottom = gx[r, 2 * i], gx[r, 2 * i + 1]
            for j in range(top.shape[0]):
                gtop[j] = zero
                gbottom[j] = zero
            for j in range(out.shape[0]):
                o = out[j]
                nan = o != o
                if o > zero or nan:
                    if _is(top[2 * j], o, nan):
                        gtop[2 * j] = gr[j]
                    elif _is(top[2 * j + 1], o, nan):
                        gtop[2 * j + 1] = gr[j]
                    elif _is(bottom[2 * j], o, nan):
                        gbottom[2 * j] = gr[j]
                    else:
                        gbottom[2 * j + 1] = gr[j]
