"""uint8 image resizing as PyTorch's CPU kernel computes it: ``interpolate``'s bilinear and bicubic modes on a
uint8 image, and so torchvision's v2 ``resize``.

PyTorch resamples uint8 images without a float round trip: per axis, Pillow's filter weights (normalised,
in double) become int16 fixed-point numbers with as many fraction bits as fit, each output pixel is the
integer sum of inputs times weights plus half a unit, shifted down and clamped to [0, 255]; the
horizontal pass runs first and its uint8 result feeds the vertical one.
"""
from __future__ import annotations

import math

import numpy as np

from ..base.backend import asnumpy
from ..base.meta import has_data
from ..core.dispatch import apply
from ..core.registry import NONE, Op
from ..core.tensor import Tensor


def _filter(mode: str, antialias: bool):
    if mode == "bilinear":
        return 1.0, lambda x: np.maximum(0.0, 1.0 - np.abs(x))
    a = -0.5 if antialias else -0.75   # Pillow's cubic for antialias, PyTorch's bicubic otherwise

    def cubic(x):
        x = np.abs(x)
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))
    return 2.0, cubic


def _weights(n_in: int, n_out: int, mode: str, antialias: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Per output index: the first input index, int16 weights over a fixed window, and their precision."""
    half, fn = _filter(mode, antialias)
    scale = n_in / n_out
    support = half * scale if (antialias and scale >= 1.0) else half
    size = int(math.ceil(support)) * 2 + 1
    invscale = 1.0 / scale if (antialias and scale >= 1.0) else 1.0
    starts = np.zeros(n_out, dtype=np.int64)
    weights = np.zeros((n_out, size))
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        w = fn((np.arange(lo, hi) - center + 0.5) * invscale)
        total = sum(float(v) for v in w)   # left to right, as the C loop adds them
        if total != 0.0:
            w = w / total
        starts[i] = lo
        weights[i, :hi - lo] = w
    wt_max = weights.max()
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    v = weights * (1 << precision)
    ints = np.where(v < 0, np.trunc(-0.5 + v), np.trunc(0.5 + v)).astype(np.int64)
    return starts, ints, precision


def _pass(x: np.ndarray, n_out: int, mode: str, antialias: bool) -> np.ndarray:
    """Resample the last axis of an int64 array of uint8 values."""
    n_in = x.shape[-1]
    starts, ints, precision = _weights(n_in, n_out, mode, antialias)
    size = ints.shape[1]
    idx = np.minimum(starts[:, None] + np.arange(size)[None, :], n_in - 1)   # padded taps have weight 0
    acc = (x[..., idx] * ints).sum(-1) + (1 << (precision - 1))
    return np.clip(acc >> precision, 0, 255)


def resize_uint8(arr: np.ndarray, size: tuple[int, int], mode: str, antialias: bool) -> np.ndarray:
    """(..., H, W) uint8 -> (..., h, w) uint8, bilinear or bicubic (align_corners=False)."""
    h, w = size
    x = arr.astype(np.int64)
    if w != x.shape[-1]:
        x = _pass(x, w, mode, antialias)
    if h != x.shape[-2]:
        x = np.swapaxes(_pass(np.swapaxes(x, -1, -2), h, mode, antialias), -1, -2)
    return np.ascontiguousarray(x.astype(np.uint8))


def _fwd(xp, x, *, size, mode, antialias):
    if not has_data(xp):
        return xp.empty(x.shape[:-2] + tuple(size), x.dtype)
    return xp.asarray(resize_uint8(asnumpy(xp, x), tuple(size), mode, antialias))


_resize = Op("upsample_uint8", _fwd, None, saves=NONE,
             aten=lambda shapes, params: f"_upsample_{params['mode']}2d{'_aa' if params['antialias'] else ''}")


def applies(input: Tensor, mode: str, align_corners, antialias: bool) -> bool:
    """Whether ``interpolate`` resamples with PyTorch's integer kernel: a 4-d uint8 image, bilinear or
    bicubic, without ``align_corners`` (PyTorch's uint8 kernel; float math in uint8 overflowed)."""
    return (input._data.dtype == np.uint8 and input.ndim == 4 and mode in ("bilinear", "bicubic")
            and not align_corners)


def resize(input: Tensor, size: tuple, mode: str, antialias: bool) -> Tensor:
    return apply(_resize, input, size=tuple(int(s) for s in size), mode=mode, antialias=bool(antialias))
