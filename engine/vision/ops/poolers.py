"""MultiScaleRoIAlign: RoIAlign from the pyramid level that suits each box's size (FPN paper, eq. 1):
level = floor(4 + log2(sqrt(area) / 224)), clamped to the levels present."""
from __future__ import annotations

import numpy as np

from ... import nn
from ...core.creation import as_tensor, zeros
from ...core.tensor import Tensor
from ...ops.movement import cat
from .roi_align import _rois, roi_align

__all__ = ["MultiScaleRoIAlign", "LevelMapper", "initLevelMapper"]


class LevelMapper:
    """Which of the levels ``k_min..k_max`` each box pools from (returned minus ``k_min``)."""

    def __init__(self, k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4,
                 eps: float = 1e-6) -> None:
        self.k_min, self.k_max = k_min, k_max
        self.s0, self.lvl0, self.eps = canonical_scale, canonical_level, eps

    def __call__(self, boxlists: list[Tensor]) -> Tensor:
        boxes = cat(boxlists, 0).detach().cpu().numpy()
        # in the boxes' dtype, as torchvision computes it: a box on a level edge must fall the same side
        ty = boxes.dtype.type
        s = np.sqrt((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
        levels = np.floor(ty(self.lvl0) + np.log2(s / ty(self.s0)) + ty(self.eps))
        levels = np.clip(levels, self.k_min, self.k_max).astype(np.int64) - self.k_min
        return as_tensor(levels, device=boxlists[0].device)


def initLevelMapper(k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4,
                    eps: float = 1e-6) -> LevelMapper:
    return LevelMapper(k_min, k_max, canonical_scale, canonical_level, eps)


def _infer_scale(feature: Tensor, original_size: tuple[int, int]) -> float:
    """The power of two nearest to feature height / image height."""
    return 2.0 ** float(np.round(np.log2(np.float32(feature.shape[-2] / original_size[0]))))


class MultiScaleRoIAlign(nn.Module):
    """RoIAlign over the feature maps named ``featmap_names``, each box from the level its size selects.

    ``forward(x, boxes, image_shapes)``: ``x`` the dict of feature maps, ``boxes`` a list of (L, 4)
    boxes in image coordinates per image, ``image_shapes`` the images' (height, width) before the
    backbone (the scale of each level is inferred from them).
    """

    def __init__(self, featmap_names: list[str], output_size, sampling_ratio: int, *, canonical_scale: int = 224,
                 canonical_level: int = 4) -> None:
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.featmap_names, self.sampling_ratio = featmap_names, sampling_ratio
        self.output_size = tuple(output_size)
        self.scales: list[float] | None = None
        self.map_levels: LevelMapper | None = None
        self.canonical_scale, self.canonical_level = canonical_scale, canonical_level

    def _setup_scales(self, features: list[Tensor], image_shapes: list[tuple[int, int]]) -> None:
        if not image_shapes:
            raise ValueError("images list should not be empty")
        original = (max(s[0] for s in image_shapes), max(s[1] for s in image_shapes))
        self.scales = [_infer_scale(f, original) for f in features]
        lvl_min = int(-np.log2(np.float32(self.scales[0])))
        lvl_max = int(-np.log2(np.float32(self.scales[-1])))
        self.map_levels = initLevelMapper(lvl_min, lvl_max, self.canonical_scale, self.canonical_level)

    def forward(self, x: dict[str, Tensor], boxes: list[Tensor], image_shapes: list[tuple[int, int]]) -> Tensor:
        features = [v for k, v in x.items() if k in self.featmap_names]
        self._setup_scales(features, image_shapes)
        rois = _rois(boxes)
        if len(features) == 1:
            return roi_align(features[0], rois, self.output_size, self.scales[0], self.sampling_ratio)
        levels = self.map_levels(boxes).cpu().numpy()
        parts, order = [], []
        for level, (feature, scale) in enumerate(zip(features, self.scales)):
            idx = np.nonzero(levels == level)[0]
            if len(idx):
                picked = rois[as_tensor(idx, device=rois.device)]
                parts.append(roi_align(feature, picked, self.output_size, scale, self.sampling_ratio))
                order.append(idx)
        if not parts:
            return zeros((0, features[0].shape[1], *self.output_size), dtype=features[0].dtype,
                         device=features[0].device)
        inverse = np.argsort(np.concatenate(order), kind="stable")   # back to the boxes' order
        return cat(parts, 0)[as_tensor(inverse, device=rois.device)]

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(featmap_names={self.featmap_names}, "
                f"output_size={self.output_size}, sampling_ratio={self.sampling_ratio})")
