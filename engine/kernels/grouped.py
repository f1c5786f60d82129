"""A grouped convolution's (``1 < groups < channels``: RegNet's, ResNeXt's and ShuffleNet's) forward and weight
gradient as the per-tap GEMMs of ``kernels/winograd.py`` (``_taps``: register-blocked vectors of the group's
output channels), without im2col (``nn/_grouped.py``; the input gradient is the forward of the output gradient
with each group's kernel flipped and transposed, phase by phase at strides over 1).

Each group's padded input is channels last in a flat grid, its rows dealt into ``stride`` phases (row ``i`` of
phase ``b`` is padded row ``stride * i + b``), so the input under every output of tap ``(ki, kj)`` is a run of
the grid at a fixed offset, one output column ``stride * C/G`` elements after the last, and a kernel row's
``kw`` taps side by side are one window of overlapping grid rows ``(rows, kw*C/G)``: the forward is ``kh``
products a group and image, each added into the output rows (the grid's columns past the output's width are
computed and dropped). im2col with per-image, per-group GEMMs of 8 output channels had cost 4-14x torch
(RegNetX's group width 8). Each output sums its taps in order, each tap's channels ascending, one fused
multiply-add each, however the rows are cut over threads; each weight-gradient tap of each group sums its
rows ascending, image by image, alone.
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
    """Rows ``lo:hi`` of ``out (G, N, T, O/G)`` (its images' rows one run): per group ``g`` and kernel row
    ``r``, ``out[g, n, t] += v[g, r % s, r // s, n, t] @ u[g, r]`` for the windows ``v (G, s, ceil(kh / s), N, T,
    kw * C/G)`` (a kernel row's taps side by side: overlapping rows of the flat grid; ``s`` row phases) and
    ``u (G, kh, kw * C/G, O/G)``, the first kernel row written, not added."""
    s, span = v.shape[1], out.shape[2]
    for g in range(v.shape[0]):
        for n in range(lo // span, (hi + span - 1) // span):
            first, last = max(lo - n * span, 0), min(hi - n * span, span)
            for b in range(first, last, _CHUNK):
                e = min(last, b + _CHUNK)
                for r in range(u.shape[1]):
                    _taps(np.expand_dims(v[g, r % s, r // s, n, b:e], 0), u[g, r:r + 1],
                          np.expand_dims(out[g, n, b:e], 0), 0, 1, r > 0)


@njit(**_JIT)
def weight_grad(v, gy, out, lo, hi):
    """Pairs ``lo:hi`` (group ``p // taps``, tap ``p % taps``, taps row-major) of ``out (G, taps, C/G, O/G) =
    sum_n v[g, ki % s, ki // s, kj, n].T @ gy[g, n]``, images in order, for the tap windows ``v (G, s, ceil(kh /
    s), kw, N, T, C/G)`` (as ``forward``'s, one tap each) and ``gy (G, N, T, O/G)`` (zero where no output is)."""
    s, kw = v.shape[1], v.shape[3]
    taps = out.shape[1]
    for p in range(lo, hi):
        g, i = p // taps, p % taps
        ki, kj = i // kw, i % kw
        for n in range(gy.shape[1]):
            _taps(np.expand_dims(v[g, ki % s, ki // s, kj, n].T, 0), gy[g, n:n + 1], out[g, i:i + 1], 0, 1, n > 0)
