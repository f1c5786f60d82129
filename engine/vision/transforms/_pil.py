"""The PIL side of ``transforms.functional``: each function takes and returns a PIL image.

Geometry and colour go through Pillow itself (``resize``, ``crop``, ``ImageEnhance``), so the
pixels are the ones torchvision produces from the same image; padding other than a constant
goes through ``numpy.pad``.
"""
from __future__ import annotations

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

# torchvision's InterpolationMode values -> Pillow's resampling filters
PIL_FILTERS = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC,
               "box": Image.BOX, "hamming": Image.HAMMING, "lanczos": Image.LANCZOS}


def channels(img: Image.Image) -> int:
    return len(img.getbands())


def resize(img: Image.Image, size: tuple[int, int], interpolation: str) -> Image.Image:
    if interpolation not in PIL_FILTERS:
        raise ValueError(f"resize: interpolation {interpolation!r} is not supported for PIL images; "
                         f"use one of {sorted(PIL_FILTERS)}")
    h, w = size
    return img.resize((w, h), PIL_FILTERS[interpolation])


def crop(img: Image.Image, top: int, left: int, height: int, width: int) -> Image.Image:
    return img.crop((left, top, left + width, top + height))


def pad(img: Image.Image, ltrb: tuple[int, int, int, int], fill, padding_mode: str) -> Image.Image:
    """Negative padding crops; constant padding is ``ImageOps.expand``, the others ``numpy.pad``."""
    if min(ltrb) < 0:
        left, top, right, bottom = (max(-v, 0) for v in ltrb)
        img = img.crop((left, top, img.width - right, img.height - bottom))
        ltrb = tuple(max(v, 0) for v in ltrb)
    left, top, right, bottom = ltrb
    if padding_mode == "constant":
        if isinstance(fill, (int, float)) and channels(img) > 1 and img.mode != "P":
            fill = (fill,) * channels(img)   # one number fills every band, as torchvision reads it
        out = ImageOps.expand(img, border=ltrb, fill=fill)
        if img.mode == "P":
            out.putpalette(img.getpalette())
        return out
    arr = np.asarray(img)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (arr.ndim - 2)
    return Image.fromarray(np.pad(arr, widths, mode=padding_mode))


def hflip(img: Image.Image) -> Image.Image:
    return img.transpose(Image.FLIP_LEFT_RIGHT)


def vflip(img: Image.Image) -> Image.Image:
    return img.transpose(Image.FLIP_TOP_BOTTOM)


def adjust_brightness(img: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Brightness(img).enhance(factor)


def adjust_contrast(img: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Contrast(img).enhance(factor)


def adjust_saturation(img: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Color(img).enhance(factor)


def adjust_hue(img: Image.Image, hue_factor: float) -> Image.Image:
    """Rotate the hue channel in HSV space by ``hue_factor`` of a turn (uint8 wrap-around)."""
    mode = img.mode
    if mode in {"L", "1", "I", "F"}:
        return img
    h, s, v = img.convert("HSV").split()
    shifted = (np.asarray(h, dtype=np.int64) + int(hue_factor * 255)) % 256
    h = Image.fromarray(shifted.astype(np.uint8))
    return Image.merge("HSV", (h, s, v)).convert(mode)


def to_grayscale(img: Image.Image, num_output_channels: int) -> Image.Image:
    gray = img.convert("L")
    if num_output_channels == 1:
        return gray
    if num_output_channels == 3:
        return Image.fromarray(np.dstack([np.asarray(gray)] * 3))
    raise ValueError(f"to_grayscale: num_output_channels should be 1 or 3, got {num_output_channels}")


def fill_option(img: Image.Image, fill) -> dict:
    """Pillow's ``fillcolor`` from torchvision's fill (None is black; one number fills every band)."""
    bands = channels(img)
    fill = 0 if fill is None else fill
    if isinstance(fill, (int, float)) and bands > 1:
        fill = (fill,) * bands
    if isinstance(fill, (list, tuple)):
        if len(fill) == 1:
            fill = tuple(fill) * bands
        elif len(fill) != bands:
            raise ValueError(f"fill: the number of elements ({len(fill)}) does not match the image's {bands} bands")
        fill = tuple(fill)
    if img.mode != "F":
        fill = tuple(int(v) for v in fill) if isinstance(fill, tuple) else int(fill)
    return {"fillcolor": fill}


def rotate(img: Image.Image, angle: float, interpolation: str, expand: bool, center, fill) -> Image.Image:
    return img.rotate(angle, PIL_FILTERS[interpolation], expand, center, **fill_option(img, fill))


def affine(img: Image.Image, matrix: list[float], interpolation: str, fill) -> Image.Image:
    return img.transform(img.size, Image.AFFINE, matrix, PIL_FILTERS[interpolation], **fill_option(img, fill))


def perspective(img: Image.Image, coeffs: list[float], interpolation: str, fill) -> Image.Image:
    return img.transform(img.size, Image.PERSPECTIVE, coeffs, PIL_FILTERS[interpolation], **fill_option(img, fill))


def adjust_sharpness(img: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Sharpness(img).enhance(factor)


def posterize(img: Image.Image, bits: int) -> Image.Image:
    return ImageOps.posterize(img, bits)


def solarize(img: Image.Image, threshold: float) -> Image.Image:
    return ImageOps.solarize(img, threshold)


def autocontrast(img: Image.Image) -> Image.Image:
    return ImageOps.autocontrast(img)


def equalize(img: Image.Image) -> Image.Image:
    return ImageOps.equalize(img)


def invert(img: Image.Image) -> Image.Image:
    return ImageOps.invert(img)
