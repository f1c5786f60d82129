"""Row-wise loops over ``(rows, cols)`` float32 arrays: softmax and log_softmax forward and
backward, the scaled (optionally causal) attention softmax in place, layer_norm forward and
backward, class-index cross-entropy from logits forward and backward, and class-index NLL (a
gather and its scatter, one pass each, after ``target_weights`` has checked the targets).

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

from .fastmath import _bits_to_f32, exp32, log32

__all__ = ["softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "attention_softmax",
           "layer_norm", "layer_norm_backward", "target_weights", "cross_entropy", "cross_entropy_backward", "nll_loss", "nll_loss_backward"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc"})


@njit(**_JIT)
def _row_max(bits, r, C):
    """The max of row ``r``'s first ``C`` entries, from ``bits``, the rows' float32 bits as int32
    (``x.view(np.int32)``, taken once per call: a view per row cost 18 of 61 us of log_softmax on
    2000 x 8). Compared as integers: a float's bits XOR its sign-spread low 31 bits order like the
    float (-0 just below +0, a nan with the sign bit clear above inf), and an integer max reduction
    vectorises where a float one with nan semantics does not (12 against 69 us on 700 x 256). A
    nan with the sign bit set is below every key: the callers' sum of ``exp(x - max)`` over the
    row is nan then, as for any nan."""
    top = np.int32(-2147483648)
    for c in range(C):
        k = bits[r, c]
        top = max(top, k ^ ((k >> 31) & np.int32(0x7FFFFFFF)))
    return _bits_to_f32(top ^ ((top >> 31) & np.int32(0x7FFFFFFF)))


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


@njit(**_JIT, inline="always")
def _exp_row(x, out, r, C, m):
    """``out[r] = exp(x[r] - m)``; returns the row's sum (inlined: a call per row costs more than a
    short row, see bench/README.md's convolution notes)."""
    s = F(0.0)
    for c in range(C):
        e = exp32(x[r, c] - m)
        out[r, c] = e
        s += e
    return s


@njit(**_JIT)
def softmax(x, out):
    """``out[r] = exp(x[r] - max) / sum``."""
    R, C = x.shape
    bits = x.view(np.int32)
    for r in range(R):
        m = _row_max(bits, r, C)
        s = _exp_row(x, out, r, C, m)
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
    bits = x.view(np.int32)
    for r in range(R):
        m = _row_max(bits, r, C)
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
    bits = s.view(np.int32)
    for r in range(R):
        n = min(r % L + 1, S) if causal else S
        for j in range(n):
            s[r, j] = s[r, j] * scale
        m = _row_max(bits, r, n)
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


# ---------------------------------------------------------------- cross-entropy from logits
# Row r's coefficients are a[c] = wt[r] (1 - ls) [c == t[r]] + ls/C w[c] (ls: label smoothing, w the
# class weights, ones when none; an ignored row has none); the loss is -sum_c a[c] logp[c] and its
# gradient (softmax A - a) g (A = sum_c a[c]). Neither loop makes a (rows, C) temporary: the forward
# reads a row once for its max and once for sum(exp), the backward writes the gradient in one pass.
@njit(**_JIT)
def target_weights(t, w, ignore, wt):
    """``wt[r] = w[t[r]]``, 0 where ``t[r] == ignore``; False (stop) at a target outside ``[0, C)``."""
    C = w.shape[0]
    for r in range(t.shape[0]):
        ti = t[r]
        if ti == ignore:
            wt[r] = F(0.0)
        elif 0 <= ti < C:
            wt[r] = w[ti]
        else:
            return False
    return True


@njit(**_JIT)
def cross_entropy(x, t, wt, loss, w, ignore, smooth, w_sum):
    """``loss[r] = -sum_c a[c] logp[c]`` with ``logp = (x - max) - log(sum(exp(x - max)))``, from
    the target term and ``sum_c w[c] (x[c] - max)`` (as PyTorch's, a class of weight 0 at -inf
    makes the smoothed loss nan); 0 for an ignored row. The rows' logs are taken after all sums,
    in one loop over rows that vectorises (a libm log per row was a third of the time at C = 8)."""
    R, C = x.shape
    bits = x.view(np.int32)
    picked = np.zeros(R, np.float32)    # x[t] - max, then the loss
    sw = np.zeros(R, np.float32)        # sum_c w[c] (x[c] - max), with label smoothing
    for r in range(R):
        ti = t[r]
        loss[r] = F(1.0)                # sum(exp(x - max)); log 1 = 0 keeps an ignored row's loss 0
        if ti == ignore:
            continue
        m = _row_max(bits, r, C)
        s = F(0.0)
        if smooth == F(0.0):
            for c in range(C):
                s += exp32(x[r, c] - m)
        else:
            q = F(0.0)
            for c in range(C):
                d = x[r, c] - m
                s += exp32(d)
                q += w[c] * d
            sw[r] = q
        loss[r] = s
        picked[r] = x[r, ti] - m
    keep = F(1.0) - smooth
    ls_c = smooth / F(C)
    for r in range(R):
        lg = log32(loss[r])
        loss[r] = -((wt[r] * keep) * (picked[r] - lg)) - ls_c * (sw[r] - lg * w_sum) + F(0.0)   # + 0: not -0.0


@njit(**_JIT)
def cross_entropy_backward(x, t, wt, gs, out, w, ignore, smooth, w_sum):
    """``out[r] = (softmax(x[r]) A - a) gs[r]``, 0 for an ignored row."""
    R, C = x.shape
    bits = x.view(np.int32)
    ls_c = smooth / F(C)
    for r in range(R):
        ti = t[r]
        if ti == ignore:
            for c in range(C):
                out[r, c] = F(0.0)
            continue
        m = _row_max(bits, r, C)
        s = _exp_row(x, out, r, C, m)
        a_t = wt[r] * (F(1.0) - smooth)
        g = gs[r]
        k = (a_t + ls_c * w_sum) * g / s
        b = ls_c * g
        for c in range(C):
            out[r, c] = out[r, c] * k - b * w[c]
        out[r, ti] = exp32(x[r, ti] - m) * k - (a_t + ls_c * w[ti]) * g


@njit(**_JIT)
def nll_loss(lp, t, wt, loss):
    """``loss[r] = -lp[r, t[r]] wt[r]``, 0 where ``wt[r]`` is (an ignored row, or a class of weight
    0: its -inf adds nothing), never -0.0; ``t`` checked by ``target_weights``."""
    for r in range(t.shape[0]):
        w = wt[r]
        loss[r] = -(lp[r, t[r]] * w) + F(0.0) if w != F(0.0) else F(0.0)


@njit(**_JIT)
def nll_loss_backward(t, wt, gs, out, ignore):
    """``out`` (zeros) gets ``-(wt[r] gs[r])`` at each kept row's target."""
    for r in range(t.shape[0]):
        ti = t[r]
        if ti != ignore:
            out[r, ti] = -(wt[r] * gs[r])
