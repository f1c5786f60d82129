"""The tensor side of ``transforms.functional``: (..., C, H, W) tensors, written with Tensor ops.

Resizing goes through ``nn.functional.interpolate``, as torchvision's does; with ``antialias`` its
matrices use Pillow's filters (the triangle, Keys' a = -0.5 cubic) widened by the downscale factor,
so tensors and PIL images agree.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.dtype import float32, float64, int16, int32, uint8
from ...core.creation import as_tensor, linspace, ones, rand, zeros
from ...core.tensor import Tensor
from ...nn import functional as F
from ...ops.compare import where
from ...ops.movement import cat, stack


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
    if padding_mode == "constant" and isinstance(fill, (list, tuple)) and len(fill) > 1:
        out = F.pad(img, (left, right, top, bottom), mode="constant", value=0.0)
        value = as_tensor(list(fill), device=img.device).to(img.dtype).reshape(-1, 1, 1)
        for rows, cols, n in ((slice(None, top), slice(None), top), (slice(None), slice(None, left), left),
                              (slice(out.shape[-2] - bottom, None), slice(None), bottom),
                              (slice(None), slice(out.shape[-1] - right, None), right)):
            if n > 0:
                out[..., rows, cols] = value
        return out
    if padding_mode == "constant":
        fill = fill[0] if isinstance(fill, (list, tuple)) else fill
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



# ---------------------------------------------------------------- geometry through a sampling grid
def inverse_affine_matrix(center: list[float], angle: float, translate: list[float], scale: float,
                          shear: list[float]) -> list[float]:
    """The 2x3 matrix taking output pixels to input pixels of rotation/scale/shear about ``center``
    then translation (torchvision's parameterisation, angles in degrees, clockwise for images)."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -(a * math.tan(sx) + math.sin(rot))
    c = math.sin(rot - sy) / math.cos(sy)
    d = math.cos(rot) - c * math.tan(sx)
    m = [d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0]
    m[2] += cx - m[0] * (cx + tx) - m[1] * (cy + ty)
    m[5] += cy - m[3] * (cx + tx) - m[4] * (cy + ty)
    return m


def affine_matrix(center: list[float], angle: float, translate: list[float], scale: float,
                  shear: list[float]) -> list[float]:
    """The forward 2x3 matrix of ``inverse_affine_matrix``'s transform (input pixels to output pixels)."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -(a * math.tan(sx) + math.sin(rot))
    c = math.sin(rot - sy) / math.cos(sy)
    d = math.cos(rot) - c * math.tan(sx)
    m = [a * scale, b * scale, 0.0, c * scale, d * scale, 0.0]
    m[2] += cx + tx - m[0] * cx - m[1] * cy
    m[5] += cy + ty - m[3] * cx - m[4] * cy
    return m


def expanded_size(matrix: list[float], w: int, h: int) -> tuple[int, int]:
    """(w, h) of the box holding the whole rotated image, in float32 with a 1e-4 tolerance (as torchvision)."""
    hw, hh = 0.5 * w, 0.5 * h
    pts = as_tensor([[-hw, -hh, 1.0], [-hw, hh, 1.0], [hw, hh, 1.0], [hw, -hh, 1.0]])
    theta = as_tensor(matrix, dtype=float32).view(2, 3)
    new = pts.matmul(theta.T)
    half = as_tensor([hw, hh])
    lo, hi = new.min(dim=0).values + half, new.max(dim=0).values + half
    cmax = (hi * 1e4).trunc() * 1e-4
    cmin = (lo * 1e4).trunc() * 1e-4
    size = cmax.ceil() - cmin.floor()
    return int(size[0].item()), int(size[1].item())


def affine_grid(matrix: list[float], dtype, device, w: int, h: int, ow: int, oh: int) -> Tensor:
    """Normalised sampling points (1, oh, ow, 2) of output pixel centres mapped by ``matrix``."""
    theta = as_tensor(matrix, dtype=dtype, device=device).reshape(2, 3)
    xs = linspace((1.0 - ow) * 0.5, (ow - 1.0) * 0.5, steps=ow, device=device).to(dtype)
    ys = linspace((1.0 - oh) * 0.5, (oh - 1.0) * 0.5, steps=oh, device=device).to(dtype)
    rescaled = theta / as_tensor([[0.5 * w], [0.5 * h]], dtype=dtype, device=device)
    return _project(xs.expand(oh, ow), ys.unsqueeze(-1).expand(oh, ow), rescaled).unsqueeze(0)


def _project(xs: Tensor, ys: Tensor, theta: Tensor) -> Tensor:
    """(x, y, 1) @ theta.T as PyTorch's small-K bmm sums it: (x t0 + y t1) + t2, rounding each step."""
    return stack([(xs * theta[k, 0] + ys * theta[k, 1]) + theta[k, 2] for k in range(2)], dim=-1)


def grid_transform(img: Tensor, grid: Tensor, mode: str, fill, v1_fill: bool = False) -> Tensor:
    """Sample ``img`` at ``grid``; with ``fill`` a ones channel is sampled alongside and where it falls
    short the fill shows (nearest: below one half; bilinear: blended by it). Integer images round back.
    ``v1_fill`` blends as v1 torchvision does (img * m + (1 - m) * fill) instead of v2's (img - fill) * m + fill."""
    shape = img.shape
    c, ih, iw = shape[-3:]
    oh, ow = grid.shape[1], grid.shape[2]
    x = img.reshape(-1, c, ih, iw)
    fp = x.dtype == grid.dtype
    x = x if fp else x.to(grid.dtype)
    n = x.shape[0]
    if n > 1:
        grid = grid.expand(n, -1, -1, -1)
    if fill is not None:
        x = cat([x, ones((n, 1, ih, iw), dtype=x.dtype, device=x.device)], dim=1)
    if mode == "bilinear" and x.dtype in (float32, float64) and not (x.requires_grad or grid.requires_grad):
        x = _bilinear_sample(x, grid)
    else:
        x = F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)
    if fill is not None:
        x, mask = x[:, :-1], x[:, -1:].expand(n, c, oh, ow)
        fill_list = list(fill) if isinstance(fill, (tuple, list)) else [float(fill)]
        fill_img = as_tensor(fill_list, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        if mode == "nearest":
            x = where(mask < 0.5, fill_img.expand_as(x), x)
        elif v1_fill:
            x = x * mask + (1.0 - mask) * fill_img
        else:
            x = (x - fill_img) * mask + fill_img
    out = x if fp else x.round().to(img.dtype)
    return out.reshape(*shape[:-3], c, oh, ow)


def _fma(a: np.ndarray, b, c) -> np.ndarray:
    """a * b + c with one rounding, in the operands' dtype: float32 through float64 (exact), float64 through
    x87 extended precision (a double rounding only where the extended sum lands on a tie)."""
    dtype = np.result_type(np.asarray(a).dtype, np.asarray(c).dtype)
    wide = np.float64 if dtype == np.float32 else np.longdouble
    return (np.asarray(a, wide) * np.asarray(b, wide) + np.asarray(c, wide)).astype(dtype)


def _bilinear_sample(x: Tensor, grid: Tensor) -> Tensor:
    """``grid_sample(x, grid, "bilinear", "zeros", align_corners=False)`` of float32 as PyTorch's CPU kernel
    rounds it: the unnormalised coordinate and the four-corner sum are fused multiply-adds there."""
    arr = x.detach().cpu().numpy()
    n, c, h, w = arr.shape
    g = grid.detach().cpu().numpy()
    one, half = arr.dtype.type(1), arr.dtype.type(-0.5)
    ix = _fma(g[..., 0] + one, arr.dtype.type(w / 2), np.full(g.shape[:-1], half))
    iy = _fma(g[..., 1] + one, arr.dtype.type(h / 2), np.full(g.shape[:-1], half))
    x0, y0 = np.floor(ix), np.floor(iy)
    east, south = ix - x0, iy - y0
    west, north = one - east, one - south
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    batch = np.arange(n)[:, None, None]

    def corner(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
        inside = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
        vals = arr[batch, :, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]   # (n, oh, ow, c)
        return np.where(inside[..., None], vals, arr.dtype.type(0)).transpose(0, 3, 1, 2)
    nw, ne = (north * west)[:, None], (north * east)[:, None]
    sw, se = (south * west)[:, None], (south * east)[:, None]
    out = corner(y0, x0) * nw
    out = _fma(corner(y0, x0 + 1), ne, out)
    out = _fma(corner(y0 + 1, x0), sw, out)
    out = _fma(corner(y0 + 1, x0 + 1), se, out)
    return as_tensor(np.ascontiguousarray(out), device=x.device)


def _grid_dtype(img: Tensor):
    return img.dtype if img.is_floating_point() else float32


def affine(img: Tensor, matrix: list[float], mode: str, fill, v1_fill: bool = False,
           out_size: tuple[int, int] | None = None) -> Tensor:
    h, w = img.shape[-2:]
    ow, oh = out_size or (w, h)
    grid = affine_grid(matrix, _grid_dtype(img), img.device, w, h, ow, oh)
    return grid_transform(img, grid, mode, fill, v1_fill)


def perspective(img: Tensor, coeffs: list[float], mode: str, fill, v1_fill: bool = False) -> Tensor:
    """Projective warp: output pixel (x, y) samples the input at
    ((a x + b y + c) / (g x + h y + 1), (d x + e y + f) / (g x + h y + 1))."""
    h, w = img.shape[-2:]
    dtype = _grid_dtype(img)
    theta1 = as_tensor([[coeffs[0], coeffs[1], coeffs[2]], [coeffs[3], coeffs[4], coeffs[5]]], dtype=dtype)
    theta2 = as_tensor([[coeffs[6], coeffs[7], 1.0], [coeffs[6], coeffs[7], 1.0]], dtype=dtype)
    xs = linspace(0.5, w - 0.5, steps=w).to(dtype).expand(h, w)
    ys = linspace(0.5, h - 0.5, steps=h).to(dtype).unsqueeze(-1).expand(h, w)
    rescaled1 = theta1 / as_tensor([[0.5 * w], [0.5 * h]], dtype=dtype)
    grid = (_project(xs, ys, rescaled1) / _project(xs, ys, theta2) - 1.0).unsqueeze(0)
    return grid_transform(img, grid, mode, fill, v1_fill)


# ---------------------------------------------------------------- filters and pixel maps
def gaussian_kernel1d(size: int, sigma: float, dtype, v1: bool) -> Tensor:
    """v1: exp(-x^2 / 2 sigma^2) over x = -(k-1)/2 .. (k-1)/2, normalised; v2: the same as a softmax over
    x / sqrt(2) (another rounding)."""
    if v1:
        half = (size - 1) * 0.5
        x = linspace(-half, half, steps=size, dtype=dtype)
        pdf = (-0.5 * (x / sigma).pow(2)).exp()
        return pdf / pdf.sum()
    lim = (size - 1) / (2.0 * math.sqrt(2.0))
    x = linspace(-lim, lim, steps=size, dtype=dtype)
    return x.div(sigma).pow(2).neg().softmax(dim=0)


def gaussian_blur(img: Tensor, kernel_size: list[int], sigma: list[float], v1: bool = False) -> Tensor:
    """Separable Gaussian as one 2-d depthwise convolution over reflect padding; integers round back."""
    fp = img.is_floating_point()
    dtype = img.dtype if fp else float32
    kx = gaussian_kernel1d(kernel_size[0], sigma[0], dtype, v1)
    ky = gaussian_kernel1d(kernel_size[1], sigma[1], dtype, v1)
    kernel = ky.unsqueeze(-1) * kx
    shape = img.shape
    x = img.reshape(-1, *shape[-3:])
    x = x if fp else x.to(float32)
    pad = [kernel_size[0] // 2, kernel_size[0] // 2, kernel_size[1] // 2, kernel_size[1] // 2]
    x = _depthwise(F.pad(x, pad, mode="reflect"), kernel)
    out = x.reshape(shape)
    return out if fp else out.round().to(img.dtype)


def fma_add(a: Tensor, b, alpha: float) -> Tensor:
    """``a + alpha * b`` rounded once, as PyTorch's ``add(a, b, alpha=...)`` computes it on the CPU (a fused
    multiply-add): the sum is formed in a wider float (float64 for float32: exact; x87 extended for float64)."""
    if a.dtype not in (float32, float64):
        return a + b * alpha
    an = a.detach().cpu().numpy()
    bn = np.asarray(b.detach().cpu().numpy() if isinstance(b, Tensor) else b, dtype=an.dtype)
    return as_tensor(_fma(bn, an.dtype.type(alpha), an), device=a.device)


def _depthwise(x: Tensor, kernel: Tensor) -> Tensor:
    """One 2-d kernel over every channel of (N, C, H, W): PyTorch's rounding (``_conv``) unless differentiated."""
    if x.dtype in (float32, float64) and not (x.requires_grad or kernel.requires_grad):
        from ._conv import depthwise
        return as_tensor(depthwise(x.detach().cpu().numpy(), kernel.detach().cpu().numpy()), device=x.device)
    c = x.shape[1]
    return F.conv2d(x, kernel.expand(c, 1, *kernel.shape), groups=c)


def max_value(dtype) -> float:
    return 1.0 if dtype.is_floating_point else float({uint8: 255, int16: 32767, int32: 2147483647}.get(dtype, 255))


def adjust_sharpness(img: Tensor, factor: float, v1: bool = False) -> Tensor:
    """Blend with the image smoothed by [[1,1,1],[1,5,1],[1,1,1]] / 13 (borders kept)."""
    c, h, w = img.shape[-3:]
    if h <= 2 or w <= 2:
        return img
    fp = img.is_floating_point()
    dtype = img.dtype if fp else float32
    kernel = ones((3, 3), dtype=dtype)
    if v1:
        kernel[1, 1] = 5.0
        kernel = kernel / kernel.sum()
    else:
        kernel = as_tensor([[1.0 / 13.0] * 3, [1.0 / 13.0, 5.0 / 13.0, 1.0 / 13.0], [1.0 / 13.0] * 3], dtype=dtype)
    x = img.reshape(-1, c, h, w).to(dtype)
    blurred = _depthwise(x, kernel)
    if not fp:
        blurred = blurred.round()
    inner = x[..., 1:-1, 1:-1]
    if v1:
        degenerate = x.clone()
        degenerate[..., 1:-1, 1:-1] = blurred if fp else blurred
        out = (factor * x + (1.0 - factor) * degenerate).clamp(0, max_value(img.dtype))
    else:
        out = x.clone()
        out[..., 1:-1, 1:-1] = fma_add(inner, blurred - inner, 1.0 - factor)
        out = out.clamp(0, max_value(img.dtype))
    out = out.reshape(img.shape)
    return out if fp else out.to(img.dtype)


def invert(img: Tensor) -> Tensor:
    if img.is_floating_point():
        return 1.0 - img
    return img.bitwise_not() if img.dtype == uint8 else max_value(img.dtype) - img


def posterize(img: Tensor, bits: int) -> Tensor:
    if img.is_floating_point():
        levels = 1 << bits
        return img.mul(levels).floor().clamp(0, levels - 1).mul(1.0 / levels)
    if bits >= 8:
        return img
    return img & (((1 << bits) - 1) << (8 - bits))


def solarize(img: Tensor, threshold: float) -> Tensor:
    return where(img >= threshold, invert(img), img)


def autocontrast(img: Tensor, v1: bool = False) -> Tensor:
    """Stretch each channel to the full range (a flat channel is left as it is)."""
    bound = max_value(img.dtype)
    fp = img.is_floating_point()
    x = img if fp else img.to(float32)
    lo = x.amin(dim=(-2, -1), keepdim=True)
    hi = x.amax(dim=(-2, -1), keepdim=True)
    flat = hi == lo
    lo = where(flat, zeros((), dtype=x.dtype), lo)
    if v1:
        scale = where(flat, ones((), dtype=x.dtype), bound / where(flat, ones((), dtype=x.dtype), hi - lo))
        return ((x - lo) * scale).clamp(0, bound).to(img.dtype)
    inv_scale = where(flat, ones((), dtype=x.dtype), (hi - lo) * (1.0 / bound))
    return ((x - lo) / inv_scale).clamp(0, bound).to(img.dtype)


def equalize(img: Tensor) -> Tensor:
    """Histogram equalisation of each channel of a uint8 image by Pillow's lookup table."""
    arr = img.detach().cpu().numpy()
    flat = arr.reshape(-1, arr.shape[-2] * arr.shape[-1]).astype(np.int64)
    out = np.empty_like(flat)
    for k, chan in enumerate(flat):
        hist = np.bincount(chan, minlength=256)
        nonzero = hist[hist != 0]
        step = int(nonzero[:-1].sum()) // 255
        if step == 0:
            out[k] = chan
            continue
        lut = (np.cumsum(hist) + step // 2) // step
        lut = np.clip(np.concatenate([[0], lut[:-1]]), 0, 255)
        out[k] = lut[chan]
    return as_tensor(out.astype(np.uint8).reshape(arr.shape), device=img.device)


def erase(img: Tensor, i: int, j: int, h: int, w: int, v: Tensor, inplace: bool = False) -> Tensor:
    out = img if inplace else img.clone()
    out[..., i:i + h, j:j + w] = v
    return out


def elastic(img: Tensor, displacement: Tensor, mode: str, fill, v1_fill: bool = False) -> Tensor:
    """Sample at the identity grid (pixel centres in [-1, 1]) plus ``displacement`` (1, H, W, 2)."""
    h, w = img.shape[-2:]
    dtype = _grid_dtype(img)
    xs = linspace((-w + 1) / w, (w - 1) / w, steps=w, dtype=dtype)
    ys = linspace((-h + 1) / h, (h - 1) / h, steps=h, dtype=dtype)
    identity = stack([xs.expand(h, w), ys.unsqueeze(-1).expand(h, w)], dim=-1).unsqueeze(0)
    return grid_transform(img, identity + displacement.to(dtype), mode, fill, v1_fill)


def elastic_displacement(alpha: list[float], sigma: list[float], h: int, w: int, v1: bool) -> Tensor:
    """Random (1, H, W, 2) offsets: uniform noise in [-1, 1] per axis, Gaussian-smoothed (kernel 8 sigma + 1,
    odd), scaled by alpha over the axis's size."""
    out = []
    for k, size in ((0, w), (1, h)):
        d = rand(1, 1, h, w) * 2 - 1
        if sigma[k] > 0.0:
            ks = int(8 * sigma[k] + 1)
            ks += 1 - ks % 2
            d = gaussian_blur(d, [ks, ks], list(sigma), v1=v1)
        out.append(d * alpha[k] / size)
    return cat(out, dim=1).permute(0, 2, 3, 1)
