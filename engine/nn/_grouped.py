"""Grouped convolutions (``1 < groups < channels``, not depthwise) at stride 1 as per-tap GEMMs over a flat
channels-last grid (``kernels/grouped.py``): the forward, the input gradient (the forward of the output
gradient with each group's kernel flipped and transposed) and the weight gradient. im2col's per-image,
per-group GEMMs of a few output channels cost 4-14x torch on RegNetX's 3x3s (group width 8).
"""
from __future__ import annotations

import numpy as np

from .. import kernels

__all__ = ["fits", "forward", "input_grad", "weight_grad"]

_LANES = (4, 8, 16, 32, 48, 64)   # the vector widths of the per-tap GEMMs (``kernels/winograd.py`` ``_taps``)


def fits(xp, a, w, stride, pads, dilation, groups, lanes: int) -> bool:
    """Whether a pass of input ``a`` (the output gradient for the input gradient) and weight ``w`` runs here:
    float32 numpy with the loops, 2-D, grouped but not depthwise, stride 1, padding not negative, and the
    product's vector dimension ``lanes`` (a group's output channels; its input channels for the weight
    gradient) one of ``_LANES``, undilated along the width (a kernel row's taps are then one run of the grid)."""
    return (a.ndim == 4 and 1 < groups < a.shape[1] and tuple(stride) == (1, 1) and lanes in _LANES and dilation[1] == 1
            and min(p for pair in pads for p in pair) >= 0 and kernels.use(xp, w)
            and type(a) is np.ndarray and a.dtype == w.dtype)


def _grid(a, groups, pads, reach):
    """``a (N, C, H, W)`` zero-padded, channels last per group, flat: ``(G, N*Hp*Wp + tail, C/G)``, the tail
    rows (zero) as many as the farthest tap's offset. Returns it and the padded size."""
    n, c, h, w = a.shape
    (pt, pb), (pl, pr) = pads
    hp, wp = h + pt + pb, w + pl + pr
    grid = np.zeros((groups, n * hp * wp + reach[0] * wp + reach[1], c // groups), a.dtype)
    grid[:, :n * hp * wp].reshape(groups, n, hp, wp, -1)[:, :, pt:pt + h, pl:pl + w] = \
        a.reshape(n, groups, c // groups, h, w).transpose(1, 0, 3, 4, 2)
    return grid, (hp, wp)


def _offsets(kernel, dilation, width):
    """Each tap's row offset in a flat grid ``width`` wide, taps row-major."""
    return np.array([ki * dilation[0] * width + kj * dilation[1] for ki in range(kernel[0]) for kj in range(kernel[1])],
                    np.int64)


def _reach(kernel, dilation):
    return tuple(d * (k - 1) for k, d in zip(kernel, dilation))


def _convolve(a, u, kernel, pads, dilation, groups):
    """``a (N, G * C/G, H, W)`` convolved with the per-tap weights ``u (G, kh, kw * C/G, O/G)``."""
    reach = _reach(kernel, dilation)
    grid, (hp, wp) = _grid(a, groups, pads, reach)
    n, og = a.shape[0], u.shape[3]
    out = np.empty((groups, n * hp * wp, og), a.dtype)
    cg, item = grid.shape[2], grid.itemsize
    windows = np.lib.stride_tricks.as_strided(grid, (groups, kernel[0], out.shape[1], kernel[1] * cg),
                                              (grid.strides[0], dilation[0] * wp * cg * item, cg * item, item))
    kernels.parallel_ranges(kernels.loops("grouped").forward, out.shape[1], out.size * u.shape[1] * u.shape[2],
                            lambda first, lo, hi: (windows, u, out, lo, hi), shared=True)
    oh, ow = hp - reach[0], wp - reach[1]
    y = out.reshape(groups, n, hp, wp, og)[:, :, :oh, :ow].transpose(1, 0, 4, 2, 3)
    return np.ascontiguousarray(y).reshape(n, groups * og, oh, ow)


def forward(x, w, pads, dilation, groups):
    """The convolution of ``x`` with ``w (O, C/G, kh, kw)`` (no bias)."""
    g, (o, cg), kernel = groups, w.shape[:2], w.shape[2:]
    u = w.reshape(g, o // g, cg, kernel[0], -1).transpose(0, 3, 4, 2, 1)
    return _convolve(x, np.ascontiguousarray(u).reshape(g, kernel[0], -1, o // g), kernel, pads, dilation, groups)


def input_grad_pads(gy, kernel, pads, dilation, in_size):
    """The pads under which the input gradient is the forward of ``gy`` with the flipped kernel, or None."""
    reach = _reach(kernel, dilation)
    if all(0 <= lo <= r and 0 <= hi <= r and e + lo + hi - r == i
           for (lo, hi), r, e, i in zip(pads, reach, gy.shape[2:], in_size)):
        return tuple((r - lo, r - hi) for (lo, hi), r in zip(pads, reach))
    return None


def input_grad(gy, w, flipped_pads, dilation, groups):
    """The input gradient ``(N, C, *in_size)`` from ``gy (N, O, OH, OW)``: ``gy`` padded by ``flipped_pads``
    (``input_grad_pads``) convolved with each group's kernel flipped, in and out channels swapped."""
    g, (o, cg), kernel = groups, w.shape[:2], w.shape[2:]
    u = w[:, :, ::-1, ::-1].reshape(g, o // g, cg, kernel[0], -1).transpose(0, 3, 4, 1, 2)
    return _convolve(gy, np.ascontiguousarray(u).reshape(g, kernel[0], -1, cg), kernel, flipped_pads, dilation, groups)


def weight_grad(x, gy, kernel, pads, dilation, groups):
    """The weight gradient ``(O, C/G, kh, kw)``, or None where it is not finite (the grid's dropped columns
    met a NaN or inf: the caller sums real products only)."""
    # 4 input channels a group: two groups a product (8-float vectors, 8 rows), their diagonal blocks kept
    # (each gradient element sums only its own channels' products: the same floats as one group a product)
    pair = x.shape[1] // groups == 4 and groups % 2 == 0
    parts = groups // 2 if pair else groups
    reach = _reach(kernel, dilation)
    grid, (hp, wp) = _grid(x, parts, pads, reach)
    n, o, oh, ow = gy.shape
    rows = np.zeros((parts, n, hp, wp, o // parts), gy.dtype)
    rows[:, :, :oh, :ow] = gy.reshape(n, parts, o // parts, oh, ow).transpose(1, 0, 3, 4, 2)
    offsets = _offsets(kernel, dilation, wp)
    out = np.empty((parts, offsets.size, o // parts, grid.shape[2]), x.dtype)
    rows = rows.reshape(parts, n * hp * wp, -1)
    kernels.parallel_ranges(kernels.loops("grouped").weight_grad, parts * offsets.size, rows.size * grid.shape[2],
                            lambda first, lo, hi: (grid, rows, offsets, out, lo, hi), shared=True)
    if pair:
        blocks = out.reshape(parts, offsets.size, 2, o // groups, 2, 4)
        out = np.stack([blocks[:, :, 0, :, 0], blocks[:, :, 1, :, 1]], 1).reshape(groups, offsets.size, o // groups, 4)
    if not np.isfinite(out).all():
        return None
    gw = out.reshape(groups, kernel[0], kernel[1], o // groups, -1).transpose(0, 3, 4, 1, 2)
    return np.ascontiguousarray(gw).reshape(o, -1, *kernel)
