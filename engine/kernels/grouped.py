"""A grouped convolution's (``1 < groups < channels``: RegNet's and ResNeXt's 3x3s) stride-1 forward and weight
gradient as the per-tap GEMMs of ``kernels/winograd.py`` (``_taps``: register-blocked vectors of the group's
output channels), without im2col (``nn/_grouped.py``; the input gradient is the forward of the output gradient
with each group's kernel flipped and transposed).

Each group's padded input is channels last in a flat grid as wide as the padded input (``(G, N*Hp*Wp + reach,
C/G)``), so the input under every output of tap ``(ki, kj)`` is the grid's row at offset ``ki*dh*Wp + kj``, and a
kernel row's ``kw`` taps side by side are one window of overlapping grid rows ``(rows, kw*C/G)``: the forward is
``kh`` products a group, each added into the output rows (the grid's columns past the output's width and rows
past its height are computed and dropped). im2col with per-image, per-group GEMMs of 8 output channels had cost
4-14x torch (RegNetX's group width 8). Each output sums its taps in order, each tap's channels ascending, one
fused multiply-add each, however the rows are cut over threads; each weight-gradient tap of each group sums its
rows ascending, alone.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .winograd import _taps

__all__ = ["forward", "weight_grad"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)
_CHUNK = 128   # output rows a product takes at a time (they stay in L1 across the kernel rows)


@njit(**_JIT)
def forward(v, u, out, lo, hi):
    """Rows ``lo:hi`` of ``out (G, T, O/G)``: per group ``g`` and kernel row ``r``, ``out[g, t] += v[g, r, t] @
    u[g, r]`` for the windows ``v (G, kh, T, kw * C/G)`` (a kernel row's taps side by side: overlapping rows of
    the flat grid) and ``u (G, kh, kw * C/G, O/G)``, the first kernel row written, not added."""
    for g in range(v.shape[0]):
        for b in range(lo, hi, _CHUNK):
            e = min(hi, b + _CHUNK)
            for r in range(v.shape[1]):
                _taps(np.expand_dims(v[g, r, b:e], 0), u[g, r:r + 1], np.expand_dims(out[g, b:e], 0), 0, 1, r > 0)


@njit(**_JIT)
def weight_grad(x, gy, offsets, out, lo, hi):
    """Pairs ``lo:hi`` (group ``p // taps``, tap ``p % taps``) of ``out (G, taps, O/G, C/G) = gy[g].T @ x[g,
    offsets[i]:offsets[i] + T]`` for ``gy (G, T, O/G)`` (zero where no output is) and ``x`` as ``forward``'s."""
    taps, span = offsets.size, gy.shape[1]
    for p in range(lo, hi):
        g, i = p // taps, p % taps
        at = offsets[i]
        _taps(np.expand_dims(gy[g].T, 0), np.expand_dims(x[g, at:at + span], 0), out[g, i:i + 1], 0, 1, False)
