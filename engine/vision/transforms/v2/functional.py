"""torchvision.transforms.v2.functional: each function dispatches on what it is given.

A PIL image goes to Pillow (``_pil``), an image tensor (a plain Tensor or ``tv_tensors.Image``) to v2's
tensor kernels, a ``tv_tensors.Mask`` through the geometric functions with nearest sampling (the
colour ones leave it as it is), and the result keeps the input's tv_tensor type. v2's kernels differ
from v1's in places that change values, and these follow v2: uint8 resizing in integer arithmetic
(``_resize_u8``), ``to_dtype`` multiplying by 1/255, grayscale floored inside contrast and saturation,
its own HSV round trip, blend orders and Gaussian kernel.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from ....base.dtype import float32, int16, int32, uint8
from ....core.creation import as_tensor, from_numpy, ones, randn_like
from ....core.tensor import Tensor
from ....ops.compare import where
from ....ops.movement import stack
from ... import tv_tensors
from .. import _tensor as _T
from .. import functional as _v1
from ....nn._resize_u8 import resize_uint8
from ..functional import (InterpolationMode, _is_pil, _mode, _pil, get_dimensions, get_image_num_channels,  # noqa: F401
                          get_image_size, perspective_coeffs, pil_to_tensor, to_pil_image, to_tensor)

# what a v2 function takes and gives back: a PIL image, a Tensor or a tv_tensor, the output of the input's type
ImageLike = TypeVar("ImageLike")

__all__ = ["InterpolationMode", "get_dimensions", "get_size", "get_image_size", "get_image_num_channels", "to_image",
           "to_pil_image", "pil_to_tensor", "to_tensor", "to_dtype", "convert_image_dtype", "normalize", "resize",
           "crop", "center_crop", "resized_crop", "pad", "hflip", "vflip", "horizontal_flip", "vertical_flip",
           "rotate", "affine", "perspective", "elastic", "elastic_transform", "five_crop", "ten_crop",
           "adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue", "adjust_sharpness",
           "adjust_gamma", "rgb_to_grayscale", "to_grayscale", "grayscale_to_rgb", "posterize", "solarize",
           "autocontrast", "equalize", "invert", "gaussian_blur", "gaussian_noise", "erase", "permute_channels",
           "convert_bounding_box_format", "clamp_bounding_boxes"]


# ---------------------------------------------------------------- dispatch
def _plain(t: Tensor) -> Tensor:
    return t.as_subclass(Tensor) if isinstance(t, tv_tensors.TVTensor) else t


def _rewrap(out, like):
    return tv_tensors.wrap(out, like=like) if isinstance(like, tv_tensors.TVTensor) and isinstance(out, Tensor) \
        else out


def _unsupported(fn: str, inpt):
    raise NotImplementedError(f"{fn}: tapelab's v2 does not transform {type(inpt).__name__} yet")


def _color(fn: str, inpt, tensor_kernel, pil_kernel=None):
    """A colour op: images change, masks and boxes pass through."""
    if isinstance(inpt, (tv_tensors.Mask, tv_tensors.BoundingBoxes)):
        return inpt
    if _is_pil(inpt):
        if pil_kernel is None:
            raise TypeError(f"{fn}: PIL images are not supported")
        return pil_kernel(inpt)
    if not isinstance(inpt, Tensor):
        raise TypeError(f"{fn}: expected a Tensor or a PIL image, got {type(inpt).__name__}")
    return _rewrap(tensor_kernel(_plain(inpt)), inpt)


def _geometry(fn: str, inpt, tensor_kernel, pil_kernel, mask_kernel=None, box_kernel=None):
    """A geometric op: images, masks (by ``mask_kernel``, nearest sampling) and boxes (by ``box_kernel``, on the
    boxes in their own format and the canvas size) change."""
    if isinstance(inpt, tv_tensors.BoundingBoxes):
        if box_kernel is None:
            _unsupported(fn, inpt)
        return _boxes(inpt, box_kernel)
    if _is_pil(inpt):
        return pil_kernel(inpt)
    if not isinstance(inpt, Tensor):
        raise TypeError(f"{fn}: expected a Tensor or a PIL image, got {type(inpt).__name__}")
    if isinstance(inpt, tv_tensors.Mask):
        x = _plain(inpt)
        squeeze = x.ndim < 3
        x = x.unsqueeze(0) if squeeze else x
        out = (mask_kernel or tensor_kernel)(x)
        return _rewrap(out.squeeze(0) if squeeze else out, inpt)
    return _rewrap(tensor_kernel(_plain(inpt)), inpt)


# ---------------------------------------------------------------- bounding boxes
def convert_bounding_box_format(inpt: Tensor, old_format=None, new_format=None, inplace: bool = False) -> Tensor:
    """Boxes between XYXY, XYWH and CXCYWH (a ``BoundingBoxes`` knows its own ``old_format``)."""
    fmt = tv_tensors.BoundingBoxFormat
    new_format = fmt[new_format.upper()] if isinstance(new_format, str) else new_format
    if isinstance(inpt, tv_tensors.BoundingBoxes):
        out = _from_xyxy(_to_xyxy(_plain(inpt), inpt.format), new_format)
        return tv_tensors.wrap(out, like=inpt, format=new_format)
    old_format = fmt[old_format.upper()] if isinstance(old_format, str) else old_format
    return _from_xyxy(_to_xyxy(inpt, old_format), new_format)


def _to_xyxy(b: Tensor, fmt) -> Tensor:
    """torchvision's conversions: x2 = x + w; x1 = cx - w / 2 then x2 = x1 + w (integers through float)."""
    a, c, d, e = b.unbind(-1)
    if fmt == tv_tensors.BoundingBoxFormat.XYWH:
        return stack([a, c, a + d, c + e], dim=-1)
    if fmt == tv_tensors.BoundingBoxFormat.CXCYWH:
        x = b if b.is_floating_point() else b.float()
        cx, cy, w, h = x.unbind(-1)
        x1, y1 = cx - w / 2, cy - h / 2
        return stack([x1, y1, x1 + w, y1 + h], dim=-1).to(b.dtype)
    return b.clone()


def _from_xyxy(b: Tensor, fmt) -> Tensor:
    """w = x2 - x1; cx = (2 x1 + w) / 2 (floor division for integers)."""
    x1, y1, x2, y2 = b.unbind(-1)
    w, h = x2 - x1, y2 - y1
    if fmt == tv_tensors.BoundingBoxFormat.XYWH:
        return stack([x1, y1, w, h], dim=-1)
    if fmt == tv_tensors.BoundingBoxFormat.CXCYWH:
        cx, cy = x1 * 2 + w, y1 * 2 + h
        cx, cy = (cx / 2, cy / 2) if b.is_floating_point() else (cx.div(2, rounding_mode="floor"),
                                                                 cy.div(2, rounding_mode="floor"))
        return stack([cx, cy, w, h], dim=-1)
    return b


def _clamp(b: Tensor, fmt, canvas: tuple[int, int]) -> Tensor:
    """Clip to the canvas in XYXY (integers through float), back in ``fmt``."""
    x = _to_xyxy(b if b.is_floating_point() else b.float(), fmt)
    x1, y1, x2, y2 = x.unbind(-1)
    h, w = canvas
    x = stack([x1.clamp(0, w), y1.clamp(0, h), x2.clamp(0, w), y2.clamp(0, h)], dim=-1)
    return _from_xyxy(x, fmt).to(b.dtype)


def _boxes(inpt: tv_tensors.BoundingBoxes, kernel):
    """``kernel(boxes, format, canvas) -> (boxes, canvas)`` on the plain boxes in their own format."""
    out, canvas = kernel(_plain(inpt), inpt.format, tuple(inpt.canvas_size))
    return tv_tensors.wrap(out, like=inpt, canvas_size=tuple(canvas))


def clamp_bounding_boxes(inpt: tv_tensors.BoundingBoxes, format=None, canvas_size=None) -> tv_tensors.BoundingBoxes:
    """Boxes clipped to their canvas."""
    return _boxes(inpt, lambda b, fmt, canvas: (_clamp(b, fmt, canvas), canvas))


def _shift(b: Tensor, fmt, dx: int, dy: int) -> Tensor:
    both = fmt == tv_tensors.BoundingBoxFormat.XYXY
    return b + as_tensor([dx, dy, dx, dy] if both else [dx, dy, 0, 0], dtype=b.dtype, device=b.device)


def _crop_boxes(top: int, left: int, height: int, width: int):
    def kernel(b: Tensor, fmt, canvas):
        return _clamp(_shift(b, fmt, -left, -top), fmt, (height, width)), (height, width)
    return kernel


def _pad_boxes(padding):
    left, top, right, bottom = _v1._ltrb(padding)

    def kernel(b: Tensor, fmt, canvas):
        new = (canvas[0] + top + bottom, canvas[1] + left + right)
        return _clamp(_shift(b, fmt, left, top), fmt, new), new
    return kernel


def _affine_boxes(angle: float, translate, scale: float, shear, center, expand: bool = False):
    """Each box's four corners through the affine map, their bounding box, clamped (torchvision's recipe)."""
    def kernel(b: Tensor, fmt, canvas):
        x = _to_xyxy(b if b.is_floating_point() else b.float(), fmt)
        h, w = canvas
        c = [w * 0.5, h * 0.5] if center is None else [float(v) for v in center]
        m = _T.affine_matrix(c, float(angle), [float(t) for t in translate], scale, shear)
        theta = as_tensor(m, dtype=x.dtype, device=x.device).reshape(2, 3)
        x1, y1, x2, y2 = x.unbind(-1)
        px, py = stack([x1, x2, x2, x1], dim=-1), stack([y1, y1, y2, y2], dim=-1)
        tx = (px * theta[0, 0] + py * theta[0, 1]) + theta[0, 2]
        ty = (px * theta[1, 0] + py * theta[1, 1]) + theta[1, 2]
        out = stack([tx.min(dim=-1).values, ty.min(dim=-1).values, tx.max(dim=-1).values, ty.max(dim=-1).values],
                    dim=-1)
        if expand:
            cx = as_tensor([0.0, 0.0, float(w), float(w)], dtype=x.dtype)
            cy = as_tensor([0.0, float(h), float(h), 0.0], dtype=x.dtype)
            shift_x = ((cx * theta[0, 0] + cy * theta[0, 1]) + theta[0, 2]).min()
            shift_y = ((cx * theta[1, 0] + cy * theta[1, 1]) + theta[1, 2]).min()
            out = out - stack([shift_x, shift_y, shift_x, shift_y])
            inverse = _T.inverse_affine_matrix(c, float(angle), [float(t) for t in translate], scale, shear)
            new_w, new_h = _T.expanded_size(inverse, w, h)
            canvas = (new_h, new_w)
        out = _clamp(out, tv_tensors.BoundingBoxFormat.XYXY, canvas)
        return _from_xyxy(out, fmt).to(b.dtype), canvas
    return kernel


def get_size(inpt: ImageLike) -> list[int]:
    """[height, width] of an image, mask or PIL image (a box tensor's canvas size)."""
    if isinstance(inpt, tv_tensors.BoundingBoxes):
        return list(inpt.canvas_size)
    if _is_pil(inpt):
        return [inpt.height, inpt.width]
    return [int(inpt.shape[-2]), int(inpt.shape[-1])]


# ---------------------------------------------------------------- conversion
def to_image(inpt: ImageLike) -> tv_tensors.Image:
    """A ``tv_tensors.Image`` (C, H, W) of a PIL image, a numpy (H, W, C) array or a tensor."""
    if isinstance(inpt, np.ndarray):
        arr = inpt[:, :, None] if inpt.ndim == 2 else inpt
        return tv_tensors.Image(from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1))))
    if _is_pil(inpt):
        return tv_tensors.Image(pil_to_tensor(inpt))
    if isinstance(inpt, Tensor):
        return tv_tensors.Image(_plain(inpt))
    raise TypeError(f"to_image: expected a Tensor, PIL image or ndarray, got {type(inpt).__name__}")


def _to_dtype_image(image: Tensor, dtype, scale: bool) -> Tensor:
    if image.dtype == dtype:
        return image
    if not scale:
        return image.to(dtype)
    if image.is_floating_point():
        if dtype.is_floating_point:
            return image.to(dtype)
        return image.mul(_T.max_value(dtype) + 1.0 - 1e-3).to(dtype)
    if dtype.is_floating_point:
        return image.to(dtype).mul(1.0 / _T.max_value(image.dtype))
    bits = {uint8: 8}.get(image.dtype, 15)
    out_bits = {uint8: 8}.get(dtype, 15)
    if bits > out_bits:
        return image.bitwise_right_shift(bits - out_bits).to(dtype)
    return image.to(dtype).bitwise_left_shift(out_bits - bits)


def to_dtype(inpt: ImageLike, dtype=float32, scale: bool = False) -> ImageLike:
    """``inpt`` as ``dtype``; with ``scale`` an image's integer [0, max] and float [0, 1] ranges map onto each
    other (masks and boxes are only cast)."""
    if isinstance(inpt, (tv_tensors.Mask, tv_tensors.BoundingBoxes)):
        return _rewrap(_plain(inpt).to(dtype), inpt)
    return _rewrap(_to_dtype_image(_plain(inpt), dtype, scale), inpt)


def convert_image_dtype(image: Tensor, dtype=float32) -> Tensor:
    return to_dtype(image, dtype, scale=True)


def normalize(inpt: ImageLike, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> ImageLike:
    def kernel(img: Tensor) -> Tensor:
        if not img.is_floating_point():
            raise TypeError(f"normalize: input tensor should be a float tensor, got {img.dtype}")
        return _v1.normalize(img, mean, std, inplace)
    return _color("normalize", inpt, kernel)


# ---------------------------------------------------------------- geometry
def _resize_image(img: Tensor, size: tuple[int, int], interpolation: str, antialias: bool) -> Tensor:
    if img.dtype == uint8 and (interpolation == "bilinear" or (interpolation == "bicubic" and antialias)):
        arr = resize_uint8(img.detach().cpu().numpy(), size, interpolation, antialias)
        return as_tensor(arr, device=img.device)
    return _T.resize(img, size, interpolation, antialias and interpolation in ("bilinear", "bicubic"))


def resize(inpt: ImageLike, size, interpolation=InterpolationMode.BILINEAR, max_size: int | None = None,
           antialias: bool | None = True) -> ImageLike:
    """Resize to (h, w), or the shorter side to ``size``; uint8 tensors as PyTorch's integer kernel does."""
    mode = _mode(interpolation)

    def out_size(h: int, w: int) -> tuple[int, int]:
        pair = _T.normalize_size(size) if size is not None else None
        if pair is not None:
            return pair
        if size is None:
            scale = max_size / max(h, w)
            return int(h * scale), int(w * scale)
        return _T.shorter_side_size(h, w, size if isinstance(size, int) else int(size[0]), max_size)

    def tensor_kernel(img: Tensor, m: str = mode) -> Tensor:
        new = out_size(*img.shape[-2:])
        return img if tuple(new) == tuple(img.shape[-2:]) else _resize_image(img, new, m, bool(antialias))

    def pil_kernel(img):
        new = out_size(img.height, img.width)
        return img if tuple(new) == (img.height, img.width) else _pil().resize(img, new, mode)

    def box_kernel(b: Tensor, fmt, canvas):
        new = out_size(*canvas)
        if tuple(new) == tuple(canvas):
            return b, canvas
        ratio = as_tensor([new[1] / canvas[1], new[0] / canvas[0]] * 2, dtype=float32, device=b.device)
        return b.mul(ratio).to(b.dtype), new
    return _geometry("resize", inpt, tensor_kernel, pil_kernel, lambda m: tensor_kernel(m, "nearest"), box_kernel)


def crop(inpt: ImageLike, top: int, left: int, height: int, width: int) -> ImageLike:
    return _geometry("crop", inpt, lambda t: _T.crop(t, top, left, height, width),
                     lambda p: _pil().crop(p, top, left, height, width),
                     box_kernel=_crop_boxes(top, left, height, width))


def center_crop(inpt: ImageLike, output_size) -> ImageLike:
    def box_kernel(b: Tensor, fmt, canvas):
        ch, cw = _v1._pair("center_crop", output_size)
        top, left = int(round((canvas[0] - ch) / 2.0)), int(round((canvas[1] - cw) / 2.0))
        return _crop_boxes(top, left, ch, cw)(b, fmt, canvas)
    return _geometry("center_crop", inpt, lambda t: _v1.center_crop(t, output_size),
                     lambda p: _v1.center_crop(p, output_size), box_kernel=box_kernel)


def resized_crop(inpt: ImageLike, top: int, left: int, height: int, width: int, size,
                 interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True) -> ImageLike:
    return resize(crop(inpt, top, left, height, width), size, interpolation, antialias=antialias)


def pad(inpt: ImageLike, padding, fill=0, padding_mode: str = "constant") -> ImageLike:
    fill = 0 if fill is None else fill
    return _geometry("pad", inpt, lambda t: _v1.pad(t, padding, fill, padding_mode),
                     lambda p: _v1.pad(p, padding, fill, padding_mode), box_kernel=_pad_boxes(padding))


def _flip_boxes(axis: int):
    """Mirror along x (axis 0) or y (1) in the boxes' own format, as -(coordinate - size) (-0.0 at an edge)."""
    def kernel(b: Tensor, fmt, canvas):
        size = canvas[1] if axis == 0 else canvas[0]
        cols = list(b.unbind(-1))
        if fmt == tv_tensors.BoundingBoxFormat.XYXY:
            cols[axis], cols[axis + 2] = -(cols[axis + 2] - size), -(cols[axis] - size)
        elif fmt == tv_tensors.BoundingBoxFormat.XYWH:
            cols[axis] = -(cols[axis] + cols[axis + 2] - size)
        else:
            cols[axis] = -(cols[axis] - size)
        return stack(cols, dim=-1), canvas
    return kernel


def hflip(inpt: ImageLike) -> ImageLike:
    return _geometry("hflip", inpt, lambda t: t.flip(-1), lambda p: _pil().hflip(p), box_kernel=_flip_boxes(0))


def vflip(inpt: ImageLike) -> ImageLike:
    return _geometry("vflip", inpt, lambda t: t.flip(-2), lambda p: _pil().vflip(p), box_kernel=_flip_boxes(1))


horizontal_flip, vertical_flip = hflip, vflip


def _fill_arg(fill):
    if fill is None or isinstance(fill, (int, float)):
        return fill
    return [float(v) for v in fill]


def _center_offset(h: int, w: int, center) -> list[float]:
    return [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [w, h])]


def rotate(inpt: ImageLike, angle: float, interpolation=InterpolationMode.NEAREST, expand: bool = False,
           center: Sequence[float] | None = None, fill=None) -> ImageLike:
    """Rotate counter-clockwise by ``angle`` degrees; quarter turns without a centre are exact transposes."""
    mode, fill = _mode(interpolation), _fill_arg(fill)

    def kernel(img: Tensor, m: str = mode) -> Tensor:
        a = angle % 360
        if center is None:
            if a == 0:
                return img.clone()
            if a == 180:
                return img.rot90(2, dims=(-2, -1))
            if (expand or img.shape[-1] == img.shape[-2]) and a in (90, 270):
                return img.rot90(1 if a == 90 else 3, dims=(-2, -1))
        h, w = img.shape[-2:]
        matrix = _T.inverse_affine_matrix(_center_offset(h, w, center), -a, [0.0, 0.0], 1.0, [0.0, 0.0])
        size = _T.expanded_size(matrix, w, h) if expand else (w, h)
        return _T.affine(img, matrix, m, fill, out_size=size)
    return _geometry("rotate", inpt, kernel, lambda p: _pil().rotate(p, angle, mode, expand, center, fill),
                     lambda t: kernel(t, "nearest"), _affine_boxes(-angle, [0.0, 0.0], 1.0, [0.0, 0.0], center, expand))


def affine(inpt: ImageLike, angle: float, translate: Sequence[float], scale: float, shear,
           interpolation=InterpolationMode.NEAREST, fill=None, center: Sequence[float] | None = None) -> ImageLike:
    """Rotate, scale and shear about the centre, then translate."""
    mode, fill = _mode(interpolation), _fill_arg(fill)
    shear = _v1._shear_pair(shear)
    if scale <= 0.0:
        raise ValueError("affine: scale should be positive")

    def kernel(img: Tensor, m: str = mode) -> Tensor:
        h, w = img.shape[-2:]
        matrix = _T.inverse_affine_matrix(_center_offset(h, w, center), float(angle), [float(t) for t in translate],
                                          scale, shear)
        return _T.affine(img, matrix, m, fill)

    def pil_kernel(img):
        c = [img.width * 0.5, img.height * 0.5] if center is None else list(center)
        matrix = _T.inverse_affine_matrix(c, float(angle), list(translate), scale, shear)
        return _pil().affine(img, matrix, mode, fill)
    return _geometry("affine", inpt, kernel, pil_kernel, lambda t: kernel(t, "nearest"),
                     _affine_boxes(angle, translate, scale, shear, center))


def perspective(inpt: ImageLike, startpoints, endpoints, interpolation=InterpolationMode.BILINEAR, fill=None,
                coefficients: Sequence[float] | None = None) -> ImageLike:
    mode, fill = _mode(interpolation), _fill_arg(fill)
    coeffs = list(coefficients) if coefficients is not None else perspective_coeffs(startpoints, endpoints)
    return _geometry("perspective", inpt, lambda t: _T.perspective(t, coeffs, mode, fill),
                     lambda p: _pil().perspective(p, coeffs, mode, fill),
                     lambda t: _T.perspective(t, coeffs, "nearest", fill))


def elastic(inpt: ImageLike, displacement: Tensor, interpolation=InterpolationMode.BILINEAR, fill=None) -> ImageLike:
    """Move each pixel by ``displacement`` (1, H, W, 2); PIL images go through a uint8 tensor."""
    mode, fill = _mode(interpolation), _fill_arg(fill)

    def pil_kernel(img):
        return to_pil_image(_T.elastic(pil_to_tensor(img), displacement, mode, fill), mode=img.mode)
    return _geometry("elastic", inpt, lambda t: _T.elastic(t, displacement, mode, fill), pil_kernel,
                     lambda t: _T.elastic(t, displacement, "nearest", fill))


elastic_transform = elastic


def five_crop(inpt: ImageLike, size) -> tuple:
    return _v1.five_crop(inpt, size)


def ten_crop(inpt: ImageLike, size, vertical_flip: bool = False) -> tuple:
    return five_crop(inpt, size) + five_crop(vflip(inpt) if vertical_flip else hflip(inpt), size)


# ---------------------------------------------------------------- colour
def _gray(img: Tensor) -> Tensor:
    """0.2989 r + 0.587 g + 0.114 b in float, two fused multiply-adds as PyTorch's ``add_(alpha=)`` does."""
    r, g, b = (img if img.is_floating_point() else img.to(float32)).unbind(dim=-3)
    return _T.fma_add(_T.fma_add(r.mul(0.2989), g, 0.587), b, 0.114).unsqueeze(-3)


def _blend(img1: Tensor, img2, ratio: float) -> Tensor:
    x = img1 if img1.is_floating_point() else img1.to(float32)
    out = _T.fma_add(x.mul(ratio), img2, 1.0 - ratio).clamp(0, _T.max_value(img1.dtype))
    return out if img1.is_floating_point() else out.to(img1.dtype)


def _check_factor(fn: str, factor: float) -> None:
    if factor < 0:
        raise ValueError(f"{fn}: factor ({factor}) is not non-negative")


def rgb_to_grayscale(inpt: ImageLike, num_output_channels: int = 1) -> ImageLike:
    def kernel(img: Tensor) -> Tensor:
        if img.shape[-3] == 1:
            return img.clone() if num_output_channels == 1 else img.repeat(*[1] * (img.ndim - 3), 3, 1, 1)
        gray = _gray(img).to(img.dtype)
        return gray.expand(img.shape) if num_output_channels == 3 else gray
    return _color("rgb_to_grayscale", inpt, kernel, lambda p: _pil().to_grayscale(p, num_output_channels))


to_grayscale = rgb_to_grayscale


def _gray_to_rgb(t: Tensor) -> Tensor:
    """Three channels from one; three or more stay as they are; two fail as torchvision's unpacking does."""
    channels = t.shape[-3]
    if channels >= 3:
        return t
    if channels != 1:
        raise ValueError(f"not enough values to unpack (expected 3, got {channels})")
    return t.repeat(*[1] * (t.ndim - 3), 3, 1, 1)


def grayscale_to_rgb(inpt: ImageLike) -> ImageLike:
    return _color("grayscale_to_rgb", inpt, _gray_to_rgb, lambda p: p.convert("RGB"))


def permute_channels(inpt: ImageLike, permutation: list[int]) -> ImageLike:
    """The channels reordered: output channel k is input channel ``permutation[k]``."""
    return _color("permute_channels", inpt, lambda t: t[..., list(permutation), :, :],
                  lambda p: to_pil_image(pil_to_tensor(p)[list(permutation)], mode=p.mode))


def adjust_brightness(inpt: ImageLike, brightness_factor: float) -> ImageLike:
    _check_factor("adjust_brightness", brightness_factor)

    def kernel(img: Tensor) -> Tensor:
        out = img.mul(brightness_factor).clamp(0, _T.max_value(img.dtype))
        return out if img.is_floating_point() else out.to(img.dtype)
    return _color("adjust_brightness", inpt, kernel, lambda p: _pil().adjust_brightness(p, brightness_factor))


def adjust_saturation(inpt: ImageLike, saturation_factor: float) -> ImageLike:
    _check_factor("adjust_saturation", saturation_factor)

    def kernel(img: Tensor) -> Tensor:
        if img.shape[-3] == 1:
            return img
        gray = _gray(img)
        return _blend(img, gray if img.is_floating_point() else gray.floor(), saturation_factor)
    return _color("adjust_saturation", inpt, kernel, lambda p: _pil().adjust_saturation(p, saturation_factor))


def adjust_contrast(inpt: ImageLike, contrast_factor: float) -> ImageLike:
    _check_factor("adjust_contrast", contrast_factor)

    def kernel(img: Tensor) -> Tensor:
        fp = img.is_floating_point()
        if img.shape[-3] == 3:
            gray = _gray(img) if fp else _gray(img).floor()
        else:
            gray = img if fp else img.to(float32)
        return _blend(img, gray.mean(dim=(-3, -2, -1), keepdim=True), contrast_factor)
    return _color("adjust_contrast", inpt, kernel, lambda p: _pil().adjust_contrast(p, contrast_factor))


def _rgb_to_hsv(img: Tensor) -> Tensor:
    r, g, _ = img.unbind(dim=-3)
    maxc = img.max(dim=-3).values
    minc = img.min(dim=-3).values
    eqc = maxc == minc
    rng = maxc - minc
    one = ones((), dtype=img.dtype)
    s = rng / where(eqc, one, maxc)
    div = where(eqc, one, rng).unsqueeze(-3)
    rc, gc, bc = ((maxc.unsqueeze(-3) - img) / div).unbind(dim=-3)
    neq_r, eq_g = maxc != r, maxc == g
    hg = (rc + 2.0 - bc) * (eq_g & neq_r)
    hr = (bc - gc) * ~neq_r
    hb = (gc + 4.0 - rc) * (neq_r & ~eq_g)
    h = ((hr + hg + hb) * (1.0 / 6.0) + 1.0).fmod(1.0)
    return stack([h, s, maxc], dim=-3)


def _hsv_to_rgb(img: Tensor) -> Tensor:
    h, s, v = img.unbind(dim=-3)
    h6 = h * 6
    i = h6.floor()
    f = h6 - i
    i = i.to(int32)
    sxf = s * f
    one_minus_s = 1.0 - s
    q = ((1.0 - sxf) * v).clamp(0.0, 1.0)
    t = ((sxf + one_minus_s) * v).clamp(0.0, 1.0)
    p = (one_minus_s * v).clamp(0.0, 1.0)
    i = i.remainder(6)
    vpqt = stack([v, p, q, t], dim=-3)
    select = as_tensor([[0, 2, 1, 1, 3, 0], [3, 0, 0, 2, 1, 1], [1, 1, 3, 0, 0, 2]])[:, i.long()]
    if select.ndim > 3:
        select = select.movedim(0, -3)
    return vpqt.gather(-3, select)


def adjust_hue(inpt: ImageLike, hue_factor: float) -> ImageLike:
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"adjust_hue: hue_factor ({hue_factor}) is not in [-0.5, 0.5]")

    def kernel(img: Tensor) -> Tensor:
        if img.shape[-3] == 1 or img.numel() == 0:
            return img
        hsv = _rgb_to_hsv(_to_dtype_image(img, float32, True))
        h, s, v = hsv.unbind(dim=-3)
        out = _hsv_to_rgb(stack([(h + hue_factor).remainder(1.0), s, v], dim=-3))
        return _to_dtype_image(out, img.dtype, True)
    return _color("adjust_hue", inpt, kernel, lambda p: _pil().adjust_hue(p, hue_factor))


def adjust_gamma(inpt: ImageLike, gamma: float, gain: float = 1.0) -> ImageLike:
    if gamma < 0:
        raise ValueError("adjust_gamma: gamma should be a non-negative real number")

    def kernel(img: Tensor) -> Tensor:
        out = _to_dtype_image(img, float32, True).pow(gamma) if not img.is_floating_point() else img.pow(gamma)
        if gain != 1.0:
            out = (out * gain).clamp(0.0, 1.0)
        return _to_dtype_image(out, img.dtype, True)

    def pil_kernel(img):
        lut = [int((255 + 1 - 1e-3) * gain * pow(e / 255.0, gamma)) for e in range(256)] * 3
        return img.convert("RGB").point(lut).convert(img.mode)
    return _color("adjust_gamma", inpt, kernel, pil_kernel)


def adjust_sharpness(inpt: ImageLike, sharpness_factor: float) -> ImageLike:
    _check_factor("adjust_sharpness", sharpness_factor)
    return _color("adjust_sharpness", inpt, lambda t: _T.adjust_sharpness(t, sharpness_factor),
                  lambda p: _pil().adjust_sharpness(p, sharpness_factor))


def posterize(inpt: ImageLike, bits: int) -> ImageLike:
    if not isinstance(bits, int) or not 0 <= bits <= 8:
        raise TypeError(f"posterize: bits must be an integer in [0, 8], got {bits}")
    return _color("posterize", inpt, lambda t: _T.posterize(t, bits), lambda p: _pil().posterize(p, bits))


def solarize(inpt: ImageLike, threshold: float) -> ImageLike:
    def kernel(img: Tensor) -> Tensor:
        if threshold > _T.max_value(img.dtype):
            raise TypeError(f"solarize: threshold should be at most the dtype's maximum, got {threshold}")
        return _T.solarize(img, threshold)
    return _color("solarize", inpt, kernel, lambda p: _pil().solarize(p, threshold))


def autocontrast(inpt: ImageLike) -> ImageLike:
    return _color("autocontrast", inpt, lambda t: _T.autocontrast(t), lambda p: _pil().autocontrast(p))


def equalize(inpt: ImageLike) -> ImageLike:
    def kernel(img: Tensor) -> Tensor:
        return _to_dtype_image(_T.equalize(_to_dtype_image(img, uint8, True)), img.dtype, True)
    return _color("equalize", inpt, kernel, lambda p: _pil().equalize(p))


def invert(inpt: ImageLike) -> ImageLike:
    return _color("invert", inpt, _T.invert, lambda p: _pil().invert(p))


def gaussian_blur(inpt: ImageLike, kernel_size, sigma=None) -> ImageLike:
    ks, sg = _v1._blur_args(kernel_size, sigma)
    return _color("gaussian_blur", inpt, lambda t: _T.gaussian_blur(t, ks, sg),
                  lambda p: to_pil_image(_T.gaussian_blur(pil_to_tensor(p), ks, sg), mode=p.mode))


def gaussian_noise(inpt: ImageLike, mean: float = 0.0, sigma: float = 0.1, clip: bool = True) -> ImageLike:
    """Add N(mean, sigma) noise (in [0, 1] units; uint8 images get it scaled by 255 and truncated to int16)."""
    if sigma < 0:
        raise ValueError(f"sigma shouldn't be negative. Got {sigma}")

    def kernel(img: Tensor) -> Tensor:
        if img.is_floating_point():
            out = img + (mean + randn_like(img) * sigma)
            return out.clamp(0, 1) if clip else out
        if img.dtype != uint8:
            raise ValueError(f"Input tensor is expected to be in uint8 or float dtype, got dtype={img.dtype}")
        noise = (mean * 255 + randn_like(img, dtype=float32) * (sigma * 255)).to(int16)
        out = img + noise
        return (out.clamp(0, 255) if clip else out).to(uint8)

    def pil_kernel(img):
        raise ValueError("Gaussian Noise is not implemented for PIL images.")
    return _color("gaussian_noise", inpt, kernel, pil_kernel)


def erase(inpt: ImageLike, i: int, j: int, h: int, w: int, v: Tensor, inplace: bool = False) -> ImageLike:
    return _color("erase", inpt, lambda t: _T.erase(t, i, j, h, w, v, inplace),
                  lambda p: to_pil_image(_T.erase(pil_to_tensor(p), i, j, h, w, v), mode=p.mode))


def is_pure_tensor(inpt) -> bool:
    """A Tensor that is no tv_tensor."""
    return isinstance(inpt, Tensor) and not isinstance(inpt, tv_tensors.TVTensor)


def get_num_channels(inpt: ImageLike) -> int:
    return get_image_num_channels(inpt)


def sanitize_bounding_boxes(bounding_boxes: tv_tensors.BoundingBoxes, min_size: float = 1.0,
                            min_area: float = 1.0) -> tuple[tv_tensors.BoundingBoxes, Tensor]:
    """The boxes at least ``min_size`` wide and high, of ``min_area``, inside the canvas; and that mask."""
    xyxy = _to_xyxy(_plain(bounding_boxes), bounding_boxes.format)
    h, w = bounding_boxes.canvas_size
    ws, hs = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    valid = (ws >= min_size) & (hs >= min_size) & (xyxy >= 0).all(dim=-1) & (ws * hs >= min_area)
    valid = valid & (xyxy[:, 0] <= w) & (xyxy[:, 2] <= w) & (xyxy[:, 1] <= h) & (xyxy[:, 3] <= h)
    return tv_tensors.wrap(_plain(bounding_boxes)[valid], like=bounding_boxes), valid


# torchvision's per-kind kernel names (``resize_image``, ``hflip_video``...): each dispatching function serves them
for _name in ("adjust_brightness", "adjust_contrast", "adjust_gamma", "adjust_hue", "adjust_saturation",
              "adjust_sharpness", "affine", "autocontrast", "center_crop", "crop", "elastic", "equalize", "erase",
              "five_crop", "gaussian_blur", "gaussian_noise", "horizontal_flip", "invert", "normalize", "pad",
              "permute_channels", "perspective", "posterize", "resize", "resized_crop", "rotate", "solarize",
              "ten_crop", "to_dtype", "vertical_flip", "get_dimensions", "get_size", "rgb_to_grayscale",
              "grayscale_to_rgb"):
    for _kind in ("image", "video", "mask"):
        globals()[f"{_name}_{_kind}"] = globals()[_name]
del _name, _kind

