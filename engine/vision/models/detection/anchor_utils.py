"""AnchorGenerator: the reference boxes of the RPN, per feature map a set of sizes and aspect ratios
centred on every cell (the top-left corner of each stride), as in Faster R-CNN."""
from __future__ import annotations

from collections.abc import Sequence

from .... import nn
from ....base.dtype import float32, int32, int64
from ....core.creation import arange, as_tensor
from ....core.tensor import Tensor
from ....ops.movement import cat, stack
from ....ops.shaping import meshgrid
from .image_list import ImageList

__all__ = ["AnchorGenerator"]


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
