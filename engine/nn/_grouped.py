"""Grouped convolutions (``1 < groups < channels``, not depthwise) as per-tap GEMMs over a flat channels-last
grid whose rows are dealt into the stride's phases (``kernels/grouped.py``): the forward, the input gradient
(the forward of the output gradient with each group's kernel flipped and transposed; at strides over 1 one such
forward per phase of the input, with the phase's taps) and the weight gradient. im2col's per-image, per-group
GEMMs of a few output channels cost 4-14x torch on RegNetX's 3x3s (group width 8).
"""
from __future__ import annotations

import numpy as np

from .. import kernels

__all__ = ["fits", "forward", "input_grad", "weight_grad"]

_LANES = (4, 8, 16, 32, 48, 64)   # the vector widths of the per-tap GEMMs (``kernels/winograd.py`` ``_taps``)
_ROWS = 16   # the forward's rows a grid image are a multiple of this (no scalar rest rows at each image's end)


def fits(xp, a, w, stride, pads, dilation, groups, lanes: int) -> bool:
    """Whether a pass of input ``a`` (the output gradient for the input gradient) and weight ``w`` runs here:
    float32 numpy with the loops, 2-D, grouped but not depthwise, padding not negative, the product's vector
    dimension ``lanes`` (a group's output channels; its input channels for the input gradient) one of
    ``_LANES``, undilated along the width (a kernel row's taps are then one run of the grid) and, at strides
    over 1, along the height."""
    return (a.ndim == 4 and 1 < groups < a.shape[1] and lanes in _LANES and dilation[1] == 1
            and (tuple(stride) == (1, 1) or dilation[0] == 1) and min(p for pair in pads for p in pair) >= 0
            and kernels.use(xp, w) and type(a) is np.ndarray and a.dtype == w.dtype)


def _fill(body, src, pt, pl, lo, hi):
    """Images ``lo:hi`` of ``src (N, G, C/G, H, W)`` into the grid's ``body (G, N, phases, hps, wg, C/G)`` at
    row ``pt``, column ``pl`` of the padded input (numpy's copies: images over the threads)."""
    phases, (h, w) = body.shape[2], src.shape[3:]
    for b in range(phases):
        first = (b - pt) % phases   # the first input row in phase b
        if first < h:
            at = (first + pt - b) // phases
            rows = src[lo:hi, :, :, first::phases]
            body[:, lo:hi, b, at:at + rows.shape[3], pl:pl + w] = rows.transpose(1, 0, 3, 4, 2)


def _copy(dst, src, lo, hi):
    """``dst[lo:hi] = src[lo:hi]`` (images over the threads: ``_copy_images``)."""
    dst[lo:hi] = src[lo:hi]


def _copy_images(dst, src) -> None:
    """``dst[...] = src``, both images first, the images split over the threads."""
    kernels.parallel_ranges(_copy, dst.shape[0], dst.size, lambda first, lo, hi: (dst, src, lo, hi))


class _Grid:
    """``a (N, C, H, W)`` zero-padded, channels last per group, the padded rows dealt into ``stride[0]`` phases
    (row ``i`` of phase ``b``: padded row ``stride[0] * i + b``), each image ``(phases, hps, wg, C/G)`` with
    ``wg`` a multiple of ``stride[1]``, flat: ``data (G, N * image + tail)``, the tail (zero) as far as the
    forward's last rows read."""

    def __init__(self, a, groups, kernel, stride, pads, dilation):
        n, c, h, w = a.shape
        (pt, pb), (pl, pr) = pads
        (sh, sw), dh = stride, dilation[0]
        hp, wp = h + pt + pb, w + pl + pr
        self.oh, self.ow = (hp - dh * (kernel[0] - 1) - 1) // sh + 1, (wp - kernel[1]) // sw + 1
        self.hps, self.wq = -(-hp // sh), -(-wp // sw)          # rows a phase, output columns a grid row
        self.cg, self.kernel, self.stride, self.dh = c // groups, kernel, stride, dh
        wg = self.wq * sw
        self.image = sh * self.hps * wg * self.cg
        self.rows = -(-self.oh * self.wq // _ROWS) * _ROWS
        last = max(self._base(ki) for ki in range(kernel[0])) + ((self.rows - 1) * sw + kernel[1]) * self.cg
        self.data = np.zeros((groups, n * self.image + max(0, last - self.image)), a.dtype)
        body = self.data[:, :n * self.image].reshape(groups, n, sh, self.hps, wg, self.cg)
        kernels.parallel_ranges(_fill, n, a.size, lambda first, lo, hi: (
            body, a.reshape(n, groups, self.cg, h, w), pt, pl, lo, hi))

    def _base(self, ki):
        """Kernel row ``ki``'s offset in an image: its phase's start plus its rows within the phase."""
        row = ki * self.dh
        return ((row % self.stride[0]) * self.hps + row // self.stride[0]) * self.wq * self.stride[1] * self.cg

    def _view(self, shape_tail, strides_tail):
        sh, sw = self.stride
        item, row = self.data.itemsize, self.wq * sw * self.cg * self.data.itemsize
        head = (self.data.shape[0], sh, -(-self.kernel[0] // sh))
        return np.lib.stride_tricks.as_strided(self.data, head + shape_tail, (
            self.data.strides[0], self.hps * row, self.dh * row) + tuple(s * item for s in strides_tail))

    def windows(self, n):
        """``(G, phases, ceil(kh / phases), N, rows, kw * C/G)``: a kernel row's taps side by side under each
        output row (``kernels/grouped.py`` ``forward``)."""
        return self._view((n, self.rows, self.kernel[1] * self.cg),
                          (self.image, self.stride[1] * self.cg, 1))

    def taps(self, n):
        """``(G, phases, ceil(kh / phases), kw, N, oh * wq, C/G)``: each tap's input under each output row."""
        return self._view((self.kernel[1], n, self.oh * self.wq, self.cg),
                          (self.cg, self.image, self.stride[1] * self.cg, 1))


def _convolve(a, u, kernel, stride, pads, dilation, groups):
    """``a (N, G * C/G, H, W)`` convolved with the per-tap weights ``u (G, kh, kw * C/G, O/G)``: ``(N, G, O/G,
    OH, OW)``, a view of the product's rows (the caller copies it where it goes)."""
    grid = _Grid(a, groups, kernel, stride, pads, dilation)
    n, og = a.shape[0], u.shape[3]
    out = np.empty((groups, n, grid.rows, og), a.dtype)
    windows = grid.windows(n)
    kernels.parallel_ranges(kernels.loops("grouped").forward, n * grid.rows, out.size * u.shape[1] * u.shape[2],
                            lambda first, lo, hi: (windows, u, out, lo, hi), shared=True)
    y = out[:, :, :grid.oh * grid.wq].reshape(groups, n, grid.oh, grid.wq, og)[:, :, :, :grid.ow]
    return y.transpose(1, 0, 4, 2, 3)


def _joined(y):
    """``_convolve``'s ``(N, G, O/G, OH, OW)`` as a C-contiguous ``(N, O, OH, OW)``."""
    out = np.empty(y.shape, y.dtype)
    _copy_images(out, y)
    return out.reshape(y.shape[0], -1, *y.shape[3:])


def forward(x, w, stride, pads, dilation, groups):
    """The convolution of ``x`` with ``w (O, C/G, kh, kw)`` (no bias)."""
    g, (o, cg), kernel = groups, w.shape[:2], w.shape[2:]
    u = w.reshape(g, o // g, cg, kernel[0], -1).transpose(0, 3, 4, 2, 1)
    return _joined(_convolve(x, np.ascontiguousarray(u).reshape(g, kernel[0], -1, o // g), kernel, stride, pads,
                             dilation, groups))


def _flipped_forward(gy, w, pads, dilation, groups):
    """``gy`` padded by ``pads`` convolved at stride 1 with each group's kernel flipped, in and out channels
    swapped: ``_convolve``'s view."""
    g, (o, cg), kernel = groups, w.shape[:2], w.shape[2:]
    u = w[:, :, ::-1, ::-1].reshape(g, o // g, cg, kernel[0], -1).transpose(0, 3, 4, 1, 2)
    return _convolve(gy, np.ascontiguousarray(u).reshape(g, kernel[0], -1, cg), kernel, (1, 1), pads, dilation,
                     groups)


def input_grad(gy, w, stride, pads, dilation, groups, in_size):
    """The input gradient ``(N, C, *in_size)`` from ``gy (N, O, OH, OW)``, or None where it does not run here
    (stride 1 with output padding). At stride 1 the forward of ``gy`` with the flipped kernel; at stride ``s``
    each phase ``(bh, bw)`` of the padded input (rows ``s*i + bh``) is that of ``gy`` with the phase's taps
    (``w[..., bh::s, bw::s]``), written into every ``s``-th row and column."""
    kernel, reach = w.shape[2:], tuple(d * (k - 1) for k, d in zip(w.shape[2:], dilation))
    if tuple(stride) == (1, 1):
        if all(0 <= lo <= r and 0 <= hi <= r and e + lo + hi - r == i
               for (lo, hi), r, e, i in zip(pads, reach, gy.shape[2:], in_size)):
            return _joined(_flipped_forward(gy, w, tuple((r - lo, r - hi) for (lo, hi), r in zip(pads, reach)),
                                            dilation, groups))
        return None
    every_phase = all(s <= k for s, k in zip(stride, kernel))   # else the phases past the kernel stay zero
    gx = (np.empty if every_phase else np.zeros)((gy.shape[0], w.shape[1] * groups) + tuple(in_size), gy.dtype)
    padded = [i + lo + hi for i, (lo, hi) in zip(in_size, pads)]
    for bh in range(min(stride[0], kernel[0])):
        for bw in range(min(stride[1], kernel[1])):
            sub = w[:, :, bh::stride[0], bw::stride[1]]
            rows = [-(-(p - b) // s) for p, b, s in zip(padded, (bh, bw), stride)]   # the phase's padded size
            sub_pads = tuple((k - 1, r - e) for k, r, e in zip(sub.shape[2:], rows, gy.shape[2:]))
            part = _flipped_forward(gy, sub, sub_pads, (1, 1), groups)
            starts = [(b - lo) % s for b, (lo, _), s in zip((bh, bw), pads, stride)]   # first input row / column
            at = [(f + lo - b) // s for f, (lo, _), b, s in zip(starts, pads, (bh, bw), stride)]
            dst = gx[:, :, starts[0]::stride[0], starts[1]::stride[1]]
            _copy_images(dst.reshape(part.shape[:3] + dst.shape[2:]),
                         part[..., at[0]:at[0] + dst.shape[2], at[1]:at[1] + dst.shape[3]])
    return gx


def weight_grad(x, gy, kernel, stride, pads, dilation, groups):
    """The weight gradient ``(O, C/G, kh, kw)``, or None where it is not finite (the grid's dropped columns
    met a NaN or inf: the caller sums real products only)."""
    n, o, oh, ow = gy.shape
    # 4 output channels a group: two groups a product (8-float vectors), their diagonal blocks kept (each
    # gradient element sums only its own channels' products: the same floats as one group a product)
    pair = o // groups == 4 and groups % 2 == 0
    parts = groups // 2 if pair else groups
    grid = _Grid(x, parts, kernel, stride, pads, dilation)
    rows = np.zeros((parts, n, grid.oh, grid.wq, o // parts), gy.dtype)
    _copy_images(rows[:, :, :, :ow].transpose(1, 0, 2, 3, 4),
                 gy.reshape(n, parts, o // parts, oh, ow).transpose(0, 1, 3, 4, 2))
    rows = rows.reshape(parts, n, -1, o // parts)
    taps = kernel[0] * kernel[1]
    out = np.empty((parts, taps, grid.cg, o // parts), x.dtype)
    windows = grid.taps(n)
    kernels.parallel_ranges(kernels.loops("grouped").weight_grad, parts * taps, rows.size * grid.cg,
                            lambda first, lo, hi: (windows, rows, out, lo, hi), shared=True)
    if pair:
        blocks = out.reshape(parts, taps, 2, grid.cg // 2, 2, 4)
        out = np.stack([blocks[:, :, 0, :, 0], blocks[:, :, 1, :, 1]], 1).reshape(groups, taps, -1, 4)
    if not np.isfinite(out).all():
        return None
    gw = out.reshape(groups, kernel[0], kernel[1], -1, o // groups).transpose(0, 4, 3, 1, 2)
    return np.ascontiguousarray(gw).reshape(o, -1, *kernel)
