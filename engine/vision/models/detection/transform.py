"""GeneralizedRCNNTransform: what a detector does to its inputs before the backbone (normalize,
resize so the short side is ``min_size`` and the long side at most ``max_size``, pad to a batch
whose sides divide ``size_divisible``) and to its detections after (back to each original size)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .... import nn
from ....base.dtype import uint8
from ....core.creation import as_tensor, empty, zeros
from ....core.tensor import Tensor
from ....nn import functional as F
from ....ops.movement import stack
from .image_list import ImageList
from .roi_heads import paste_masks_in_image

__all__ = ["GeneralizedRCNNTransform", "resize_boxes", "resize_keypoints"]


def _resize_image_and_masks(image: Tensor, self_min_size: int, self_max_size: int, target: dict | None = None,
                            fixed_size: tuple[int, int] | None = None) -> tuple[Tensor, dict | None]:
    if fixed_size is not None:
        size = (fixed_size[1], fixed_size[0])
    else:
        scale = min(self_min_size / min(image.shape[-2:]), self_max_size / max(image.shape[-2:]))
        size = tuple(int(math.floor(s * scale)) for s in image.shape[-2:])
    image = F.interpolate(image[None], size=size, mode="bilinear", align_corners=False)[0]
    if target is not None and "masks" in target:
        masks = F.interpolate(target["masks"][:, None].float(), size=size)[:, 0].to(uint8)
        target = {**target, "masks": masks}
    return image, target


def resize_boxes(boxes: Tensor, original_size: tuple[int, int], new_size: tuple[int, int]) -> Tensor:
    """xyxy boxes scaled from an image of ``original_size`` (h, w) to one of ``new_size``."""
    ratio_h, ratio_w = (np.float32(n) / np.float32(o) for n, o in zip(new_size, original_size))
    x1, y1, x2, y2 = boxes.unbind(1)
    return stack((x1 * float(ratio_w), y1 * float(ratio_h), x2 * float(ratio_w), y2 * float(ratio_h)), dim=1)


def resize_keypoints(keypoints: Tensor, original_size: tuple[int, int], new_size: tuple[int, int]) -> Tensor:
    """(..., K, 3) keypoints with x and y scaled from ``original_size`` (h, w) to ``new_size``."""
    ratio_h, ratio_w = (float(np.float32(n) / np.float32(o)) for n, o in zip(new_size, original_size))
    scale = as_tensor([ratio_w, ratio_h, 1.0], dtype=keypoints.dtype, device=keypoints.device)
    return keypoints * scale


class GeneralizedRCNNTransform(nn.Module):
    """``forward(images, targets)`` returns an ImageList and the targets with boxes (and masks) resized;
    ``postprocess`` maps detections back to the original image sizes (and pastes masks into them).

    In training the short side is drawn from ``min_size`` (a tuple) per image; in eval it is the last.
    """

    def __init__(self, min_size, max_size: int, image_mean: list[float], image_std: list[float],
                 size_divisible: int = 32, fixed_size: tuple[int, int] | None = None, **kwargs: Any) -> None:
        super().__init__()
        self.min_size = tuple(min_size) if isinstance(min_size, (list, tuple)) else (min_size,)
        self.max_size = max_size
        self.image_mean, self.image_std = image_mean, image_std
        self.size_divisible = size_divisible
        self.fixed_size = fixed_size
        self._skip_resize = kwargs.pop("_skip_resize", False)

    def forward(self, images: list[Tensor], targets: list[dict] | None = None) -> tuple[ImageList, list[dict] | None]:
        images = list(images)
        targets = None if targets is None else [dict(t) for t in targets]
        for i, image in enumerate(images):
            if image.dim() != 3:
                raise ValueError(f"images is expected to be a list of 3d tensors of shape [C, H, W], got "
                                 f"{tuple(image.shape)}")
            target = targets[i] if targets is not None else None
            image, target = self.resize(self.normalize(image), target)
            images[i] = image
            if targets is not None:
                targets[i] = target
        image_sizes = [tuple(int(s) for s in img.shape[-2:]) for img in images]
        return ImageList(self.batch_images(images, self.size_divisible), image_sizes), targets

    def normalize(self, image: Tensor) -> Tensor:
        if not image.is_floating_point():
            raise TypeError(f"Expected input images to be of floating type (in range [0, 1]), "
                            f"but found type {image.dtype} instead")
        mean = as_tensor(self.image_mean, dtype=image.dtype, device=image.device)
        std = as_tensor(self.image_std, dtype=image.dtype, device=image.device)
        return (image - mean[:, None, None]) / std[:, None, None]

    def torch_choice(self, k: tuple[int, ...]) -> int:
        """A uniform draw from ``k`` with the global generator (as torchvision draws it)."""
        return k[int(empty(1).uniform_(0.0, float(len(k))).item())]

    def resize(self, image: Tensor, target: dict | None = None) -> tuple[Tensor, dict | None]:
        h, w = image.shape[-2:]
        if self.training:
            if self._skip_resize:
                return image, target
            size = self.torch_choice(self.min_size)
        else:
            size = self.min_size[-1]
        image, target = _resize_image_and_masks(image, size, self.max_size, target, self.fixed_size)
        if target is None:
            return image, target
        target["boxes"] = resize_boxes(target["boxes"], (h, w), tuple(image.shape[-2:]))
        if "keypoints" in target:
            target["keypoints"] = resize_keypoints(target["keypoints"], (h, w), tuple(image.shape[-2:]))
        return image, target

    def batch_images(self, images: list[Tensor], size_divisible: int = 32) -> Tensor:
        """The images padded (bottom and right, with zeros) to one size whose sides divide ``size_divisible``."""
        channels = max(int(img.shape[0]) for img in images)
        height, width = (int(math.ceil(max(int(img.shape[d]) for img in images) / size_divisible) * size_divisible)
                         for d in (1, 2))
        batch = zeros((len(images), channels, height, width), dtype=images[0].dtype, device=images[0].device)
        for i, img in enumerate(images):
            batch[i, :img.shape[0], :img.shape[1], :img.shape[2]] = img
        return batch

    def postprocess(self, result: list[dict], image_shapes: list[tuple[int, int]],
                    original_image_sizes: list[tuple[int, int]]) -> list[dict]:
        if self.training:
            return result
        for pred, shape, original in zip(result, image_shapes, original_image_sizes):
            pred["boxes"] = resize_boxes(pred["boxes"], shape, original)
            if "masks" in pred:
                pred["masks"] = paste_masks_in_image(pred["masks"], pred["boxes"], original)
            if "keypoints" in pred:
                pred["keypoints"] = resize_keypoints(pred["keypoints"], shape, original)
        return result

    def __repr__(self) -> str:
        indent = "\n    "
        return (f"{self.__class__.__name__}({indent}Normalize(mean={self.image_mean}, std={self.image_std})"
                f"{indent}Resize(min_size={self.min_size}, max_size={self.max_size}, mode='bilinear')\n)")
