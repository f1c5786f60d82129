"""Elementwise loops over flat float32 arrays: gelu (erf and tanh forms) and relu, forward and
backward, tanh's backward, and the fused multiply-adds of ``add(..., alpha=)``, ``lerp`` and
``addcmul`` (one rounding each, as ATen's float32 kernels).

numpy's gelu makes six full-size temporaries and its erf is scipy's scalar loop; here one pass
computes each element with ``fastmath``'s vectorisable erf/tanh/exp, in the same order of
operations as the numpy formulas in ``nn/_fused.py``. The backward reads the input alone and
recomputes the CDF (erf, or the tanh form's tanh), as PyTorch's gelu saves only its input: an
in-place change to the output before backward is legal.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .fastmath import erf32, exp32, fma, select, tanh32

__all__ = ["gelu", "gelu_backward", "relu", "relu_backward", "tanh_backward", "scaled_add", "lerp", "addcmul"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True)
_SQRT_HALF = F(1.0 / math.sqrt(2.0))
_INV_SQRT_2PI = F(1.0 / math.sqrt(2.0 * math.pi))
_K = F(math.sqrt(2.0 / math.pi))
_C = F(0.044715)
_K3C = F(3 * 0.044715)


@njit(**_JIT)
def gelu(x, out, tanh):
    """``x/2 (1 + erf(x/sqrt 2))``, or with ``tanh`` ``x/2 (1 + tanh(k (x + c x^3)))``."""
    if tanh:
        for i in range(x.shape[0]):
            v = x[i]
            out[i] = v * F(0.5) * (tanh32((v + v * v * v * _C) * _K) + F(1.0))
    else:
        for i in range(x.shape[0]):
            v = x[i]
            out[i] = v * F(0.5) * (erf32(v * _SQRT_HALF) + F(1.0))


@njit(**_JIT)
def gelu_backward(g, x, out, tanh):
    """``g gelu'(x)``: ``Phi(x) + x phi(x)``, or for tanh ``(1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2)``."""
    if tanh:
        for i in range(x.shape[0]):
            v = x[i]
            t = tanh32((v + v * v * v * _C) * _K)
            du = _K * (F(1.0) + v * v * _K3C)
            out[i] = g[i] * (F(0.5) * (t + F(1.0)) + F(0.5) * v * (F(1.0) - t * t) * du)
    else:
        for i in range(x.shape[0]):
            v = x[i]
            cdf = F(0.5) * (erf32(v * _SQRT_HALF) + F(1.0))
            out[i] = g[i] * (cdf + v * exp32(F(-0.5) * v * v) * _INV_SQRT_2PI)


@njit(**_JIT)
def relu(x, out):
    """``max(x, 0)`` with NaN kept (numpy's ``maximum`` is its NaN-aware scalar loop here: ~7x a
    subtraction on the project machine; this select vectorises)."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = select(v > F(0.0), v, select(v != v, v, F(0.0)))


@njit(**_JIT)
def tanh_backward(g, y, out):
    """``g * (1 - y*y)`` with ``1 - y*y`` rounded once, as PyTorch's CPU kernel gets it from a fused
    multiply-add: near |y| = 1 the two roundings of numpy's form differ by tens of ulps. ``y*y`` of a
    float32 is exact in float64, so ``1 - y*y`` there is the fused result (LSTM and tanh-MLP gradients
    then equal PyTorch's bit for bit)."""
    for i in range(y.shape[0]):
        v = np.float64(y[i])
        out[i] = g[i] * F(1.0 - v * v)


@njit(**_JIT)
def relu_backward(g, y, out):
    """0 where the forward's output is <= 0, else ``g`` (PyTorch's threshold_backward: a NaN output
    passes its gradient)."""
    for i in range(y.shape[0]):
        out[i] = select(y[i] <= F(0.0), F(0.0), g[i])


# An update in place (``p.add_(g, alpha=-lr)``: ``out`` is ``z``) runs a loop over the arrays it reads
# and writes once: LLVM vectorises a loop only after a runtime check that ``out`` overlaps no input, and
# ``out`` that is an input fails the check and takes the scalar loop (mlp_b64's SGD step, 670k float32
# parameters: 0.31 ms, against 0.08 ms for the same fma in the vector loop; bit for bit the same).
@njit(**_JIT)
def _scaled_add_into(x, z, alpha):
    for i in range(x.shape[0]):
        z[i] = fma(x[i], alpha, z[i])


@njit(**_JIT)
def scaled_add(x, z, out, alpha):
    """``out = x * alpha + z`` rounded once: ATen's ``add(z, x, alpha=alpha)`` on float32 (an optimizer's
    ``p.add_(g, alpha=-lr)``), one pass where numpy needs float64 temporaries for the one rounding."""
    if out.ctypes.data == z.ctypes.data:
        _scaled_add_into(x, z, alpha)
        return
    for i in range(x.shape[0]):
        out[i] = fma(x[i], alpha, z[i])


@njit(**_JIT)
def _lerp_into(start, end, coeff, from_end):
    if from_end:
        for i in range(start.shape[0]):
            start[i] = fma(coeff, end[i] - start[i], end[i])
    else:
        for i in range(start.shape[0]):
            start[i] = fma(coeff, end[i] - start[i], start[i])


@njit(**_JIT)
def lerp(start, end, out, coeff, from_end):
    """``fma(coeff, end - start, end if from_end else start)``: ATen's lerp with a number weight
    (``coeff`` the weight, or ``weight - 1`` from the end when ``|weight| >= 0.5``)."""
    if out.ctypes.data == start.ctypes.data:       # ``start.lerp_(end, w)``: the vector loop (above)
        _lerp_into(start, end, coeff, from_end)
        return
    if from_end:
        for i in range(start.shape[0]):
            out[i] = fma(coeff, end[i] - start[i], end[i])
    else:
        for i in range(start.shape[0]):
            out[i] = fma(coeff, end[i] - start[i], start[i])


@njit(**_JIT)
def _addcmul_into(a, t1, t2, value):
    if value == F(1.0):
        for i in range(a.shape[0]):
            a[i] = fma(t1[i], t2[i], a[i])
    else:
        for i in range(a.shape[0]):
            a[i] = fma(value * t1[i], t2[i], a[i])


@njit(**_JIT)
def addcmul(a, t1, t2, out, value):
    """``fma(value * t1, t2, a)`` (the product by ``value`` rounded first, as ATen's kernel)."""
    if out.ctypes.data == a.ctypes.data:           # ``a.addcmul_(t1, t2)``: the vector loop (above)
        _addcmul_into(a, t1, t2, value)
        return
    if value == F(1.0):
        for i in range(a.shape[0]):
            out[i] = fma(t1[i], t2[i], a[i])
    else:
        for i in range(a.shape[0]):
            out[i] = fma(value * t1[i], t2[i], a[i])