"""torchvision.transforms.v2.functional: the v1 functions, which v2 keeps for images, plus v2's ``to_dtype``
(dtype conversion with optional value scaling), ``grayscale_to_rgb`` and ``to_image``."""
from __future__ import annotations

from ....core.tensor import Tensor
from ..functional import *  # noqa: F401,F403
from ..functional import __all__ as _v1_all
from ..functional import convert_image_dtype, pil_to_tensor, rgb_to_grayscale  # noqa: F401

__all__ = [*_v1_all, "to_dtype", "grayscale_to_rgb", "to_image"]


def to_dtype(inpt: Tensor, dtype, scale: bool = False) -> Tensor:
    """``inpt`` as ``dtype``; with ``scale`` integer images' [0, max] and float images' [0, 1] ranges map
    onto each other (``convert_image_dtype``)."""
    return convert_image_dtype(inpt, dtype) if scale else inpt.to(dtype)


def grayscale_to_rgb(inpt: Tensor) -> Tensor:
    """A one-channel image repeated into three channels (a three-channel image as it is)."""
    if inpt.shape[-3] == 3:
        return inpt
    if inpt.shape[-3] != 1:
        raise TypeError(f"grayscale_to_rgb: expected 1 or 3 channels in dim -3, got shape {tuple(inpt.shape)}")
    return inpt.expand(*inpt.shape[:-3], 3, *inpt.shape[-2:])


def to_image(inpt) -> Tensor:
    """A ``C x H x W`` tensor of a PIL image, a numpy ``H x W x C`` array or a tensor (returned as it is)."""
    if isinstance(inpt, Tensor):
        return inpt
    import numpy as np
    if isinstance(inpt, np.ndarray):
        from ....core.creation import from_numpy
        arr = inpt[:, :, None] if inpt.ndim == 2 else inpt
        return from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))
    return pil_to_tensor(inpt)
