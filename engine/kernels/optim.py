"""The Adam/AdamW update of one float32 parameter as one loop (numpy makes about ten passes and
six temporaries per parameter).

Bit for bit the arithmetic of ``optim/_foreach.adam``: the same float32 operations in the same
order, each scalar rounded to float32 as numpy rounds a Python float against a float32 array
(no ``fastmath``, so LLVM neither reassociates nor fuses a multiply-add).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["adam"]


@njit(cache=True, error_model="numpy", nogil=True)
def adam(p, g, m, v, decay, coupled, lerp_small, w, one_minus_w, beta2, one_minus_beta2, bc2, eps, neg_step):
    """One step on flat arrays, in place on ``p``, ``m``, ``v``: ``p *= decay`` (decoupled weight
    decay, skipped at 1), ``g + p coupled`` (Adam's weight decay, skipped at 0), the lerp of ``m``
    towards ``g`` by ``w`` (PyTorch's two-sided formula), ``v = v beta2 + (1 - beta2) g g``, and
    ``p += -step (m / (sqrt(v) / bc2 + eps))``."""
    for i in range(p.shape[0]):
        pi = p[i]
        if decay != np.float32(1.0):
            pi = pi * decay
        gi = g[i]
        if coupled != np.float32(0.0):
            gi = gi + pi * coupled
        mi = m[i]
        d = gi - mi
        mi = mi + w * d if lerp_small else gi - d * one_minus_w
        m[i] = mi
        vi = v[i] * beta2 + one_minus_beta2 * gi * gi
        v[i] = vi
        p[i] = pi + neg_step * (mi / (np.sqrt(vi) / bc2 + eps))
