"""``torchvision.io``'s image reading: encoded bytes (a uint8 tensor) to a ``C x H x W`` uint8 tensor,
decoded by Pillow. Video reading (``read_video``) needs a video decoder tapelab does not bundle."""
from __future__ import annotations

import enum
import io as _io

import numpy as np

from ..core.creation import tensor as _tensor
from ..core.tensor import Tensor

__all__ = ["ImageReadMode", "read_file", "decode_image", "read_image"]


class ImageReadMode(enum.Enum):
    """The channels ``decode_image`` returns: as stored, gray, gray with alpha, RGB, RGB with alpha."""
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4


_PIL_MODES = {ImageReadMode.GRAY: "L", ImageReadMode.GRAY_ALPHA: "LA", ImageReadMode.RGB: "RGB",
              ImageReadMode.RGB_ALPHA: "RGBA"}


def read_file(path: str) -> Tensor:
    """A file's bytes as a 1-D uint8 tensor."""
    with open(path, "rb") as f:
        return _tensor(np.frombuffer(f.read(), dtype=np.uint8).copy())


def decode_image(input: Tensor | str, mode: ImageReadMode | str = ImageReadMode.UNCHANGED,
                 apply_exif_orientation: bool = False) -> Tensor:
    """The image in ``input`` (encoded bytes as a uint8 tensor, or a path) as a ``C x H x W`` uint8 tensor."""
    from PIL import Image, ImageOps
    if isinstance(mode, str):
        mode = ImageReadMode[mode.upper()]
    if isinstance(input, str):
        input = read_file(input)
    if not isinstance(input, Tensor) or input.dtype.name != "uint8" or input.ndim != 1:
        raise RuntimeError(f"decode_image: expected a 1-D uint8 tensor of encoded bytes, got "
                           f"{getattr(input, 'dtype', type(input))} of shape {tuple(getattr(input, 'shape', ()))}")
    image = Image.open(_io.BytesIO(input.numpy().tobytes()))
    if apply_exif_orientation:
        image = ImageOps.exif_transpose(image)
    if mode is not ImageReadMode.UNCHANGED:
        image = image.convert(_PIL_MODES[mode])
    arr = np.asarray(image)
    arr = arr[:, :, None] if arr.ndim == 2 else arr
    return _tensor(np.ascontiguousarray(arr.transpose(2, 0, 1)).astype(np.uint8))


def read_image(path: str, mode: ImageReadMode | str = ImageReadMode.UNCHANGED,
               apply_exif_orientation: bool = False) -> Tensor:
    """The image file at ``path`` as a ``C x H x W`` uint8 tensor."""
    return decode_image(read_file(path), mode, apply_exif_orientation)
