"""torchvision.transforms (v1): callable objects over ``functional``, random draws from tapelab's generator.

The random transforms draw with ``tapelab.rand`` / ``randint`` / ``randperm``, so
``tapelab.manual_seed`` makes a pipeline reproducible, as ``torch.manual_seed`` does for torchvision.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

from ... import nn
from ...core.creation import empty, rand, randint, randperm
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
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            target_area = area * _uniform(scale[0], scale[1])
            aspect_ratio = math.exp(_uniform(log_ratio[0], log_ratio[1]))
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
        return f"{type(self).__name__}(size={self.size}, scale={self.scale}, ratio={self.ratio})"


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
