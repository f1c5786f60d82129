"""Row-wise loops over ``(rows, cols)`` float32 arrays: softmax and log_softmax forward and
backward, the scaled (optionally causal) attention softmax in place, and layer_norm forward and
backward.

Each row is read once or twice while it sits in cache and written once; numpy's formulas make a
full-size temporary per step. Sums use ``reassoc`` (so LLVM vectorises them, as numpy's pairwise
sums are not sequential either); the elementwise arithmetic keeps IEEE order, and exp comes from
``fastmath.exp32`` (<= 2 ulp), so results agree with numpy's formulas within float32 rounding.
NaN and inf behave as there: a row's max is nan if any entry is, and ``inf - inf`` is nan.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .fastmath import exp32, maximum

__all__ = ["softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "attention_softmax",
           "layer_norm", "layer_norm_backward"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc"})


@njit(**_JIT)
def _row_max(x, r, C):
    """The max of row ``r``'s first ``C`` entries (nan if any is), in eight independent lanes: a
    single running max is one dependency chain LLVM cannot vectorise (it was 3/4 of log_softmax's
    time on 700 x 256)."""
    m = x[r, 0]
    c = 1
    if C >= 16:
        m0, m1, m2, m3, m4, m5, m6, m7 = x[r, 0], x[r, 1], x[r, 2], x[r, 3], x[r, 4], x[r, 5], x[r, 6], x[r, 7]
        c = 8
        while c + 8 <= C:
            m0 = maximum(x[r, c], m0)
            m1 = maximum(x[r, c + 1], m1)
            m2 = maximum(x[r, c + 2], m2)
            m3 = maximum(x[r, c + 3], m3)
            m4 = maximum(x[r, c + 4], m4)
            m5 = maximum(x[r, c + 5], m5)
            m6 = maximum(x[r, c + 6], m6)
            m7 = maximum(x[r, c + 7], m7)
            c += 8
        m = maximum(maximum(maximum(m0, m1), maximum(m2, m3)), maximum(maximum(m4, m5), maximum(m6, m7)))
    for k in range(c, C):
        m = maximum(x[r, k], m)
    return m


@njit(**_JIT)
def _row_mean_rstd(x, r, inv_c, eps):
    """Row ``r``'s mean and ``1/sqrt(var + eps)`` (two passes: the centred sum of squares)."""
    s = F(0.0)
    for c in range(x.shape[1]):
        s += x[r, c]
    mean = s * inv_c
    q = F(0.0)
    for c in range(x.shape[1]):
        d = x[r, c] - mean
        q += d * d
    return mean, F(1.0) / np.sqrt(q * inv_c + eps)


@njit(**_JIT)
def softmax(x, out):
    """``out[r] = exp(x[r] - max) / sum``."""
    R, C = x.shape
    for r in range(R):
        m = _row_max(x, r, C)
        s = F(0.0)
        for c in range(C):
            e = exp32(x[r, c] - m)
            out[r, c] = e
            s += e
        for c in range(C):
            out[r, c] = out[r, c] / s


@njit(**_JIT)
def softmax_backward(g, y, out):
    """``out[r] = y[r] (g[r] - sum(g[r] y[r]))``; ``out`` may be ``g``."""
    R, C = g.shape
    for r in range(R):
        s = F(0.0)
        for c in range(C):
            s += g[r, c] * y[r, c]
        for c in range(C):
            out[r, c] = y[r, c] * (g[r, c] - s)


@njit(**_JIT)
def log_softmax(x, out):
    """``out[r] = (x[r] - max) - log(sum(exp(x[r] - max)))``."""
    R, C = x.shape
    for r in range(R):
        m = _row_max(x, r, C)
        s = F(0.0)
        for c in range(C):
            s += exp32(x[r, c] - m)
        ls = F(math.log(s))
        for c in range(C):
            out[r, c] = (x[r, c] - m) - ls


@njit(**_JIT)
def log_softmax_backward(g, y, out):
    """``out[r] = g[r] - exp(y[r]) sum(g[r])``."""
    R, C = g.shape
    for r in range(R):
        s = F(0.0)
        for c in range(C):
            s += g[r, c]
        for c in range(C):
            out[r, c] = g[r, c] - exp32(y[r, c]) * s


@njit(**_JIT)
def attention_softmax(s, L, scale, causal):
    """The attention weights from the scores ``s`` (rows of ``L`` queries stacked), in place:
    ``softmax(s scale)``, and with ``causal`` query ``i`` (row ``r % L``) sees keys ``j <= i``
    only (the others get 0) -- no mask array, no -inf fill, no pass over the masked half."""
    R, S = s.shape
    for r in range(R):
        n = min(r % L + 1, S) if causal else S
        for j in range(n):
            s[r, j] = s[r, j] * scale
        m = _row_max(s, r, n)
        z = F(0.0)
        for j in range(n):
            e = exp32(s[r, j] - m)
            s[r, j] = e
            z += e
        for j in range(n):
            s[r, j] = s[r, j] / z
        for j in range(n, S):
            s[r, j] = F(0.0)


@njit(**_JIT)
def layer_norm(x, out, w, b, eps):
    """``out[r] = (x[r] - mean) / sqrt(var + eps) * w + b`` (``w``/``b`` empty: not applied)."""
    R, C = x.shape
    inv_c = F(1.0) / F(C)
    has_w, has_b = w.shape[0] > 0, b.shape[0] > 0
    for r in range(R):
        mean, rstd = _row_mean_rstd(x, r, inv_c, eps)
        for c in range(C):
            out[r, c] = (x[r, c] - mean) * rstd
        if has_w:
            for c in range(C):
                out[r, c] = out[r, c] * w[c]
        if has_b:
            for c in range(C):
                out[r, c] = out[r, c] + b[c]


@njit(**_JIT)
def layer_norm_backward(g, x, w, eps, gx, gw, gb):
    """layer_norm's three gradients in one pass per row: ``gx[r] = rstd (gy - mean(gy) - xhat
    mean(gy xhat))`` with ``gy = g w``, and ``gw += g xhat``, ``gb += g`` summed over rows into
    the caller's zeroed ``(C,)`` arrays (``w`` is ones when there is no weight: no branch in the
    inner loops, so they vectorise)."""
    R, C = x.shape
    inv_c = F(1.0) / F(C)
    for r in range(R):
        mean, rstd = _row_mean_rstd(x, r, inv_c, eps)
        a = F(0.0)
        b = F(0.0)
        for c in range(C):
            xh = (x[r, c] - mean) * rstd
            gy = g[r, c] * w[c]
            a += gy
            b += gy * xh
            gw[c] += g[r, c] * xh
            gb[c] += g[r, c]
        a *= inv_c
        b *= inv_c
        for c in range(C):
            gx[r, c] = rstd * (g[r, c] * w[c] - a - (x[r, c] - mean) * rstd * b)
