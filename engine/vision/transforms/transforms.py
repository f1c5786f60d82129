"""torchvision.transforms (v1): callable objects over ``functional``, random draws from tapelab's generator.

The random transforms draw with ``tapelab.rand`` / ``randint`` / ``randperm``, so
``tapelab.manual_seed`` makes a pipeline reproducible, as ``torch.manual_seed`` does for torchvision.
"""
from __future__ import annotations

import math
import numbers
import random
from collections.abc import Callable, Sequence

from ... import nn
from ...base.dtype import float32
from ...core.creation import as_tensor, empty, rand, randint, randperm
from ...core.tensor import Tensor
from . import functional as F
from .functional import InterpolationMode

__all__ = ["Compose", "ToTensor", "PILToTensor", "ConvertImageDtype", "ToPILImage", "Normalize", "Resize",
           "CenterCrop", "Pad", "Lambda", "RandomApply", "RandomCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomResizedCrop", "ColorJitter", "Grayscale", "RandomGrayscale"]


def _setup_size(size, error_msg: str) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ValueError(error_msg)
    return size[0], size[1]


def _listing(t, head: str = "") -> str:
    """torchvision's listing of a container: its name, then one transform a line."""
    return f"{type(t).__name__}({head}" + "".join(f"\n    {x}" for x in t.transforms) + "\n)"


def _uniform(low: float, high: float) -> float:
    return float(empty(1).uniform_(low, high).item())


class Compose:
    """Apply transforms one after the other."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        lines = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({lines}\n)"


class ToTensor:
    """PIL image or (H, W, C) ndarray -> (C, H, W) float tensor in [0, 1]."""

    def __call__(self, pic) -> Tensor:
        return F.to_tensor(pic)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PILToTensor:
    """PIL image -> (C, H, W) tensor of the image's dtype."""

    def __call__(self, pic) -> Tensor:
        return F.pil_to_tensor(pic)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ConvertImageDtype(nn.Module):
    def __init__(self, dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, image: Tensor) -> Tensor:
        return F.convert_image_dtype(image, self.dtype)


class ToPILImage:
    def __init__(self, mode: str | None = None) -> None:
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mode={self.mode})" if self.mode else f"{type(self).__name__}()"


class Normalize(nn.Module):
    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        super().__init__()
        self.mean, self.std, self.inplace = mean, std, inplace

    def forward(self, tensor: Tensor) -> Tensor:
        return F.normalize(tensor, self.mean, self.std, self.inplace)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mean={self.mean}, std={self.std})"


class Resize(nn.Module):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size: int | None = None,
                 antialias: bool | None = True) -> None:
        super().__init__()
        if not isinstance(size, (int, Sequence)) or (isinstance(size, Sequence) and len(size) not in (1, 2)):
            raise TypeError(f"Resize: size should be an int or a sequence of length 1 or 2, got {size!r}")
        self.size, self.max_size, self.antialias = size, max_size, antialias
        self.interpolation = interpolation

    def forward(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)

    def __repr__(self) -> str:
        mode = getattr(self.interpolation, "value", self.interpolation)
        return (f"{type(self).__name__}(size={self.size}, interpolation={mode}, max_size={self.max_size}, "
                f"antialias={self.antialias})")


class CenterCrop(nn.Module):
    def __init__(self, size) -> None:
        super().__init__()
        self.size = _setup_size(size, "Please provide only two dimensions (h, w) for size.")

    def forward(self, img):
        return F.center_crop(img, self.size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size})"


class Pad(nn.Module):
    def __init__(self, padding, fill=0, padding_mode: str = "constant") -> None:
        super().__init__()
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def forward(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(padding={self.padding}, fill={self.fill}, padding_mode={self.padding_mode})"


class Lambda:
    def __init__(self, lambd: Callable) -> None:
        if not callable(lambd):
            raise TypeError(f"Lambda: argument should be callable, got {type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RandomApply(nn.Module):
    """Apply a list of transforms with probability ``p``."""

    def __init__(self, transforms, p: float = 0.5) -> None:
        super().__init__()
        self.transforms, self.p = transforms, p

    def forward(self, img):
        if self.p < rand(1).item():
            return img
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        return _listing(self, f"\n    p={self.p}")


class RandomCrop(nn.Module):
    @staticmethod
    def get_params(img, output_size: tuple[int, int]) -> tuple[int, int, int, int]:
        _, h, w = F.get_dimensions(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        i = int(randint(0, h - th + 1, size=(1,)).item())
        j = int(randint(0, w - tw + 1, size=(1,)).item())
        return i, j, th, tw

    def __init__(self, size, padding=None, pad_if_needed: bool = False, fill=0,
                 padding_mode: str = "constant") -> None:
        super().__init__()
        self.size = _setup_size(size, "Please provide only two dimensions (h, w) for size.")
        self.padding, self.pad_if_needed, self.fill, self.padding_mode = padding, pad_if_needed, fill, padding_mode

    def forward(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, height, width = F.get_dimensions(img)
        if self.pad_if_needed and width < self.size[1]:
            img = F.pad(img, [self.size[1] - width, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and height < self.size[0]:
            img = F.pad(img, [0, self.size[0] - height], self.fill, self.padding_mode)
        return F.crop(img, *self.get_params(img, self.size))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip(nn.Module):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = p

    def forward(self, img):
        return F.hflip(img) if rand(1).item() < self.p else img

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


class RandomVerticalFlip(RandomHorizontalFlip):
    def forward(self, img):
        return F.vflip(img) if rand(1).item() < self.p else img


class RandomResizedCrop(nn.Module):
    """Crop a random area (``scale`` of the image) of random aspect ratio, resized to ``size``."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        super().__init__()
        self.size = _setup_size(size, "Please provide only two dimensions (h, w) for size.")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError(f"RandomResizedCrop: scale and ratio should be of kind (min, max), "
                             f"got scale={scale}, ratio={ratio}")
        self.scale, self.ratio, self.interpolation, self.antialias = scale, ratio, interpolation, antialias

    @staticmethod
    def get_params(img, scale: Sequence[float], ratio: Sequence[float]) -> tuple[int, int, int, int]:
        _, height, width = F.get_dimensions(img)
        area = height * width
        for _ in range(10):
            target_area = area * _uniform(scale[0], scale[1])
            aspect_ratio = _log_ratio_uniform(ratio)
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                i = int(randint(0, height - h + 1, size=(1,)).item())
                j = int(randint(0, width - w + 1, size=(1,)).item())
                return i, j, h, w
        # fallback: a central crop with the aspect ratio clamped into range
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def forward(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resized_crop(img, i, j, h, w, self.size, self.interpolation, antialias=self.antialias)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(size={self.size}, scale={tuple(round(v, 4) for v in self.scale)}, "
                f"ratio={tuple(round(v, 4) for v in self.ratio)}, interpolation={F._mode(self.interpolation)}, "
                f"antialias={self.antialias})")


class ColorJitter(nn.Module):
    """Random brightness, contrast, saturation and hue, applied in a random order."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0) -> None:
        super().__init__()
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        self.hue = self._check_input(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    @staticmethod
    def _check_input(value, name: str, center: float = 1, bound=(0, float("inf")), clip_first_on_zero=True):
        if isinstance(value, numbers.Number):
            if value < 0:
                raise ValueError(f"ColorJitter: if {name} is a single number, it must be non negative, got {value}")
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            value = [float(value[0]), float(value[1])]
        else:
            raise TypeError(f"ColorJitter: {name} should be a single number or a list/tuple with length 2, "
                            f"got {value!r}")
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"ColorJitter: {name} values should be between {bound}, got {value}")
        return None if value[0] == value[1] == center else tuple(value)

    @staticmethod
    def get_params(brightness, contrast, saturation, hue):
        fn_idx = randperm(4).tolist()
        draw = [None if r is None else _uniform(r[0], r[1]) for r in (brightness, contrast, saturation, hue)]
        return (fn_idx, *draw)

    def forward(self, img):
        fn_idx, *factors = self.get_params(self.brightness, self.contrast, self.saturation, self.hue)
        fns = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)
        for k in fn_idx:
            if factors[k] is not None:
                img = fns[k](img, factors[k])
        return img

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation}, hue={self.hue})")


class Grayscale(nn.Module):
    def __init__(self, num_output_channels: int = 1) -> None:
        super().__init__()
        self.num_output_channels = num_output_channels

    def forward(self, img):
        return F.rgb_to_grayscale(img, self.num_output_channels)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_output_channels={self.num_output_channels})"


class RandomGrayscale(nn.Module):
    def __init__(self, p: float = 0.1) -> None:
        super().__init__()
        self.p = p

    def forward(self, img):
        if rand(1).item() < self.p:
            return F.rgb_to_grayscale(img, F.get_image_num_channels(img))
        return img

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


def _log_ratio_uniform(ratio: Sequence[float]) -> float:
    """exp of a uniform draw between the float32 logs of ``ratio`` (torchvision's aspect-ratio draw)."""
    log_ratio = as_tensor(list(ratio), dtype=float32).log()
    return float(empty(1).uniform_(float(log_ratio[0]), float(log_ratio[1])).exp().item())


def _channel_fill(img, fill):
    """v1's fill: per-channel floats for tensors, as given for PIL images."""
    if not isinstance(img, Tensor) or fill is None:
        return fill
    channels = F.get_image_num_channels(img)
    return [float(fill)] * channels if isinstance(fill, (int, float)) else [float(f) for f in fill]


def _angle_range(value, name: str, sizes=(2,)) -> list[float]:
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be positive.")
        return [-float(value), float(value)]
    if len(value) not in sizes:
        raise ValueError(f"If {name} is a sequence, it must be of len {sizes}.")
    return [float(v) for v in value]


class RandomRotation(nn.Module):
    """Rotate by an angle drawn uniformly from ``degrees``."""

    def __init__(self, degrees, interpolation=InterpolationMode.NEAREST, expand: bool = False, center=None,
                 fill=0) -> None:
        super().__init__()
        self.degrees = _angle_range(degrees, "degrees")
        self.interpolation, self.expand, self.center, self.fill = interpolation, expand, center, fill

    @staticmethod
    def get_params(degrees: list[float]) -> float:
        return _uniform(float(degrees[0]), float(degrees[1]))

    def forward(self, img):
        angle = self.get_params(self.degrees)
        return F.rotate(img, angle, self.interpolation, self.expand, self.center, _channel_fill(img, self.fill))

    def __repr__(self) -> str:
        s = (f"{type(self).__name__}(degrees={self.degrees}, interpolation={F._mode(self.interpolation)}, "
             f"expand={self.expand}")
        s += f", center={self.center}" if self.center is not None else ""
        return s + (f", fill={self.fill}" if self.fill is not None else "") + ")"


class RandomAffine(nn.Module):
    """Random rotation, translation (fractions of the size), scale and shear, about the centre."""

    def __init__(self, degrees, translate=None, scale=None, shear=None, interpolation=InterpolationMode.NEAREST,
                 fill=0, center=None) -> None:
        super().__init__()
        self.degrees = _angle_range(degrees, "degrees")
        self.translate, self.scale = translate, scale
        self.shear = _angle_range(shear, "shear", (2, 4)) if shear is not None else None
        self.interpolation, self.fill, self.center = interpolation, fill, center

    @staticmethod
    def get_params(degrees, translate, scale_ranges, shears, img_size) -> tuple:
        angle = _uniform(float(degrees[0]), float(degrees[1]))
        translations = (0, 0)
        if translate is not None:
            max_dx, max_dy = float(translate[0] * img_size[0]), float(translate[1] * img_size[1])
            translations = (int(round(_uniform(-max_dx, max_dx))), int(round(_uniform(-max_dy, max_dy))))
        scale = _uniform(scale_ranges[0], scale_ranges[1]) if scale_ranges is not None else 1.0
        shear_x = shear_y = 0.0
        if shears is not None:
            shear_x = _uniform(shears[0], shears[1])
            if len(shears) == 4:
                shear_y = _uniform(shears[2], shears[3])
        return angle, translations, scale, (shear_x, shear_y)

    def forward(self, img):
        _, height, width = F.get_dimensions(img)
        angle, translate, scale, shear = self.get_params(self.degrees, self.translate, self.scale, self.shear,
                                                         [width, height])
        return F.affine(img, angle, list(translate), scale, list(shear), self.interpolation,
                        _channel_fill(img, self.fill), self.center)

    def __repr__(self) -> str:
        s = f"{type(self).__name__}(degrees={self.degrees}"
        for name in ("translate", "scale", "shear"):
            s += f", {name}={getattr(self, name)}" if getattr(self, name) is not None else ""
        mode = F._mode(self.interpolation)
        s += f", interpolation={mode}" if mode != "nearest" else ""
        s += f", fill={self.fill}" if self.fill != 0 else ""
        return s + (f", center={self.center}" if self.center is not None else "") + ")"


class RandomPerspective(nn.Module):
    def __init__(self, distortion_scale: float = 0.5, p: float = 0.5, interpolation=InterpolationMode.BILINEAR,
                 fill=0) -> None:
        super().__init__()
        self.distortion_scale, self.p, self.interpolation, self.fill = distortion_scale, p, interpolation, fill

    @staticmethod
    def get_params(width: int, height: int, distortion_scale: float) -> tuple[list, list]:
        bh, bw = int(distortion_scale * (height // 2)) + 1, int(distortion_scale * (width // 2)) + 1

        def draw(lo: int, hi: int) -> int:
            return int(randint(lo, hi, size=(1,)).item())
        tl = [draw(0, bw), draw(0, bh)]
        tr = [draw(width - bw, width), draw(0, bh)]
        br = [draw(width - bw, width), draw(height - bh, height)]
        bl = [draw(0, bw), draw(height - bh, height)]
        return [[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]], [tl, tr, br, bl]

    def forward(self, img):
        if rand(1).item() < self.p:
            _, height, width = F.get_dimensions(img)
            start, end = self.get_params(width, height, self.distortion_scale)
            return F.perspective(img, start, end, self.interpolation, _channel_fill(img, self.fill))
        return img

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


class GaussianBlur(nn.Module):
    def __init__(self, kernel_size, sigma=(0.1, 2.0)) -> None:
        super().__init__()
        self.kernel_size = _setup_size(kernel_size, "Kernel size should be a tuple/list of two integers")
        if any(k <= 0 or k % 2 == 0 for k in self.kernel_size):
            raise ValueError("Kernel size value should be an odd and positive number.")
        if isinstance(sigma, numbers.Number):
            if sigma <= 0:
                raise ValueError("If sigma is a single number, it must be positive.")
            sigma = (sigma, sigma)
        elif not (isinstance(sigma, Sequence) and len(sigma) == 2 and 0.0 < sigma[0] <= sigma[1]):
            raise ValueError("sigma should be a single number or a list/tuple with length 2.")
        self.sigma = sigma

    @staticmethod
    def get_params(sigma_min: float, sigma_max: float) -> float:
        return _uniform(sigma_min, sigma_max)

    def forward(self, img):
        s = self.get_params(self.sigma[0], self.sigma[1])
        return F.gaussian_blur(img, self.kernel_size, [s, s])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kernel_size={self.kernel_size}, sigma={self.sigma})"


class RandomErasing(nn.Module):
    """Erase a random box of a tensor image (``scale`` of its area, aspect ``ratio``) with ``value``
    (a number, per-channel values, or "random" normal noise)."""

    def __init__(self, p: float = 0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(value, str) and value != "random":
            raise ValueError("If value is str, it should be 'random'")
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        if p < 0 or p > 1:
            raise ValueError("Random erasing probability should be between 0 and 1")
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace

    @staticmethod
    def get_params(img: Tensor, scale, ratio, value: list[float] | None = None) -> tuple:
        img_c, img_h, img_w = img.shape[-3], img.shape[-2], img.shape[-1]
        area = img_h * img_w
        for _ in range(10):
            erase_area = area * _uniform(scale[0], scale[1])
            aspect = _log_ratio_uniform(ratio)
            h = int(round(math.sqrt(erase_area * aspect)))
            w = int(round(math.sqrt(erase_area / aspect)))
            if not (h < img_h and w < img_w):
                continue
            v = empty([img_c, h, w], dtype=float32).normal_() if value is None \
                else as_tensor(value)[:, None, None]
            i = int(randint(0, img_h - h + 1, size=(1,)).item())
            j = int(randint(0, img_w - w + 1, size=(1,)).item())
            return i, j, h, w, v
        return 0, 0, img_h, img_w, img

    def forward(self, img):
        if rand(1).item() < self.p:
            if isinstance(self.value, (int, float)):
                value = [float(self.value)]
            elif isinstance(self.value, str):
                value = None
            else:
                value = [float(v) for v in self.value]
            if value is not None and len(value) not in (1, img.shape[-3]):
                raise ValueError(f"If value is a sequence, it should have either a single value or "
                                 f"{img.shape[-3]} (number of input channels)")
            i, j, h, w, v = self.get_params(img, self.scale, self.ratio, value)
            return F.erase(img, i, j, h, w, v, self.inplace)
        return img

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(p={self.p}, scale={self.scale}, ratio={self.ratio}, value={self.value}, "
                f"inplace={self.inplace})")


class _RandomPixelOp(nn.Module):
    """Applies ``_apply`` with probability ``p`` (one ``rand(1)`` draw)."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = p

    def forward(self, img):
        return self._apply(img) if rand(1).item() < self.p else img

    def __repr__(self) -> str:
        extra = "".join(f"{k}={v}," for k, v in vars(self).items() if k in ("bits", "threshold", "sharpness_factor"))
        return f"{type(self).__name__}({extra}p={self.p})"


class RandomInvert(_RandomPixelOp):
    def _apply(self, img):
        return F.invert(img)


class RandomPosterize(_RandomPixelOp):
    def __init__(self, bits: int, p: float = 0.5) -> None:
        super().__init__(p)
        self.bits = bits

    def _apply(self, img):
        return F.posterize(img, self.bits)


class RandomSolarize(_RandomPixelOp):
    def __init__(self, threshold: float, p: float = 0.5) -> None:
        super().__init__(p)
        self.threshold = threshold

    def _apply(self, img):
        return F.solarize(img, self.threshold)


class RandomAdjustSharpness(_RandomPixelOp):
    def __init__(self, sharpness_factor: float, p: float = 0.5) -> None:
        super().__init__(p)
        self.sharpness_factor = sharpness_factor

    def _apply(self, img):
        return F.adjust_sharpness(img, self.sharpness_factor)


class RandomAutocontrast(_RandomPixelOp):
    def _apply(self, img):
        return F.autocontrast(img)


class RandomEqualize(_RandomPixelOp):
    def _apply(self, img):
        return F.equalize(img)


class FiveCrop(nn.Module):
    def __init__(self, size) -> None:
        super().__init__()
        self.size = _setup_size(size, "Please provide only two dimensions (h, w) for size.")

    def forward(self, img):
        return F.five_crop(img, self.size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size})"


class TenCrop(nn.Module):
    def __init__(self, size, vertical_flip: bool = False) -> None:
        super().__init__()
        self.size = _setup_size(size, "Please provide only two dimensions (h, w) for size.")
        self.vertical_flip = vertical_flip

    def forward(self, img):
        return F.ten_crop(img, self.size, self.vertical_flip)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, vertical_flip={self.vertical_flip})"


class RandomChoice:
    """One of ``transforms``, picked by Python's ``random`` (as torchvision's v1 does), weighted by ``p``."""

    def __init__(self, transforms: Sequence[Callable], p: list[float] | None = None) -> None:
        self.transforms, self.p = list(transforms), p

    def __call__(self, *args):
        return random.choices(self.transforms, weights=self.p)[0](*args)

    def __repr__(self) -> str:
        return _listing(self) + f"(p={self.p})"


class RandomOrder:
    """``transforms`` in an order shuffled by Python's ``random`` (as torchvision's v1 does)."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img):
        order = list(range(len(self.transforms)))
        random.shuffle(order)
        for k in order:
            img = self.transforms[k](img)
        return img

    def __repr__(self) -> str:
        return _listing(self)


class LinearTransformation(nn.Module):
    """(flattened image - mean_vector) @ transformation_matrix, reshaped back (ZCA whitening)."""

    def __init__(self, transformation_matrix: Tensor, mean_vector: Tensor) -> None:
        super().__init__()
        if transformation_matrix.shape[0] != transformation_matrix.shape[1]:
            raise ValueError("transformation_matrix should be square")
        if mean_vector.shape[0] != transformation_matrix.shape[0]:
            raise ValueError("mean_vector should have the same length as the transformation_matrix")
        self.transformation_matrix, self.mean_vector = transformation_matrix, mean_vector

    def forward(self, tensor: Tensor) -> Tensor:
        return linear_transformation(tensor, self.transformation_matrix, self.mean_vector)


def linear_transformation(tensor: Tensor, matrix: Tensor, mean: Tensor) -> Tensor:
    """Each image flattened, less ``mean``, times ``matrix`` (v1's and v2's ``LinearTransformation``)."""
    n = tensor.shape[-3] * tensor.shape[-2] * tensor.shape[-1]
    if n != matrix.shape[0]:
        raise ValueError(f"Input tensor and transformation matrix have incompatible shape: {n} features vs "
                         f"{matrix.shape[0]}")
    flat = tensor.reshape(-1, n) - mean
    return flat.mm(matrix.to(flat.dtype)).reshape(tensor.shape)


__all__ += ["RandomRotation", "RandomAffine", "RandomPerspective", "GaussianBlur", "RandomErasing", "RandomInvert",
            "RandomPosterize", "RandomSolarize", "RandomAdjustSharpness", "RandomAutocontrast", "RandomEqualize",
            "FiveCrop", "TenCrop", "RandomChoice", "RandomOrder", "LinearTransformation"]


def _float_pair(value, name: str) -> list[float]:
    if isinstance(value, (int, float)):
        return [float(value), float(value)]
    value = [float(v) for v in value]
    if len(value) not in (1, 2):
        raise ValueError(f"If {name} is a sequence its length should be 2. Got {len(value)}")
    return value * 2 if len(value) == 1 else value


class ElasticTransform(nn.Module):
    """Elastic distortion: Gaussian-smoothed random offsets of strength ``alpha`` and smoothness ``sigma``."""

    def __init__(self, alpha=50.0, sigma=5.0, interpolation=InterpolationMode.BILINEAR, fill=0) -> None:
        super().__init__()
        self.alpha, self.sigma = _float_pair(alpha, "alpha"), _float_pair(sigma, "sigma")
        self.interpolation = interpolation
        self.fill = [float(fill)] if isinstance(fill, (int, float)) else [float(f) for f in fill]

    @staticmethod
    def get_params(alpha: list[float], sigma: list[float], size: list[int]) -> Tensor:
        from ._tensor import elastic_displacement
        return elastic_displacement(alpha, sigma, size[0], size[1], v1=True)

    def forward(self, tensor):
        _, height, width = F.get_dimensions(tensor)
        displacement = self.get_params(self.alpha, self.sigma, [height, width])
        return F.elastic_transform(tensor, displacement, self.interpolation, self.fill)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(alpha={self.alpha}, sigma={self.sigma}, interpolation={self.interpolation}, "
                f"fill={self.fill})")


__all__ += ["ElasticTransform"]
