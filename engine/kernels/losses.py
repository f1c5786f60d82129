"""Elementwise float32 loops of the regression losses, huber and smooth L1, forward and backward, in ATen's cpu
kernels' order (``BinaryOpsKernel.cpp``'s ``huber_kernel``/``smooth_l1_kernel``, ``PointwiseOpsKernel.cpp``'s
backwards), for ``pointwise.aten_map``: each row's vector body with the vector lambda, its tail with the scalar one.

The two backward lambdas differ: the vector one blends ``x``, ``+-delta`` (smooth L1: ``x / beta``, ``+-1``) in
float32 and multiplies ``norm * that * g``; the scalar one compares and scales with the double ``delta``/``beta``
(``-norm * g * delta`` rounded once from double). The forwards are one formula in both. A reduced loss's
``g`` is one number for every element (``*_backward_scalar``); ``reduction='none'`` gives an array.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["huber", "smooth_l1", "huber_backward", "huber_backward_scalar", "smooth_l1_backward",
           "smooth_l1_backward_scalar"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT)
def huber(x, t, out, delta, block, run):
    """``0.5 z z`` below ``delta``, else ``delta (z - 0.5 delta)``, ``z = |x - t|``."""
    for i in range(x.shape[0]):
        z = abs(x[i] - t[i])
        out[i] = F(0.5) * z * z if z < delta else delta * (z - F(0.5) * delta)


@njit(**_JIT)
def smooth_l1(x, t, out, beta, block, run):
    """``0.5 z z / beta`` below ``beta``, else ``z - 0.5 beta``."""
    for i in range(x.shape[0]):
        z = abs(x[i] - t[i])
        out[i] = F(0.5) * z * z / beta if z < beta else z - F(0.5) * beta


@njit(**_JIT, inline="always")
def _huber_grad(d, g, norm, delta, delta64, exact):
    if exact:
        sign = F(1.0) if d > F(0.0) else F(-1.0)
        return norm * (sign * delta if abs(d) >= delta else d) * g
    if d <= -delta64:
        return F(-norm * g * delta64)
    if d >= delta64:
        return F(norm * g * delta64)
    return norm * d * g


@njit(**_JIT, inline="always")
def _smooth_l1_grad(d, g, norm, beta, beta64, exact):
    if exact:
        sign = F(1.0) if d > F(0.0) else F(-1.0)
        return norm * (sign if abs(d) >= beta else d / beta) * g
    if d <= -beta64:
        return -norm * g
    if d >= beta64:
        return norm * g
    return F(norm * d * g / beta64)


@njit(**_JIT, inline="always")
def _part(grad, x, t, g, out, norm, p, p64, exact):
    for i in range(x.shape[0]):
        out[i] = grad(x[i] - t[i], g[i], norm, p, p64, exact)


@njit(**_JIT, inline="always")
def _part_scalar(grad, x, t, g, out, norm, p, p64, exact):
    for i in range(x.shape[0]):
        out[i] = grad(x[i] - t[i], g, norm, p, p64, exact)


@njit(**_JIT, inline="always")
def _rows(grad, x, t, g, out, norm, p, p64, block, run):
    """``out = grad(x - t, g, ...)`` over rows of ``run`` (``g`` an array like ``x``): vector body, scalar tail
    (each a loop over slices of its own: a loop from a variable start does not vectorise)."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _part(grad, x[start:m], t[start:m], g[start:m], out[start:m], norm, p, p64, True)
        _part(grad, x[m:end], t[m:end], g[m:end], out[m:end], norm, p, p64, False)


@njit(**_JIT, inline="always")
def _rows_scalar(grad, x, t, g, out, norm, p, p64, block, run):
    """``_rows`` with one ``g`` for every element (a mean's or sum's backward)."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _part_scalar(grad, x[start:m], t[start:m], g, out[start:m], norm, p, p64, True)
        _part_scalar(grad, x[m:end], t[m:end], g, out[m:end], norm, p, p64, False)


@njit(**_JIT)
def huber_backward(x, t, g, out, norm, delta, delta64, block, run):
    _rows(_huber_grad, x, t, g, out, norm, delta, delta64, block, run)


@njit(**_JIT)
def huber_backward_scalar(x, t, out, g, norm, delta, delta64, block, run):
    _rows_scalar(_huber_grad, x, t, g, out, norm, delta, delta64, block, run)


@njit(**_JIT)
def smooth_l1_backward(x, t, g, out, norm, beta, beta64, block, run):
    _rows(_smooth_l1_grad, x, t, g, out, norm, beta, beta64, block, run)


@njit(**_JIT)
def smooth_l1_backward_scalar(x, t, out, g, norm, beta, beta64, block, run):
    _rows_scalar(_smooth_l1_grad, x, t, g, out, norm, beta, beta64, block, run)
