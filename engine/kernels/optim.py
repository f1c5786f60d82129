"""The Adam/AdamW update of one float32 parameter as one loop (numpy makes about ten passes and
six temporaries per parameter).

Bit for bit the arithmetic of ``optim/_foreach.adam``: the same float32 operations in the same
order, each scalar rounded to float32 as numpy rounds a Python float against a float32 array
(no ``fastmath``, so LLVM neither reassociates nor fuses a multiply-add: the fused ones are
written out in float64).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .vml_call import _indirect

__all__ = ["adam"]


_BLOCK = 1024   # numbers per block: the square roots of a block's second moments in one VML call


@njit(cache=True, error_model="numpy", nogil=True)
def adam(p, g, m, v, decay, coupled, lerp_small, coeff, beta2, one_minus_beta2, bc2, eps, neg_step, sqrt_at, mode):
    """One step on flat arrays, in place on ``p``, ``m``, ``v``: ``p *= decay`` (decoupled weight
    decay, skipped at 1), ``fma(p, coupled, g)`` (Adam's weight decay, skipped at 0), the lerp of ``m``
    towards ``g`` (PyTorch's fused multiply-add by ``coeff``: the weight, or the weight - 1 from
    ``g``), ``v = fma((1 - beta2) g, g, v beta2)`` (addcmul's) and ``p += (-step m) / (sqrt(v) / bc2 + eps)``
    (addcdiv's order). A fused multiply-add is float64 arithmetic rounded once to float32. The square
    roots are VML's (``sqrt_at``, its function's address, with ``mode``), as PyTorch's ``exp_avg_sq.sqrt()``
    on an MKL build, block by block; the correctly rounded ``sqrt`` when ``sqrt_at`` is 0."""
    f64, f32 = np.float64, np.float32
    n = p.shape[0]
    root = np.empty(min(n, _BLOCK), np.float32)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        for i in range(start, stop):
            pi = p[i]
            if decay != f32(1.0):
                pi = pi * decay
            gi = g[i]
            if coupled != f32(0.0):
                gi = f32(f64(pi) * f64(coupled) + f64(gi))
            mi = m[i]
            m[i] = f32(f64(coeff) * f64(gi - mi) + f64(mi if lerp_small else gi))
            v[i] = f32(f64(one_minus_beta2 * gi) * f64(gi) + f64(v[i] * beta2))
            p[i] = pi
        if sqrt_at != 0:
            _indirect(sqrt_at, stop - start, v.ctypes.data + 4 * start, root.ctypes.data, mode)
        else:
            for i in range(start, stop):
                root[i - start] = np.sqrt(v[i])
        for i in range(start, stop):
            p[i] = p[i] + (neg_step * m[i]) / (root[i - start] / bc2 + eps)
