"""Train-mode batch norm over ``(N, C, L)`` float32 arrays as numba loops: the statistics and
the normalised, scaled and shifted output in one call, and the three gradients in one call.

numpy's forms run ~8 passes forward and ~12 backward over x-sized arrays (each with a
temporary); here each channel's mean and centred sum of squares are two reads of x and the
output one more, and the backward recomputes the statistics (two reads, cheaper than keeping
them through the graph) and reads g and x twice. Sums use ``reassoc`` (LLVM vectorises them;
numpy's pairwise sums are not sequential either), one float32 row of L at a time added into a
float64 total, so they agree with numpy's within float32 rounding; the elementwise arithmetic
keeps numpy's formula order.

``forward`` and ``backward`` cut the channels into one range per intra-op thread (``kernels.
parallel_ranges``, which runs them at once where that has measured faster): each channel's
statistics and outputs are computed by one thread alone, so any split gives the same floats.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import parallel_ranges

__all__ = ["forward", "backward"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc"})


@njit(**_JIT)
def _mean_var(x, ch):
    """Channel ``ch``'s mean (float32, as the output subtracts it) and biased variance (float64)."""
    n, _, length = x.shape
    s = 0.0
    for b in range(n):
        r = F(0.0)
        for k in range(length):
            r += x[b, ch, k]
        s += r
    mean = F(s / (n * length))
    q = 0.0
    for b in range(n):
        r = F(0.0)
        for k in range(length):
            d = x[b, ch, k] - mean
            r += d * d
        q += r
    return mean, q / (n * length)


def forward(x, w, b, eps: float, out, mean, var) -> None:
    """``out = (x - mean) * (rstd * w) + b`` per channel (dim 1), ``rstd = 1 / sqrt(var + eps)``;
    ``w``/``b`` are ones/zeros when the layer has none; ``mean``/``var`` (C,) receive the batch
    statistics (biased variance)."""
    parallel_ranges(_forward, x.shape[1], x.size, lambda first, lo, hi: (x, w, b, eps, out, mean, var, lo, hi))


@njit(**_JIT)
def _forward(x, w, b, eps, out, mean, var, c0, c1):
    """``forward`` for channels ``c0:c1``."""
    n, _, length = x.shape
    for ch in range(c0, c1):
        mu, v = _mean_var(x, ch)
        mean[ch] = mu
        var[ch] = v
        scale = F(1.0 / np.sqrt(F(v) + F(eps))) * w[ch]
        shift = b[ch]
        for i in range(n):
            for k in range(length):
                out[i, ch, k] = (x[i, ch, k] - mu) * scale + shift


def backward(g, x, w, eps: float, gx, gw, gb) -> None:
    """``gx = rstd w (g - mean(g) - xhat mean(g xhat))``, ``gw = sum(g xhat)``, ``gb = sum(g)``
    per channel (``w`` ones when the layer has none)."""
    parallel_ranges(_backward, x.shape[1], x.size, lambda first, lo, hi: (g, x, w, eps, gx, gw, gb, lo, hi))


@njit(**_JIT)
def _backward(g, x, w, eps, gx, gw, gb, c0, c1):
    """``backward`` for channels ``c0:c1``."""
    n, _, length = x.shape
    inv = 1.0 / (n * length)
    for ch in range(c0, c1):
        mu, v = _mean_var(x, ch)
        rstd = F(1.0 / np.sqrt(F(v) + F(eps)))
        sg = 0.0
        sgc = 0.0
        for i in range(n):
            r1 = F(0.0)
            r2 = F(0.0)
            for k in range(length):
                gv = g[i, ch, k]
                r1 += gv
                r2 += gv * (x[i, ch, k] - mu)
            sg += r1
            sgc += r2
        gb[ch] = sg
        gw[ch] = sgc * rstd
        a = F(sg * inv)
        q = F(sgc * inv) * rstd * rstd
        scale = rstd * w[ch]
        for i in range(n):
            for k in range(length):
                gx[i, ch, k] = (g[i, ch, k] - a - (x[i, ch, k] - mu) * q) * scale
