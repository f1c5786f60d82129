"""AnchorGenerator: the reference boxes of the RPN, per feature map a set of sizes and aspect ratios
centred on every cell (the top-left corner of each stride), as in Faster R-CNN; DefaultBoxGenerator:
SSD's default boxes, scaled to the image."""
from __future__ import annotations

import math
from collections.abc import Sequence

from .... import nn
from ....base.dtype import float32, int32, int64
from ....core.creation import arange, as_tensor
from ....core.tensor import Tensor
from ....ops.movement import cat, stack
from ....ops.shaping import meshgrid
from .image_list import ImageList

__all__ = ["AnchorGenerator", "DefaultBoxGenerator"]


class AnchorGenerator(nn.Module):
    """``sizes[i]`` and ``aspect_ratios[i]`` give the anchors of feature map i (sizes times ratios of them
    per location); ``forward(image_list, feature_maps)`` returns one (sum over maps of H*W*A, 4) tensor
    of xyxy anchors per image."""

    def __init__(self, sizes: Sequence = ((128, 256, 512),), aspect_ratios: Sequence = ((0.5, 1.0, 2.0),)) -> None:
        super().__init__()
        if not isinstance(sizes[0], (list, tuple)):
            sizes = tuple((s,) for s in sizes)
        if not isinstance(aspect_ratios[0], (list, tuple)):
            aspect_ratios = (aspect_ratios,) * len(sizes)
        self.sizes, self.aspect_ratios = sizes, aspect_ratios
        self.cell_anchors = [self.generate_anchors(s, a) for s, a in zip(sizes, aspect_ratios)]

    @staticmethod
    def generate_anchors(scales: Sequence[int], aspect_ratios: Sequence[float], dtype=float32,
                         device=None) -> Tensor:
        """Zero-centred anchors, ratio-major: height/width = ratio at area scale**2, rounded."""
        scales = as_tensor(scales, dtype=dtype, device=device)
        ratios = as_tensor(aspect_ratios, dtype=dtype, device=device)
        h_ratios = ratios.sqrt()
        ws = ((1 / h_ratios)[:, None] * scales[None, :]).reshape(-1)
        hs = (h_ratios[:, None] * scales[None, :]).reshape(-1)
        return (stack((-ws, -hs, ws, hs), dim=1) / 2).round()

    def set_cell_anchors(self, dtype, device) -> None:
        self.cell_anchors = [a.to(dtype=dtype, device=device) for a in self.cell_anchors]

    def num_anchors_per_location(self) -> list[int]:
        return [len(s) * len(a) for s, a in zip(self.sizes, self.aspect_ratios)]

    def grid_anchors(self, grid_sizes: list[tuple[int, int]], strides: list[tuple[int, int]]) -> list[Tensor]:
        """Each map's cell anchors shifted to every cell, location-major."""
        if len(grid_sizes) != len(strides) or len(grid_sizes) != len(self.cell_anchors):
            raise ValueError("Anchors should be Tuple[Tuple[int]] because each feature map could potentially have "
                             "different sizes and aspect ratios. There needs to be a match between the number of "
                             "feature maps passed and the number of sizes / aspect ratios specified.")
        anchors = []
        for (h, w), (sy, sx), base in zip(grid_sizes, strides, self.cell_anchors):
            ys = arange(0, h, dtype=int32, device=base.device).to(int64) * sy
            xs = arange(0, w, dtype=int32, device=base.device).to(int64) * sx
            shift_y, shift_x = meshgrid(ys, xs, indexing="ij")
            shift_x, shift_y = shift_x.reshape(-1), shift_y.reshape(-1)
            shifts = stack((shift_x, shift_y, shift_x, shift_y), dim=1)
            anchors.append((shifts.reshape(-1, 1, 4) + base.reshape(1, -1, 4)).reshape(-1, 4))
        return anchors

    def forward(self, image_list: ImageList, feature_maps: list[Tensor]) -> list[Tensor]:
        grid_sizes = [tuple(f.shape[-2:]) for f in feature_maps]
        height, width = image_list.tensors.shape[-2:]
        strides = [(height // gh, width // gw) for gh, gw in grid_sizes]
        self.set_cell_anchors(feature_maps[0].dtype, feature_maps[0].device)
        per_map = self.grid_anchors(grid_sizes, strides)
        return [cat(per_map) for _ in image_list.image_sizes]


class DefaultBoxGenerator(nn.Module):
    """SSD's default boxes: on feature map k, scale s_k (linear from ``min_ratio`` to ``max_ratio`` of the
    image), a square of sqrt(s_k * s_{k+1}), and a pair (w, h), (h, w) per aspect ratio, centred on every
    cell; ``forward`` returns them as xyxy pixels per image."""

    def __init__(self, aspect_ratios: list[list[int]], min_ratio: float = 0.15, max_ratio: float = 0.9,
                 scales: list[float] | None = None, steps: list[int] | None = None, clip: bool = True) -> None:
        super().__init__()
        if steps is not None and len(aspect_ratios) != len(steps):
            raise ValueError("aspect_ratios and steps should have the same length")
        self.aspect_ratios, self.steps, self.clip = aspect_ratios, steps, clip
        n = len(aspect_ratios)
        if scales is None:
            scales = ([min_ratio + (max_ratio - min_ratio) * k / (n - 1.0) for k in range(n)] + [1.0] if n > 1
                      else [min_ratio, max_ratio])
        self.scales = scales
        self._wh_pairs = self._generate_wh_pairs(n)

    def _generate_wh_pairs(self, num_outputs: int, dtype=float32, device=None) -> list[Tensor]:
        pairs = []
        for k in range(num_outputs):
            s_k, s_prime = self.scales[k], math.sqrt(self.scales[k] * self.scales[k + 1])
            wh = [[s_k, s_k], [s_prime, s_prime]]
            for ar in self.aspect_ratios[k]:
                w, h = s_k * math.sqrt(ar), s_k / math.sqrt(ar)
                wh += [[w, h], [h, w]]
            pairs.append(as_tensor(wh, dtype=dtype, device=device))
        return pairs

    def num_anchors_per_location(self) -> list[int]:
        return [2 + 2 * len(r) for r in self.aspect_ratios]

    def _grid_default_boxes(self, grid_sizes: list[tuple[int, int]], image_size: tuple[int, int],
                            dtype=float32) -> Tensor:
        """(cx, cy, w, h) relative to the image, cell-major."""
        boxes = []
        for k, (gh, gw) in enumerate(grid_sizes):
            if self.steps is not None:
                y_f, x_f = image_size[0] / self.steps[k], image_size[1] / self.steps[k]
            else:
                y_f, x_f = gh, gw
            xs = ((arange(0, gw) + 0.5) / x_f).to(dtype)
            ys = ((arange(0, gh) + 0.5) / y_f).to(dtype)
            shift_y, shift_x = meshgrid(ys, xs, indexing="ij")
            count = len(self._wh_pairs[k])
            centres = stack((shift_x.reshape(-1), shift_y.reshape(-1)) * count, dim=-1).reshape(-1, 2)
            wh = self._wh_pairs[k].clamp(min=0, max=1) if self.clip else self._wh_pairs[k]
            boxes.append(cat((centres, wh.to(dtype).repeat(gh * gw, 1)), dim=1))
        return cat(boxes, dim=0)

    def forward(self, image_list: ImageList, feature_maps: list[Tensor]) -> list[Tensor]:
        grid_sizes = [tuple(int(s) for s in f.shape[-2:]) for f in feature_maps]
        image_size = tuple(int(s) for s in image_list.tensors.shape[-2:])
        dtype = feature_maps[0].dtype
        boxes = self._grid_default_boxes(grid_sizes, image_size, dtype=dtype).to(feature_maps[0].device)
        scale = as_tensor([image_size[1], image_size[0]], device=boxes.device)
        xyxy = cat([(boxes[:, :2] - 0.5 * boxes[:, 2:]) * scale, (boxes[:, :2] + 0.5 * boxes[:, 2:]) * scale], -1)
        return [xyxy for _ in image_list.image_sizes]
