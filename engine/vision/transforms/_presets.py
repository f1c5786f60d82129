"""torchvision.transforms._presets: the inference transform a pretrained weight expects.

``Weights.transforms()`` of a classification weight returns ``ImageClassification`` with the
crop and resize sizes it was evaluated at: resize the shorter side, center crop, scale to float
in [0, 1], normalize by ImageNet's mean and std.
"""
from __future__ import annotations

from ... import nn
from ...core.tensor import Tensor
from . import functional as F
from .functional import InterpolationMode

__all__ = ["ImageClassification"]


class ImageClassification(nn.Module):
    """Takes a ``[..., C, H, W]`` tensor (or a PIL image) and returns the normalized float crop."""

    def __init__(self, *, crop_size: int, resize_size: int = 256,
                 mean: tuple[float, ...] = (0.485, 0.456, 0.406), std: tuple[float, ...] = (0.229, 0.224, 0.225),
                 interpolation: InterpolationMode = InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        super().__init__()
        self.crop_size = [crop_size]
        self.resize_size = [resize_size]
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = interpolation
        self.antialias = antialias

    def forward(self, img) -> Tensor:
        img = F.resize(img, self.resize_size, interpolation=self.interpolation, antialias=self.antialias)
        img = F.center_crop(img, self.crop_size)
        if not isinstance(img, Tensor):
            img = F.pil_to_tensor(img)
        img = F.convert_image_dtype(img)
        return F.normalize(img, mean=self.mean, std=self.std)

    def __repr__(self) -> str:
        lines = [f"crop_size={self.crop_size}", f"resize_size={self.resize_size}", f"mean={self.mean}",
                 f"std={self.std}", f"interpolation={self.interpolation}"]
        return self.__class__.__name__ + "(\n    " + "\n    ".join(lines) + "\n)"

    def describe(self) -> str:
        return (f"Accepts ``PIL.Image``, batched ``(B, C, H, W)`` and single ``(C, H, W)`` image ``torch.Tensor`` "
                f"objects. The images are resized to ``resize_size={self.resize_size}`` using "
                f"``interpolation={self.interpolation}``, followed by a central crop of ``crop_size={self.crop_size}``. "
                f"Finally the values are first rescaled to ``[0.0, 1.0]`` and then normalized using "
                f"``mean={self.mean}`` and ``std={self.std}``.")
