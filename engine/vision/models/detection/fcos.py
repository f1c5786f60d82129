"""FCOS (Tian et al. 2019): anchor-free, one point per cell. Each point inside a ground-truth box
(within 1.5 strides of its centre, and whose distances fit the level's size range) regresses its
distances to the box's sides (GIoU loss) and a centre-ness (BCE); scores are sqrt(class * centre-ness)."""
from __future__ import annotations

import math
from functools import partial
from typing import Any

from .... import nn
from ....base.dtype import float32, int64
from ....core.creation import full
from ....core.tensor import Tensor
from ....nn import functional as F
from ....nn import init
from ....ops.movement import stack
from ...ops.feature_pyramid_network import LastLevelP6P7
from ...ops.losses import generalized_box_iou_loss, sigmoid_focal_loss
from .._api import register_model
from ._utils import detection_arguments
from .anchor_utils import AnchorGenerator
from .backbone_utils import resnet50_fpn_backbone
from .retinanet import DenseDetector, flatten_levels

__all__ = ["FCOS", "FCOSHead", "FCOSClassificationHead", "FCOSRegressionHead", "BoxLinearCoder", "fcos_resnet50_fpn"]


class BoxLinearCoder:
    """Boxes as the distances (left, top, right, bottom) from the reference box's centre to their
    sides, divided by the reference's width and height when ``normalize_by_size``."""

    def __init__(self, normalize_by_size: bool = True) -> None:
        self.normalize_by_size = normalize_by_size

    def _sizes(self, boxes: Tensor) -> Tensor:
        w, h = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
        return stack((w, h, w, h), dim=-1)

    def encode(self, reference_boxes: Tensor, proposals: Tensor) -> Tensor:
        cx, cy = 0.5 * (reference_boxes[..., 0] + reference_boxes[..., 2]), 0.5 * (reference_boxes[..., 1] +
                                                                                     reference_boxes[..., 3])
        targets = stack((cx - proposals[..., 0], cy - proposals[..., 1], proposals[..., 2] - cx,
                         proposals[..., 3] - cy), dim=-1)
        return targets / self._sizes(reference_boxes) if self.normalize_by_size else targets

    def decode(self, rel_codes: Tensor, boxes: Tensor) -> Tensor:
        boxes = boxes.to(rel_codes.dtype)
        cx, cy = 0.5 * (boxes[..., 0] + boxes[..., 2]), 0.5 * (boxes[..., 1] + boxes[..., 3])
        if self.normalize_by_size:
            rel_codes = rel_codes * self._sizes(boxes)
        return stack((cx - rel_codes[..., 0], cy - rel_codes[..., 1], cx + rel_codes[..., 2], cy + rel_codes[..., 3]),
                     dim=-1)


def _gn_tower(in_channels: int, num_convs: int, norm_layer, draw: bool = True) -> nn.Sequential:
    """``num_convs`` x (3x3 conv, norm, ReLU) as flat children; conv weights N(0, 0.01), biases zero
    (``draw=False``: drawn later by ``_draw_gn_tower``)."""
    norm_layer = norm_layer or partial(nn.GroupNorm, 32)
    layers: list[nn.Module] = []
    for _ in range(num_convs):
        layers += [nn.Conv2d(in_channels, in_channels, kernel_size=3, stride=1, padding=1), norm_layer(in_channels),
                   nn.ReLU()]
    tower = nn.Sequential(*layers)
    return _draw_gn_tower(tower) if draw else tower


def _draw_gn_tower(tower: nn.Sequential) -> nn.Sequential:
    for layer in tower.children():
        if isinstance(layer, nn.Conv2d):
            init.normal_(layer.weight, std=0.01)
            init.constant_(layer.bias, 0)
    return tower


class FCOSClassificationHead(nn.Module):
    """Class logits per point; the last conv's bias starts at the prior ``prior_probability``."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, num_convs: int = 4,
                 prior_probability: float = 0.01, norm_layer=None) -> None:
        super().__init__()
        self.num_classes, self.num_anchors = num_classes, num_anchors
        self.conv = _gn_tower(in_channels, num_convs, norm_layer)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3, stride=1, padding=1)
        init.normal_(self.cls_logits.weight, std=0.01)
        init.constant_(self.cls_logits.bias, -math.log((1 - prior_probability) / prior_probability))

    def forward(self, x: list[Tensor]) -> Tensor:
        return flatten_levels([self.cls_logits(self.conv(f)) for f in x], self.num_classes)


class FCOSRegressionHead(nn.Module):
    """Side distances (ReLU, so never negative) and a centre-ness logit per point."""

    def __init__(self, in_channels: int, num_anchors: int, num_convs: int = 4, norm_layer=None) -> None:
        super().__init__()
        # torchvision's order of the seeded draws: the two output convs', then the tower's N(0, 0.01)
        self.conv = _gn_tower(in_channels, num_convs, norm_layer, draw=False)
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1, padding=1)
        self.bbox_ctrness = nn.Conv2d(in_channels, num_anchors * 1, kernel_size=3, stride=1, padding=1)
        for layer in (self.bbox_reg, self.bbox_ctrness):
            init.normal_(layer.weight, std=0.01)
            init.zeros_(layer.bias)
        _draw_gn_tower(self.conv)

    def forward(self, x: list[Tensor]) -> tuple[Tensor, Tensor]:
        feats = [self.conv(f) for f in x]
        return (flatten_levels([F.relu(self.bbox_reg(f)) for f in feats], 4),
                flatten_levels([self.bbox_ctrness(f) for f in feats], 1))


class FCOSHead(nn.Module):
    """Classification and regression towers; ``compute_loss`` gives the three FCOS losses."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, num_convs: int | None = 4) -> None:
        super().__init__()
        self.box_coder = BoxLinearCoder(normalize_by_size=True)
        self.classification_head = FCOSClassificationHead(in_channels, num_anchors, num_classes, num_convs)
        self.regression_head = FCOSRegressionHead(in_channels, num_anchors, num_convs)

    def compute_loss(self, targets: list[dict], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     matched_idxs: list[Tensor]) -> dict[str, Tensor]:
        """Focal loss over all points, GIoU and centre-ness BCE over the foreground, each summed and
        divided by the number of foreground points."""
        cls_logits, bbox_regression = head_outputs["cls_logits"], head_outputs["bbox_regression"]
        gt_classes, gt_boxes = [], []
        for target, matched in zip(targets, matched_idxs):
            if len(target["labels"]) == 0:
                classes = target["labels"].new_zeros((len(matched),))
                boxes = target["boxes"].new_zeros((len(matched), 4))
            else:
                classes, boxes = target["labels"][matched.clamp(min=0)], target["boxes"][matched.clamp(min=0)]
            classes[matched < 0] = -1
            gt_classes.append(classes)
            gt_boxes.append(boxes)
        gt_boxes, gt_classes, anchors = stack(gt_boxes), stack(gt_classes), stack(anchors)
        foreground = gt_classes >= 0
        num_foreground = max(1, int(foreground.sum().item()))
        fg = foreground.nonzero()
        onehot = cls_logits.new_zeros(cls_logits.shape)
        onehot[fg[:, 0], fg[:, 1], gt_classes[fg[:, 0], fg[:, 1]]] = 1.0
        loss_cls = sigmoid_focal_loss(cls_logits, onehot, reduction="sum")
        pred_boxes = self.box_coder.decode(bbox_regression, anchors)
        loss_reg = generalized_box_iou_loss(pred_boxes[foreground], gt_boxes[foreground], reduction="sum")
        reg_targets = self.box_coder.encode(anchors, gt_boxes)
        left_right, top_bottom = reg_targets[:, :, [0, 2]], reg_targets[:, :, [1, 3]]
        centreness = ((left_right.min(dim=-1)[0] / left_right.max(dim=-1)[0])
                      * (top_bottom.min(dim=-1)[0] / top_bottom.max(dim=-1)[0])).sqrt()
        loss_ctr = F.binary_cross_entropy_with_logits(head_outputs["bbox_ctrness"].squeeze(dim=2)[foreground],
                                                      centreness[foreground], reduction="sum")
        return {"classification": loss_cls / num_foreground, "bbox_regression": loss_reg / num_foreground,
                "bbox_ctrness": loss_ctr / num_foreground}

    def forward(self, x: list[Tensor]) -> dict[str, Tensor]:
        bbox_regression, bbox_ctrness = self.regression_head(x)
        return {"cls_logits": self.classification_head(x), "bbox_regression": bbox_regression,
                "bbox_ctrness": bbox_ctrness}


def _default_anchorgen() -> AnchorGenerator:
    """One point (a square of the level's stride) per cell."""
    sizes = ((8,), (16,), (32,), (64,), (128,))
    return AnchorGenerator(sizes, ((1.0,),) * len(sizes))


class FCOS(DenseDetector):
    """FCOS on ``backbone`` (with ``out_channels``). Training returns ``classification``,
    ``bbox_regression`` and ``bbox_ctrness`` losses; eval per image ``boxes``, ``scores``, ``labels``."""

    def __init__(self, backbone: nn.Module, num_classes: int, min_size=800, max_size: int = 1333,
                 image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 anchor_generator: AnchorGenerator | None = None, head: nn.Module | None = None,
                 center_sampling_radius: float = 1.5, score_thresh: float = 0.2, nms_thresh: float = 0.6,
                 detections_per_img: int = 100, topk_candidates: int = 1000, **kwargs: Any) -> None:
        super().__init__()
        self._setup(backbone, anchor_generator, _default_anchorgen, min_size, max_size, image_mean, image_std,
                    score_thresh, nms_thresh, detections_per_img, topk_candidates, **kwargs)
        if head is None:
            head = FCOSHead(backbone.out_channels, self.anchor_generator.num_anchors_per_location()[0], num_classes)
        self.head = head
        self.box_coder = BoxLinearCoder(normalize_by_size=True)
        self.center_sampling_radius = center_sampling_radius

    def compute_loss(self, targets: list[dict], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     num_anchors_per_level: list[int]) -> dict[str, Tensor]:
        """Match each point to the smallest ground-truth box it may regress (-1: background)."""
        matched_idxs = []
        for anchors_i, target in zip(anchors, targets):
            if target["boxes"].numel() == 0:
                matched_idxs.append(full((anchors_i.shape[0],), -1, dtype=int64, device=anchors_i.device))
                continue
            gt = target["boxes"]
            gt_centres = (gt[:, :2] + gt[:, 2:]) / 2
            points = (anchors_i[:, :2] + anchors_i[:, 2:]) / 2
            sizes = anchors_i[:, 2] - anchors_i[:, 0]
            match = ((points[:, None, :] - gt_centres[None, :, :]).abs().max(dim=2).values
                     < self.center_sampling_radius * sizes[:, None])
            x, y = points[:, 0:1], points[:, 1:2]
            dist = stack([x - gt[None, :, 0], y - gt[None, :, 1], gt[None, :, 2] - x, gt[None, :, 3] - y], dim=2)
            match = match & (dist.min(dim=2).values > 0)
            lower, upper = sizes * 4, sizes * 8
            lower[: num_anchors_per_level[0]] = 0
            upper[-num_anchors_per_level[-1]:] = float("inf")
            reach = dist.max(dim=2).values
            match = match & (reach > lower[:, None]) & (reach < upper[:, None])
            areas = (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1])
            best, matched = (match.to(float32) * (1e8 - areas[None, :])).max(dim=1)
            matched[best < 1e-5] = -1
            matched_idxs.append(matched)
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def losses(self, targets, head_outputs, anchors, num_anchors_per_level) -> dict[str, Tensor]:
        return self.compute_loss(targets, head_outputs, anchors, num_anchors_per_level)

    def _level_scores(self, head_outputs: dict[str, list[Tensor]], index: int, level: int) -> Tensor:
        """sqrt(class probability * centre-ness) per (anchor, class)."""
        logits, ctr = head_outputs["cls_logits"][level][index], head_outputs["bbox_ctrness"][level][index]
        return (logits.sigmoid() * ctr.sigmoid()).sqrt().flatten()

    def _decode(self, deltas: Tensor, anchors: Tensor) -> Tensor:
        return self.box_coder.decode(deltas, anchors)


@register_model()
def fcos_resnet50_fpn(*, weights=None, progress: bool = True, num_classes: int | None = None,
                      weights_backbone: Any = "IMAGENET1K_V1", trainable_backbone_layers: int | None = None,
                      **kwargs: Any) -> FCOS:
    """FCOS, ResNet-50-FPN with P6/P7 (32,269,600 parameters with 91 classes and a pretrained backbone,
    whose batch norms are frozen buffers)."""
    num_classes, weights_backbone = detection_arguments(weights, num_classes, weights_backbone)
    backbone = resnet50_fpn_backbone(weights_backbone, progress, trainable_backbone_layers, returned_layers=[2, 3, 4],
                                     extra_blocks=lambda: LastLevelP6P7(256, 256))
    return FCOS(backbone, num_classes, **kwargs)
