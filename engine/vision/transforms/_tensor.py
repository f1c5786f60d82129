"""The tensor side of ``transforms.functional``: (..., C, H, W) tensors, written with Tensor ops.

Resizing goes through ``nn.functional.interpolate``, as torchvision's does; with ``antialias`` its
matrices use Pillow's filters (the triangle, Keys' a = -0.5 cubic) widened by the downscale factor,
so tensors and PIL images agree.
"""
from __future__ import annotations

import numpy as np

from ...base.dtype import uint8
from ...core.creation import as_tensor
from ...core.tensor import Tensor
from ...nn import functional as F
from ...ops.movement import cat


def resize(img: Tensor, size: tuple[int, int], interpolation: str, antialias: bool) -> Tensor:
    h, w = size
    out_dtype = img.dtype
    x = img if img.is_floating_point() else img.float()
    if interpolation not in ("nearest", "nearest-exact", "bilinear", "bicubic"):
        raise ValueError(f"resize: interpolation {interpolation!r} is not supported for tensors")
    batch = x.reshape(-1, *x.shape[-3:]) if x.dim() >= 3 else x[None, None]
    kw = {} if interpolation.startswith("nearest") else {"align_corners": False, "antialias": antialias}
    out = F.interpolate(batch, size=(h, w), mode=interpolation, **kw).reshape(*x.shape[:-2], h, w)
    if out_dtype.is_floating_point:
        return out
    if interpolation == "bicubic" and out_dtype == uint8:
        out = out.clamp(0, 255)
    return out.round().to(out_dtype)


def crop(img: Tensor, top: int, left: int, height: int, width: int) -> Tensor:
    h, w = img.shape[-2:]
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        ltrb = (max(-left, 0), max(-top, 0), max(right - w, 0), max(bottom - h, 0))
        inside = img[..., max(top, 0):min(bottom, h), max(left, 0):min(right, w)]
        return pad(inside, ltrb, 0, "constant")
    return img[..., top:bottom, left:right]


def pad(img: Tensor, ltrb: tuple[int, int, int, int], fill, padding_mode: str) -> Tensor:
    left, top, right, bottom = ltrb
    if padding_mode == "constant":
        return F.pad(img, (left, right, top, bottom), mode="constant", value=float(fill or 0))
    # edge / reflect / symmetric: gather rows and columns by numpy.pad's index pattern
    rows = np.pad(np.arange(img.shape[-2]), (top, bottom), mode=padding_mode)
    cols = np.pad(np.arange(img.shape[-1]), (left, right), mode=padding_mode)
    rows_t, cols_t = as_tensor(rows, device=img.device), as_tensor(cols, device=img.device)
    return img.index_select(-2, rows_t).index_select(-1, cols_t)


def _bound(img: Tensor) -> float:
    return 1.0 if img.is_floating_point() else 255.0


def _blend(img1: Tensor, img2, ratio: float) -> Tensor:
    bound = _bound(img1)
    out = (ratio * img1 + (1.0 - ratio) * img2).clamp(0, bound)
    return out if img1.is_floating_point() else out.to(img1.dtype)


def rgb_to_grayscale(img: Tensor, num_output_channels: int = 1) -> Tensor:
    if img.shape[-3] not in (1, 3):
        raise TypeError(f"rgb_to_grayscale: input should have 1 or 3 channels, got {img.shape[-3]}")
    if img.shape[-3] == 3:
        r, g, b = img.unbind(dim=-3)
        gray = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(-3)
    else:
        gray = img.clone()
    return gray.expand(img.shape) if num_output_channels == 3 else gray


def adjust_brightness(img: Tensor, factor: float) -> Tensor:
    return _blend(img, 0.0, factor)


def adjust_contrast(img: Tensor, factor: float) -> Tensor:
    gray = rgb_to_grayscale(img) if img.shape[-3] == 3 else img
    mean = (gray if gray.is_floating_point() else gray.float()).mean(dim=(-3, -2, -1), keepdim=True)
    return _blend(img, mean, factor)


def adjust_saturation(img: Tensor, factor: float) -> Tensor:
    if img.shape[-3] == 1:
        return img
    return _blend(img, rgb_to_grayscale(img), factor)


def adjust_hue(img: Tensor, hue_factor: float) -> Tensor:
    """Shift hue in HSV space (torchvision's float formulas); uint8 images round-trip through [0, 1]."""
    if img.shape[-3] == 1:
        return img
    x = img if img.is_floating_point() else img.float() / 255.0
    h, s, v = _rgb2hsv(x)
    out = _hsv2rgb((h + hue_factor) % 1.0, s, v)
    return out if img.is_floating_point() else (out * 255.0).to(img.dtype)


def _rgb2hsv(img: Tensor):
    r, g, b = img.unbind(dim=-3)
    maxc = img.max(dim=-3).values
    minc = img.min(dim=-3).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = maxc.new_ones(())
    s = cr / maxc.where(~eqc, ones)
    cr_divisor = cr.where(~eqc, ones)
    rc, gc, bc = (maxc - r) / cr_divisor, (maxc - g) / cr_divisor, (maxc - b) / cr_divisor
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = ((hr + hg + hb) / 6.0 + 1.0) % 1.0
    return h, s, maxc


def _hsv2rgb(h: Tensor, s: Tensor, v: Tensor) -> Tensor:
    i = (h * 6.0).floor()
    f = h * 6.0 - i
    i = i.long() % 6
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    channels = []
    for c in range(3):
        out = v * 0.0
        for k, row in enumerate(table):
            out = out + (i == k) * row[c]
        channels.append(out.unsqueeze(-3))
    return cat(channels, dim=-3)


def normalize_size(size) -> tuple[int, int] | None:
    """(h, w) from an int or a 1/2-sequence; None when it is an int (shorter-side resize)."""
    if isinstance(size, int):
        return None
    if len(size) == 1:
        return None
    return int(size[0]), int(size[1])


def shorter_side_size(h: int, w: int, size: int, max_size: int | None) -> tuple[int, int]:
    """Output (h, w) that scales the shorter side to ``size`` (torchvision's rule, with ``max_size``)."""
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    if max_size is not None:
        if max_size <= size:
            raise ValueError(f"resize: max_size = {max_size} must be strictly greater than the requested size "
                             f"for the smaller edge = {size}")
        if new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    return (new_long, new_short) if w <= h else (new_short, new_long)

