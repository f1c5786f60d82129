"""torchvision.utils: a grid of images, saving it as a picture, and drawing boxes on an image."""
from __future__ import annotations

import math
import os
from typing import IO

import numpy as np

from ..base.dtype import int64, uint8
from ..base.grad_mode import no_grad
from ..core.creation import as_tensor
from ..core.tensor import Tensor
from ..ops.movement import cat, stack

__all__ = ["make_grid", "save_image", "draw_bounding_boxes"]


def _norm_range(t: Tensor, value_range) -> None:
    low, high = value_range if value_range is not None else (float(t.min()), float(t.max()))
    t.clamp_(min=low, max=high)
    t.sub_(low).div_(max(high - low, 1e-5))


def make_grid(tensor: Tensor | list[Tensor], nrow: int = 8, padding: int = 2, normalize: bool = False,
              value_range: tuple[float, float] | None = None, scale_each: bool = False,
              pad_value: float = 0.0) -> Tensor:
    """Tile a (B, C, H, W) batch (or a list of images) into one (3 or C, H', W') image, ``nrow`` per row.

    Example:
        >>> make_grid(tapelab.rand(10, 1, 8, 8), nrow=5, padding=1).shape
        tapelab.Size([3, 19, 46])
    """
    if isinstance(tensor, list):
        tensor = stack(tensor, dim=0)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"make_grid: tensor or list of tensors expected, got {type(tensor).__name__}")
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        if tensor.shape[0] == 1:   # a single-channel image becomes three channels
            tensor = cat((tensor, tensor, tensor), 0)
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 4:
        raise ValueError(f"make_grid: expected a 2-, 3- or 4-d tensor, got shape {tuple(tensor.shape)}")
    if tensor.shape[1] == 1:
        tensor = cat((tensor, tensor, tensor), 1)
    if normalize:
        tensor = tensor.clone()
        if value_range is not None and not isinstance(value_range, tuple):
            raise TypeError("make_grid: value_range has to be a tuple (min, max) if specified")
        if scale_each:
            for t in tensor:
                _norm_range(t, value_range)
        else:
            _norm_range(tensor, value_range)
    if tensor.shape[0] == 1:
        return tensor.squeeze(0)
    nmaps = tensor.shape[0]
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(tensor.shape[2] + padding), int(tensor.shape[3] + padding)
    grid = tensor.new_full((tensor.shape[1], height * ymaps + padding, width * xmaps + padding), pad_value)
    for k in range(nmaps):
        y, x = divmod(k, xmaps)
        grid.narrow(1, y * height + padding, height - padding).narrow(2, x * width + padding,
                                                                      width - padding).copy_(tensor[k])
    return grid


def save_image(tensor: Tensor | list[Tensor], fp: str | os.PathLike | IO[bytes], format: str | None = None,
               **kwargs) -> None:
    """Save ``make_grid(tensor, **kwargs)`` as an image file (values in [0, 1] map to 0..255)."""
    from PIL import Image
    with no_grad():
        grid = make_grid(tensor, **kwargs)
        ndarr = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to("cpu", uint8).numpy()
    Image.fromarray(ndarr).save(fp, format=format)


def _palette(n: int) -> list[tuple[int, int, int]]:
    """torchvision's default box colours: multiples of three large odd numbers, mod 255."""
    base = (2 ** 25 - 1, 2 ** 15 - 1, 2 ** 21 - 1)
    return [tuple((i * b) % 255 for b in base) for i in range(n)]


def _color(c) -> tuple[int, ...]:
    from PIL import ImageColor
    return ImageColor.getrgb(c) if isinstance(c, str) else tuple(int(v) for v in c)


def draw_bounding_boxes(image: Tensor, boxes: Tensor, labels: list[str] | None = None, colors=None,
                        fill: bool = False, width: int = 1, font: str | None = None, font_size: int | None = None,
                        label_colors=None) -> Tensor:
    """Draw (x1, y1, x2, y2) ``boxes`` on a (C, H, W) uint8 (or float in [0, 1]) image; returns a new image."""
    from PIL import Image, ImageDraw, ImageFont
    if not isinstance(image, Tensor):
        raise TypeError(f"draw_bounding_boxes: image should be a Tensor, got {type(image).__name__}")
    if image.dim() != 3 or image.shape[0] not in (1, 3):
        raise ValueError(f"draw_bounding_boxes: image should be (1 or 3, H, W), got shape {tuple(image.shape)}")
    if image.dtype != uint8 and not image.is_floating_point():
        raise ValueError(f"draw_bounding_boxes: image dtype should be uint8 or float, got {image.dtype}")
    if boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"draw_bounding_boxes: boxes should be (N, 4), got shape {tuple(boxes.shape)}")
    if ((boxes[:, 0] > boxes[:, 2]) | (boxes[:, 1] > boxes[:, 3])).any():
        raise ValueError("draw_bounding_boxes: boxes need to be in (xmin, ymin, xmax, ymax) format: xmin <= xmax "
                         "and ymin <= ymax")
    n = boxes.shape[0]
    labels = [None] * n if labels is None else list(labels)
    if len(labels) != n:
        raise ValueError(f"draw_bounding_boxes: {n} boxes but {len(labels)} labels")
    if colors is None:
        box_colors = _palette(n)
    elif isinstance(colors, list):
        if len(colors) < n:
            raise ValueError(f"draw_bounding_boxes: {n} boxes but only {len(colors)} colors")
        box_colors = [_color(c) for c in colors[:n]]
    else:
        box_colors = [_color(colors)] * n
    text_colors = box_colors if label_colors is None else (
        [_color(c) for c in label_colors] if isinstance(label_colors, list) else [_color(label_colors)] * n)
    floating = image.is_floating_point()
    arr = image.detach().cpu()
    if floating:
        arr = (arr.clamp(0, 1) * 255).round().to(uint8)
    if arr.shape[0] == 1:
        arr = arr.expand(3, *arr.shape[1:])
    canvas = Image.fromarray(arr.permute(1, 2, 0).contiguous().numpy())
    draw = ImageDraw.Draw(canvas, "RGBA" if fill else None)
    txt_font = ImageFont.load_default() if font is None else ImageFont.truetype(font, size=font_size or 10)
    for box, color, label, text_color in zip(boxes.to(int64).tolist(), box_colors, labels, text_colors):
        if fill:
            draw.rectangle(box, width=width, outline=color, fill=tuple(color[:3]) + (100,))
        else:
            draw.rectangle(box, width=width, outline=color)
        if label is not None:
            draw.text((box[0] + width + 1, box[1] + width + 1), label, fill=text_color, font=txt_font)
    out = as_tensor(np.array(canvas.convert("RGB"), dtype=np.uint8)).permute(2, 0, 1).contiguous()
    return out.to(image.dtype) / 255 if floating else out
