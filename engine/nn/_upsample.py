"""``interpolate``'s linear and bilinear modes as one op each way, in ATen's cpu arithmetic.

ATen computes each output position's two taps per dim in the op's math type (float for float32):
the source position ``scale * (i + 0.5) - 0.5`` (one fused multiply-add, clamped at 0; ``scale * i``
with ``align_corners``), the lower tap ``min(floor(src), n - 1)``, the upper one past it unless at
the edge, and the weights ``lambda1 = clamp(src - lower, 0, 1)``, ``lambda0 = 1 - lambda1``; the
forward sums the taps times the products of their weights in one fused chain, and the backward adds
each output gradient into the taps in output order (``kernels/upsample.py``). The separable matrix
products this replaced agreed with PyTorch to the last bit in only half of the outputs.
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from .. import kernels
from ..base import runtime
from ..base.meta import has_data
from ..core.cpu_stream import fma
from ..core.dispatch import apply
from ..core.registry import NONE, Op
from ..core.tensor import Tensor

__all__ = ["applies", "upsample_linear"]

_EXACT = (np.dtype(np.float32), np.dtype(np.float64))
_NAMES = {1: ("upsample_linear1d", "UpsampleLinear1DBackward0"), 2: ("upsample_bilinear2d", "UpsampleBilinear2DBackward0"),
          3: ("upsample_trilinear3d", "UpsampleTrilinear3DBackward0")}


@functools.lru_cache(maxsize=256)
def taps(n_in: int, n_out: int, align: bool, scale: float | None, dtype: np.dtype) -> tuple:
    """``(lower, upper, lambda0, lambda1)`` of each output position along one dim (numpy arrays)."""
    i = np.arange(n_out)
    if n_in == n_out:   # ATen copies: the position itself, weights 1 and 0
        return i, i, np.ones(n_out, dtype), np.zeros(n_out, dtype)
    t = dtype.type
    if align:
        ratio = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        src = ratio * i.astype(dtype)
    else:
        ratio = t(1.0 / scale) if scale is not None and scale > 0 else t(n_in) / t(n_out)
        src = fma(np.full(n_out, ratio), i.astype(dtype) + t(0.5), np.full(n_out, t(-0.5))).astype(dtype)
        src = np.maximum(src, t(0))
    lower = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n_in - 1)   # floorf, float64 too
    lambda1 = np.clip(src - lower.astype(dtype), t(0), t(1)).astype(dtype)
    return lower, lower + (lower < n_in - 1), (t(1) - lambda1).astype(dtype), lambda1


def _plans(shape: tuple, sizes: tuple, scales: tuple, align: bool, dtype) -> list:
    return [taps(n, o, align, s, np.dtype(dtype)) for n, o, s in zip(shape[2:], sizes, scales)]


def _loops(xp, planes) -> bool:
    """Whether the numba loops take these contiguous planes (float32, or float64, on numpy)."""
    return kernels.enabled() and xp is np and planes.dtype in _EXACT


def _fwd(xp, x, *, sizes, scales, align):
    if not has_data(xp):
        return xp.empty(x.shape[:2] + tuple(sizes), x.dtype)
    plans = _plans(x.shape, sizes, scales, align, x.dtype)
    planes = xp.ascontiguousarray(x.reshape((-1,) + x.shape[2:]))
    out = xp.empty((planes.shape[0],) + tuple(sizes), x.dtype)
    if _loops(xp, planes):
        loop = kernels.loops("upsample")
        fn = (loop.linear1d, loop.bilinear2d if _vector_kernel(x, sizes) else loop.bilinear2d_separable,
              loop.trilinear3d_separable)[len(sizes) - 1]
        kernels.parallel(fn, 2, planes, out,
                         *[a for p in plans for a in p])
    else:
        out[...] = _taps_sum(xp, planes, plans)
    return out.reshape(x.shape[:2] + tuple(sizes))


def _many_planes(g, out) -> bool:
    """Whether the backward runs blocks of planes with the planes innermost (``kernels/resample.py``):
    at least 4 planes, a block of up to 64 within 16 MB."""
    block = min(64, g.shape[0])
    return g.shape[0] >= 4 and (math.prod(g.shape[1:]) + math.prod(out.shape[1:])) * block * g.itemsize <= 1 << 24


def _vector_kernel(x, sizes) -> bool:
    """Whether ATen's bilinear forward takes its channels-last vector kernel (four products, weights
    multiplied first) rather than the generic nested one: channels-last input with more than three
    channels, an output with ``OH + OW <= 128``, or one thread and three channels
    (``upsample_bilinear2d_kernel_impl_float``)."""
    c = x.shape[1]
    channels_last = c > 3 and x.strides[1] == x.itemsize and not x.flags.c_contiguous
    return channels_last or sum(sizes) <= 128 or (runtime.intra_op_threads() == 1 and c == 3)


def _taps_sum(xp, planes, plans):
    """The forward's fused chain in numpy (fused multiply-adds through ``fma``): the second tap's
    term first, then the first's, then the rest in order."""
    terms = []
    for corner in itertools.product((0, 1), repeat=len(plans)):
        x, w = planes, None
        for k, c in enumerate(corner):
            idx, wk = xp.asarray(plans[k][c]), xp.asarray(plans[k][2 + c])
            x = xp.take(x, idx, axis=k + 1)
            shape = [1] * (len(plans) + 1)
            shape[k + 1] = -1
            w = wk.reshape(shape) if w is None else (w * wk.reshape(shape)).astype(planes.dtype)
        terms.append((x, xp.broadcast_to(w, x.shape)))
    acc = (terms[1][0] * terms[1][1]).astype(planes.dtype)
    for x, w in [terms[0]] + terms[2:]:
        acc = _fma(xp, x, w, acc)
    return acc


def _fma(xp, a, b, c):
    """``a * b + c`` rounded once: float32 through double; float64 exactly on numpy (``cpu_stream.fma``),
    unfused on a device."""
    if a.dtype == np.float32:
        return (a.astype(np.float64) * b + c).astype(np.float32)
    return fma(a, b, c) if xp is np else a * b + c


def _bwd_fwd(xp, g, *, in_size, sizes, scales, align):
    if not has_data(xp):
        return xp.empty(g.shape[:2] + tuple(in_size), g.dtype)
    plans = _plans((0, 0) + tuple(in_size), sizes, scales, align, g.dtype)
    planes = xp.ascontiguousarray(g.reshape((-1,) + tuple(sizes)))   # a sum's gradient comes broadcast
    out = xp.zeros((planes.shape[0],) + tuple(in_size), g.dtype)
    if _loops(xp, planes):
        loop = kernels.loops("upsample")
        if len(sizes) == 3 and _many_planes(planes, out):   # the planes innermost, vectorised across them
            kernels.parallel(kernels.loops("resample").trilinear3d_backward_planes, 2,
                             planes.reshape(planes.shape[:2] + (-1,)), out.reshape(out.shape[:2] + (-1,)),
                             *[a for p in plans for a in p], in_size[2], sizes[2], align=16)
            return out.reshape(g.shape[:2] + tuple(in_size))
        kernels.parallel((loop.linear1d_backward, loop.bilinear2d_backward, loop.trilinear3d_backward)[len(sizes) - 1],
                         2, planes, out,
                         *[a for p in plans for a in p])
    else:   # each tap's share added in output order (a rounded product, then the sum)
        for corner in itertools.product((0, 1), repeat=len(plans)):
            idx = xp.ix_(*[xp.asarray(plans[k][c]) for k, c in enumerate(corner)])
            w = functools.reduce(lambda u, v: u * v, [xp.asarray(plans[k][2 + c]).reshape(
                [-1 if j == k else 1 for j in range(len(plans))]) for k, c in enumerate(corner)])
            for p in range(planes.shape[0]):
                xp.add.at(out[p], idx, (planes[p] * w).astype(g.dtype))
    return out.reshape(g.shape[:2] + tuple(in_size))


def _vjp(g, out, x, *, sizes, scales, align):
    return (apply(_bwd, g, in_size=tuple(x.shape[2:]), sizes=sizes, scales=scales, align=align),)


def _bwd_vjp(v, out, g, *, in_size, sizes, scales, align):
    return (apply(_up, v, sizes=sizes, scales=scales, align=align),)


def _onnx(g, x, *, sizes, scales, align):
    """ONNX ``Resize`` in linear mode: PyTorch's half-pixel positions (or ``align_corners``), from the
    scale factors when the call gave them (the positions use them, not the sizes' ratio), else the sizes."""
    mode = "align_corners" if align else "pytorch_half_pixel"
    if all(s is not None for s in scales):
        factors = g.const(np.array([1.0, 1.0, *scales], np.float32))
        return g.op("Resize", x, None, factors, mode="linear", coordinate_transformation_mode=mode)
    full = g.ints(list(g.shape(x)[:2]) + list(sizes))
    return g.op("Resize", x, None, None, full, mode="linear", coordinate_transformation_mode=mode)


_up = Op("upsample_linear", _fwd, _vjp, saves=NONE, cost=lambda s, out: 4 * math.prod(out), onnx=_onnx,
         backward_name=lambda ndims, params: _NAMES[len(params["sizes"])][1],
         aten=lambda shapes, params: _NAMES[len(params["sizes"])][0])
_bwd = Op("upsample_linear_backward", _bwd_fwd, _bwd_vjp, saves=NONE, cost=lambda s, out: 4 * math.prod(s[0]),
          aten=lambda shapes, params: _NAMES[len(params["sizes"])][0] + "_backward")


def applies(input: Tensor, nd: int, antialias: bool) -> bool:
    """Whether the op covers this call: 1-d, 2-d or 3-d linear without antialiasing on a float32 or
    float64 (N, C, ...) tensor; the rest keep the separable matrix products."""
    return not antialias and nd in (1, 2, 3) and input.ndim == nd + 2 and input._data.dtype in _EXACT


def upsample_linear(input: Tensor, sizes: tuple, scales: tuple, align: bool) -> Tensor:
    return apply(_up, input, sizes=tuple(int(s) for s in sizes), scales=tuple(scales), align=bool(align))
