"""torchvision.transforms.functional: each transform as a function of a PIL image or a tensor.

PIL images go to ``_pil`` (Pillow does the work), tensors to ``_tensor`` (Tensor ops, so the
result is differentiable where the operation is). Pillow is imported only when an image needs it.
"""
from __future__ import annotations

import enum
import numbers
import sys
from collections.abc import Sequence

import numpy as np

from ...base.dtype import float32, get_default_dtype, int16, int32, uint8
from ...core.creation import as_tensor, from_numpy
from ...core.tensor import Tensor
from . import _tensor as _T

__all__ = ["InterpolationMode", "to_tensor", "pil_to_tensor", "to_pil_image", "normalize", "resize", "crop",
           "center_crop", "resized_crop", "pad", "hflip", "vflip", "adjust_brightness", "adjust_contrast",
           "adjust_saturation", "adjust_hue", "rgb_to_grayscale", "to_grayscale", "get_dimensions",
           "get_image_size", "get_image_num_channels", "convert_image_dtype"]


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def _pil():
    from . import _pil as module   # imports Pillow
    return module


def _is_pil(img) -> bool:
    image = sys.modules.get("PIL.Image")   # an image exists only if Pillow was imported
    return image is not None and isinstance(img, image.Image)


def _check(fn: str, img) -> None:
    if not (_is_pil(img) or isinstance(img, Tensor)):
        raise TypeError(f"{fn}: img should be a PIL Image or a Tensor, got {type(img).__name__}")


def _mode(interpolation) -> str:
    return interpolation.value if isinstance(interpolation, InterpolationMode) else {
        0: "nearest", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming", 1: "lanczos"}.get(interpolation,
                                                                                          interpolation)


def get_dimensions(img) -> list[int]:
    """[channels, height, width]."""
    _check("get_dimensions", img)
    if _is_pil(img):
        return [_pil().channels(img), img.height, img.width]
    return [1 if img.dim() == 2 else int(img.shape[-3]), int(img.shape[-2]), int(img.shape[-1])]


def get_image_size(img) -> list[int]:
    """[width, height]."""
    _, h, w = get_dimensions(img)
    return [w, h]


def get_image_num_channels(img) -> int:
    return get_dimensions(img)[0]


def to_tensor(pic) -> Tensor:
    """A PIL image or an (H, W, C) ndarray -> a (C, H, W) tensor; uint8 values scaled to [0, 1]."""
    if not (_is_pil(pic) or isinstance(pic, np.ndarray)):
        raise TypeError(f"to_tensor: pic should be a PIL Image or ndarray, got {type(pic).__name__}")
    if isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"to_tensor: pic should be 2 or 3 dimensional, got {pic.ndim} dimensions")
        arr = pic[:, :, None] if pic.ndim == 2 else pic
        img = from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))
        return img.to(get_default_dtype()).div(255) if arr.dtype == np.uint8 else img
    arr = np.array(pic, dtype={"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8))
    if pic.mode == "1":
        arr = 255 * arr
    arr = arr.reshape(pic.height, pic.width, len(pic.getbands()))
    img = from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))
    return img.to(get_default_dtype()).div(255) if img.dtype == uint8 else img


def pil_to_tensor(pic) -> Tensor:
    """A PIL image -> a (C, H, W) tensor of its own dtype (no scaling)."""
    if not _is_pil(pic):
        raise TypeError(f"pil_to_tensor: pic should be a PIL Image, got {type(pic).__name__}")
    arr = np.array(pic, copy=True)
    arr = arr.reshape(pic.height, pic.width, len(pic.getbands()))
    return from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def to_pil_image(pic, mode: str | None = None):
    """A (C, H, W) tensor or an (H, W, C) ndarray -> a PIL image; floats are scaled by 255 first."""
    Image = sys.modules.get("PIL.Image") or __import__("PIL.Image", fromlist=["Image"])
    if isinstance(pic, Tensor):
        if pic.dim() not in (2, 3):
            raise ValueError(f"to_pil_image: pic should be 2/3 dimensional, got {pic.dim()} dimensions")
        if pic.dim() == 2:
            pic = pic.unsqueeze(0)
        if pic.is_floating_point() and mode != "F":
            pic = pic.mul(255).byte()
        arr = pic.detach().cpu().numpy().transpose(1, 2, 0)
    elif isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"to_pil_image: pic should be 2/3 dimensional, got {pic.ndim} dimensions")
        arr = pic[:, :, None] if pic.ndim == 2 else pic
    else:
        raise TypeError(f"to_pil_image: pic should be a Tensor or ndarray, got {type(pic).__name__}")
    if arr.shape[-1] == 1:
        arr = arr[:, :, 0]
        expected = {np.dtype(np.uint8): "L", np.dtype(np.int16): "I;16", np.dtype(np.int32): "I",
                    np.dtype(np.float32): "F"}.get(arr.dtype)
        if mode is not None and mode != expected and not (mode == "L" and arr.dtype == np.uint8):
            raise ValueError(f"to_pil_image: incorrect mode ({mode}) supplied for input type {arr.dtype}")
        if expected is None:
            raise TypeError(f"to_pil_image: input type {arr.dtype} is not supported")
        image = Image.fromarray(arr.astype(np.uint16) if expected == "I;16" else arr)
        return image if expected != "I;16" else image.convert("I;16")
    modes = {2: "LA", 3: "RGB", 4: "RGBA"}
    if arr.shape[-1] not in modes:
        raise ValueError(f"to_pil_image: pic should not have > 4 channels, got {arr.shape[-1]} channels")
    if arr.dtype != np.uint8:
        raise TypeError(f"to_pil_image: {arr.shape[-1]}-channel input should be uint8, got {arr.dtype}")
    image = Image.fromarray(np.ascontiguousarray(arr))
    want = mode or modes[arr.shape[-1]]
    return image if image.mode == want else image.convert(want)


def normalize(tensor: Tensor, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> Tensor:
    """(tensor - mean) / std per channel of a (..., C, H, W) float tensor."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"normalize: img should be a Tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        raise TypeError(f"normalize: input tensor should be a float tensor, got {tensor.dtype}")
    mean_t = as_tensor(mean, dtype=tensor.dtype, device=tensor.device)
    std_t = as_tensor(std, dtype=tensor.dtype, device=tensor.device)
    if (std_t == 0).any():
        raise ValueError(f"normalize: std evaluated to zero after conversion to {tensor.dtype}, "
                         f"leading to division by zero")
    mean_t = mean_t.view(-1, 1, 1) if mean_t.dim() == 1 else mean_t
    std_t = std_t.view(-1, 1, 1) if std_t.dim() == 1 else std_t
    if inplace:
        return tensor.sub_(mean_t).div_(std_t)
    return (tensor - mean_t) / std_t


def _output_size(img, size, max_size) -> tuple[int, int]:
    _, h, w = get_dimensions(img)
    pair = _T.normalize_size(size)
    if pair is not None:
        if max_size is not None:
            raise ValueError("resize: max_size should only be passed if size specifies the length of the smaller edge")
        return pair
    return _T.shorter_side_size(h, w, size if isinstance(size, int) else int(size[0]), max_size)


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size: int | None = None,
           antialias: bool | None = True):
    """Resize to (h, w), or scale the shorter side to ``size`` when it is an int."""
    _check("resize", img)
    out = _output_size(img, size, max_size)
    if list(out) == get_dimensions(img)[1:]:
        return img
    if _is_pil(img):
        return _pil().resize(img, out, _mode(interpolation))
    return _T.resize(img, out, _mode(interpolation), bool(antialias))


def crop(img, top: int, left: int, height: int, width: int):
    _check("crop", img)
    if _is_pil(img):
        return _pil().crop(img, top, left, height, width)
    return _T.crop(img, top, left, height, width)


def _pair(fn: str, size) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return int(size[0]), int(size[0])
    if isinstance(size, Sequence) and len(size) == 2:
        return int(size[0]), int(size[1])
    raise ValueError(f"{fn}: please provide only two dimensions (h, w) for size, got {size!r}")


def center_crop(img, output_size):
    """Crop the centre; pads with zeros first when the crop is larger than the image."""
    _check("center_crop", img)
    ch, cw = _pair("center_crop", output_size)
    _, h, w = get_dimensions(img)
    if cw > w or ch > h:
        ltrb = ((cw - w) // 2 if cw > w else 0, (ch - h) // 2 if ch > h else 0,
                (cw - w + 1) // 2 if cw > w else 0, (ch - h + 1) // 2 if ch > h else 0)
        img = pad(img, list(ltrb), fill=0)
        _, h, w = get_dimensions(img)
        if cw == w and ch == h:
            return img
    return crop(img, int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0)), ch, cw)


def resized_crop(img, top: int, left: int, height: int, width: int, size,
                 interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True):
    return resize(crop(img, top, left, height, width), size, interpolation, antialias=antialias)


def _ltrb(padding) -> tuple[int, int, int, int]:
    if isinstance(padding, int):
        return padding, padding, padding, padding
    padding = list(padding)
    if len(padding) == 1:
        return padding[0], padding[0], padding[0], padding[0]
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return tuple(padding)
    raise ValueError(f"pad: padding must be an int or a 1, 2, or 4 element sequence, got {len(padding)} elements")


def pad(img, padding, fill=0, padding_mode: str = "constant"):
    """Pad by an int (all sides), (left/right, top/bottom) or (left, top, right, bottom)."""
    _check("pad", img)
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError(f"pad: padding_mode should be constant, edge, reflect or symmetric, got {padding_mode!r}")
    if _is_pil(img):
        return _pil().pad(img, _ltrb(padding), fill, padding_mode)
    return _T.pad(img, _ltrb(padding), fill, padding_mode)


def hflip(img):
    _check("hflip", img)
    return _pil().hflip(img) if _is_pil(img) else img.flip(-1)


def vflip(img):
    _check("vflip", img)
    return _pil().vflip(img) if _is_pil(img) else img.flip(-2)


def _factor(fn: str, factor: float) -> None:
    if factor < 0:
        raise ValueError(f"{fn}: factor ({factor}) is not non-negative")


def _adjust(fn: str, img, factor: float):
    """A colour adjustment by a non-negative factor: Pillow's for PIL images, tapelab ops for tensors."""
    _check(fn, img)
    _factor(fn, factor)
    return getattr(_pil() if _is_pil(img) else _T, fn)(img, factor)


def adjust_brightness(img, brightness_factor: float):
    return _adjust("adjust_brightness", img, brightness_factor)


def adjust_contrast(img, contrast_factor: float):
    return _adjust("adjust_contrast", img, contrast_factor)


def adjust_saturation(img, saturation_factor: float):
    return _adjust("adjust_saturation", img, saturation_factor)


def adjust_hue(img, hue_factor: float):
    _check("adjust_hue", img)
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"adjust_hue: hue_factor ({hue_factor}) is not in [-0.5, 0.5]")
    if _is_pil(img):
        return _pil().adjust_hue(img, hue_factor)
    return _T.adjust_hue(img, hue_factor)


def rgb_to_grayscale(img, num_output_channels: int = 1):
    _check("rgb_to_grayscale", img)
    if num_output_channels not in (1, 3):
        raise ValueError(f"rgb_to_grayscale: num_output_channels should be either 1 or 3, got {num_output_channels}")
    if _is_pil(img):
        return _pil().to_grayscale(img, num_output_channels)
    return _T.rgb_to_grayscale(img, num_output_channels)


def to_grayscale(img, num_output_channels: int = 1):
    if not _is_pil(img):
        raise TypeError(f"to_grayscale: img should be a PIL Image, got {type(img).__name__}")
    return rgb_to_grayscale(img, num_output_channels)


def convert_image_dtype(image: Tensor, dtype=float32) -> Tensor:
    """Convert between integer [0, max] and float [0, 1] image tensors."""
    if image.dtype == dtype:
        return image
    if image.is_floating_point():
        if dtype.is_floating_point:
            return image.to(dtype)
        bound = {uint8: 255, int16: 32767, int32: 2147483647}[dtype]
        return image.mul(bound + 1.0 - 0.001).to(dtype)
    in_max = {uint8: 255, int16: 32767, int32: 2147483647}[image.dtype]
    if dtype.is_floating_point:
        return image.to(dtype).div(in_max)
    raise ValueError(f"convert_image_dtype: integer to integer conversion ({image.dtype} -> {dtype}) is not supported")


def _interp(interpolation) -> str:
    return _mode(interpolation)


def _tensor_fill(img: Tensor, fill):
    """v1's fill for a tensor: None stays None (no mask channel), numbers become per-channel floats."""
    if fill is None:
        return None
    if isinstance(fill, (int, float)):
        return [float(fill)] * get_image_num_channels(img)
    return [float(f) for f in fill]


def _center_offset(img, center) -> list[float]:
    if center is None:
        return [0.0, 0.0]
    _, h, w = get_dimensions(img)
    return [1.0 * (c - s * 0.5) for c, s in zip(center, [w, h])]


def rotate(img, angle: float, interpolation=InterpolationMode.NEAREST, expand: bool = False,
           center: Sequence[int] | None = None, fill=None):
    """Rotate counter-clockwise by ``angle`` degrees about ``center`` (the image centre by default)."""
    _check("rotate", img)
    if _is_pil(img):
        return _pil().rotate(img, angle, _interp(interpolation), expand, center, fill)
    matrix = _T.inverse_affine_matrix(_center_offset(img, center), -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    h, w = img.shape[-2:]
    size = _T.expanded_size(matrix, w, h) if expand else (w, h)
    return _T.affine(img, matrix, _interp(interpolation), _tensor_fill(img, fill), v1_fill=True, out_size=size)


def _shear_pair(shear) -> list[float]:
    if isinstance(shear, numbers.Number):
        return [float(shear), 0.0]
    shear = [float(s) for s in shear]
    return shear * 2 if len(shear) == 1 else shear


def affine(img, angle: float, translate: Sequence[int], scale: float, shear, interpolation=InterpolationMode.NEAREST,
           fill=None, center: Sequence[int] | None = None):
    """Rotate, scale and shear about the centre, then translate (torchvision's parameterisation)."""
    _check("affine", img)
    shear = _shear_pair(shear)
    if scale <= 0.0:
        raise ValueError("affine: scale should be positive")
    if _is_pil(img):
        _, h, w = get_dimensions(img)
        c = [w * 0.5, h * 0.5] if center is None else list(center)
        matrix = _T.inverse_affine_matrix(c, float(angle), list(translate), scale, shear)
        return _pil().affine(img, matrix, _interp(interpolation), fill)
    matrix = _T.inverse_affine_matrix(_center_offset(img, center), float(angle), [1.0 * t for t in translate],
                                      scale, shear)
    return _T.affine(img, matrix, _interp(interpolation), _tensor_fill(img, fill), v1_fill=True)


def perspective_coeffs(startpoints: Sequence[Sequence[int]], endpoints: Sequence[Sequence[int]]) -> list[float]:
    """(a, b, c, d, e, f, g, h) mapping end points to start points, solved in float64, kept as float32."""
    a = np.zeros((8, 8))
    for i, (p1, p2) in enumerate(zip(endpoints, startpoints)):
        a[2 * i] = [p1[0], p1[1], 1, 0, 0, 0, -p2[0] * p1[0], -p2[0] * p1[1]]
        a[2 * i + 1] = [0, 0, 0, p1[0], p1[1], 1, -p2[1] * p1[0], -p2[1] * p1[1]]
    b = np.asarray(startpoints, dtype=np.float64).reshape(8)
    return np.linalg.lstsq(a, b, rcond=None)[0].astype(np.float32).tolist()


def perspective(img, startpoints, endpoints, interpolation=InterpolationMode.BILINEAR, fill=None):
    """Warp so that the four ``startpoints`` corners land on ``endpoints``."""
    _check("perspective", img)
    coeffs = perspective_coeffs(startpoints, endpoints)
    if _is_pil(img):
        return _pil().perspective(img, coeffs, _interp(interpolation), fill)
    return _T.perspective(img, coeffs, _interp(interpolation), _tensor_fill(img, fill), v1_fill=True)


def _blur_args(kernel_size, sigma) -> tuple[list[int], list[float]]:
    ks = [kernel_size, kernel_size] if isinstance(kernel_size, int) else list(kernel_size)
    if len(ks) == 1:
        ks = ks * 2
    if any(k % 2 == 0 or k < 0 for k in ks):
        raise ValueError(f"gaussian_blur: kernel_size should have odd and positive integers, got {kernel_size}")
    if sigma is None:
        sg = [k * 0.15 + 0.35 for k in ks]
    elif isinstance(sigma, (int, float)):
        sg = [float(sigma)] * 2
    else:
        sg = [float(s) for s in sigma]
        sg = sg * 2 if len(sg) == 1 else sg
    if any(s <= 0 for s in sg):
        raise ValueError(f"gaussian_blur: sigma should have positive values, got {sigma}")
    return ks, sg


def gaussian_blur(img, kernel_size, sigma=None):
    """Gaussian blur over reflect padding (PIL images go through a tensor, as torchvision's do)."""
    _check("gaussian_blur", img)
    ks, sg = _blur_args(kernel_size, sigma)
    if _is_pil(img):
        return to_pil_image(_T.gaussian_blur(pil_to_tensor(img), ks, sg, v1=True), mode=img.mode)
    return _T.gaussian_blur(img, ks, sg, v1=True)


def erase(img: Tensor, i: int, j: int, h: int, w: int, v: Tensor, inplace: bool = False) -> Tensor:
    """``img`` with the box (i, j, h, w) set to ``v``."""
    if not isinstance(img, Tensor):
        raise TypeError(f"erase: img should be a Tensor, got {type(img).__name__}")
    return _T.erase(img, i, j, h, w, v, inplace)


def _pixel_op(fn: str, img, *args):
    _check(fn, img)
    if _is_pil(img):
        return getattr(_pil(), fn)(img, *args)
    return getattr(_T, fn)(img, *args)


def posterize(img, bits: int):
    """Keep the ``bits`` high bits of each uint8 value."""
    if not 0 <= bits <= 8:
        raise ValueError(f"posterize: bits should be between 0 and 8, got {bits}")
    if isinstance(img, Tensor) and img.dtype != uint8:
        raise TypeError(f"posterize: only uint8 tensors are supported, got {img.dtype}")
    return _pixel_op("posterize", img, bits)


def solarize(img, threshold: float):
    """Invert the values at or above ``threshold``."""
    if isinstance(img, Tensor) and threshold > _T.max_value(img.dtype):
        raise TypeError("solarize: threshold should be less than bound of img.")
    return _pixel_op("solarize", img, threshold)


def invert(img):
    return _pixel_op("invert", img)


def equalize(img):
    """Histogram equalisation per channel (uint8)."""
    if isinstance(img, Tensor) and img.dtype != uint8:
        raise TypeError(f"equalize: only uint8 tensors are supported, got {img.dtype}")
    return _pixel_op("equalize", img)


def autocontrast(img):
    _check("autocontrast", img)
    return _pil().autocontrast(img) if _is_pil(img) else _T.autocontrast(img, v1=True)


def adjust_sharpness(img, sharpness_factor: float):
    _check("adjust_sharpness", img)
    _factor("adjust_sharpness", sharpness_factor)
    if _is_pil(img):
        return _pil().adjust_sharpness(img, sharpness_factor)
    return _T.adjust_sharpness(img, sharpness_factor, v1=True)


def adjust_gamma(img, gamma: float, gain: float = 1.0):
    """``gain * img ** gamma`` on [0, 1] values (integer images go through float32 and back)."""
    _check("adjust_gamma", img)
    if gamma < 0:
        raise ValueError("adjust_gamma: gamma should be a non-negative real number")
    if _is_pil(img):
        lut = [int((255 + 1 - 1e-3) * gain * pow(e / 255.0, gamma)) for e in range(256)] * 3
        return img.convert("RGB").point(lut).convert(img.mode)
    x = img if img.is_floating_point() else convert_image_dtype(img, float32)
    return convert_image_dtype((gain * x.pow(gamma)).clamp(0, 1), img.dtype)


def five_crop(img, size) -> tuple:
    """The four corner crops and the central crop."""
    ch, cw = _pair("five_crop", size)
    _, h, w = get_dimensions(img)
    if ch > h or cw > w:
        raise ValueError(f"five_crop: requested crop size {size} is bigger than input size {(h, w)}")
    return (crop(img, 0, 0, ch, cw), crop(img, 0, w - cw, ch, cw), crop(img, h - ch, 0, ch, cw),
            crop(img, h - ch, w - cw, ch, cw), center_crop(img, [ch, cw]))


def ten_crop(img, size, vertical_flip: bool = False) -> tuple:
    """``five_crop`` of the image and of its (horizontal, or vertical) mirror."""
    return five_crop(img, size) + five_crop(vflip(img) if vertical_flip else hflip(img), size)


__all__ += ["rotate", "affine", "perspective", "gaussian_blur", "erase", "posterize", "solarize", "invert",
            "equalize", "autocontrast", "adjust_sharpness", "adjust_gamma", "five_crop", "ten_crop"]


def elastic_transform(img, displacement: Tensor, interpolation=InterpolationMode.BILINEAR, fill=None):
    """Move each pixel by ``displacement`` (1, H, W, 2, in the [-1, 1] grid's units); PIL images go through
    a uint8 tensor."""
    _check("elastic_transform", img)
    t = pil_to_tensor(img) if _is_pil(img) else img
    if tuple(displacement.shape) != (1, *t.shape[-2:], 2):
        raise ValueError(f"elastic_transform: displacement shape should be {(1, *t.shape[-2:], 2)}, "
                         f"got {tuple(displacement.shape)}")
    out = _T.elastic(t, displacement, _interp(interpolation), fill, v1_fill=True)
    return to_pil_image(out, mode=img.mode) if _is_pil(img) else out


__all__ += ["elastic_transform"]
