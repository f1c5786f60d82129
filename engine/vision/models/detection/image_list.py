"""ImageList: a padded batch of images of different sizes with the size each had."""
from __future__ import annotations

from ....core.tensor import Tensor

__all__ = ["ImageList"]


class ImageList:
    """``tensors`` (N, C, H, W), padded; ``image_sizes`` the (height, width) of each before padding."""

    def __init__(self, tensors: Tensor, image_sizes: list[tuple[int, int]]) -> None:
        self.tensors = tensors
        self.image_sizes = image_sizes

    def to(self, device) -> "ImageList":
        return ImageList(self.tensors.to(device), self.image_sizes)
