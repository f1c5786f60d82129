"""The Adam/AdamW update of one float32 parameter as one loop (numpy makes about ten passes and
six temporaries per parameter), and SGD's momentum update as one (numpy makes three passes).

Bit for bit the arithmetic of ``optim/_foreach.adam``: the same float32 operations in the same
order, each scalar rounded to float32 as numpy rounds a Python float against a float32 array
(no ``fastmath``, so LLVM neither reassociates nor fuses a multiply-add: the fused ones are
written out in float64).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fastmath import fma

__all__ = ["adam", "adam_moments", "adam_apply", "sgd_momentum", "sgd_momentum_grad"]


@njit(cache=True, error_model="numpy", nogil=True, inline="always")
def _moments(i, p, g, m, v, decay, coupled, lerp_small, coeff, beta2, one_minus_beta2):
    """Element ``i``'s moments written into ``m`` and ``v``; returns the decayed parameter, ``m`` and ``v``."""
    f64, f32 = np.float64, np.float32
    pi = p[i]
    if decay != f32(1.0):
        pi = pi * decay
    gi = g[i]
    if coupled != f32(0.0):
        gi = f32(f64(pi) * f64(coupled) + f64(gi))
    mi = m[i]
    mi = f32(f64(coeff) * f64(gi - mi) + f64(mi if lerp_small else gi))
    m[i] = mi
    vi = f32(f64(one_minus_beta2 * gi) * f64(gi) + f64(v[i] * beta2))
    v[i] = vi
    return pi, mi, vi


@njit(cache=True, error_model="numpy", nogil=True)
def adam(p, g, m, v, decay, coupled, lerp_small, coeff, beta2, one_minus_beta2, bc2, eps, neg_step):
    """One step on flat arrays, in place on ``p``, ``m``, ``v``: ``p *= decay`` (decoupled weight
    decay, skipped at 1), ``fma(p, coupled, g)`` (Adam's weight decay, skipped at 0), the lerp of ``m``
    towards ``g`` (PyTorch's fused multiply-add by ``coeff``: the weight, or the weight - 1 from
    ``g``), ``v = fma((1 - beta2) g, g, v beta2)`` (addcmul's) and ``p += (-step m) / (sqrt(v) / bc2 + eps)``
    (addcdiv's order). A fused multiply-add is float64 arithmetic rounded once to float32."""
    for i in range(p.shape[0]):
        pi, mi, vi = _moments(i, p, g, m, v, decay, coupled, lerp_small, coeff, beta2, one_minus_beta2)
        p[i] = pi + (neg_step * mi) / (np.sqrt(vi) / bc2 + eps)


@njit(cache=True, error_model="numpy", nogil=True)
def adam_moments(p, g, m, v, decay, coupled, lerp_small, coeff, beta2, one_minus_beta2):
    """``adam``'s first part, for a square root taken outside the loop (VML's, as PyTorch's
    ``exp_avg_sq.sqrt()``): the decayed parameter into ``p``, the moments into ``m`` and ``v``."""
    for i in range(p.shape[0]):
        p[i] = _moments(i, p, g, m, v, decay, coupled, lerp_small, coeff, beta2, one_minus_beta2)[0]


@njit(cache=True, error_model="numpy", nogil=True)
def adam_apply(p, m, root, bc2, eps, neg_step):
    """``adam``'s last part: ``p += (-step m) / (root / bc2 + eps)`` with ``root`` the square roots of ``v``."""
    for i in range(p.shape[0]):
        p[i] = p[i] + (neg_step * m[i]) / (root[i] / bc2 + eps)


@njit(cache=True, error_model="numpy", nogil=True)
def sgd_momentum(p, g, buf, momentum, neg_lr):
    """SGD's momentum update on flat float32 arrays, in place on ``buf`` and ``p``: ``buf = buf * momentum
    + g`` (two roundings: ``buf.mul_(momentum).add_(g)``) and ``p = fma(buf, neg_lr, p)`` (ATen's
    ``p.add_(buf, alpha=-lr)``, as ``pointwise.scaled_add``): one pass where those ops make three."""
    for i in range(p.shape[0]):
        b = buf[i] * momentum + g[i]
        buf[i] = b
        p[i] = fma(b, neg_lr, p[i])


@njit(cache=True, error_model="numpy", nogil=True)
def sgd_momentum_grad(p, x, g, buf, accumulate, filled, momentum, neg_lr):
    """``sgd_momentum`` on a gradient ``g`` it writes in the same pass, from the backward's ``x``: ``g = x``
    (copied into ``.grad``'s buffer) or, with ``accumulate``, ``g = filled + x`` (a ``.grad`` that
    ``zero_grad(set_to_none=False)`` filled, then ``add(filled, x)``: one rounding), as a captured
    step's replay runs it."""
    for i in range(p.shape[0]):
        gi = filled + x[i] if accumulate else x[i]
        g[i] = gi
        b = buf[i] * momentum + gi
        buf[i] = b
        p[i] = fma(b, neg_lr, p[i])
