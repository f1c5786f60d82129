"""The pieces every detector shares: the box coder (boxes as deltas from reference boxes), the
IoU matcher and the sampler that balances positives and negatives per image."""
from __future__ import annotations

import math
from typing import Any

from .... import nn
from ....base.dtype import int64, uint8
from ....base.grad_mode import no_grad
from ....core.creation import arange, full, randperm, zeros
from ....core.tensor import Tensor
from ....nn import functional as F
from ....ops.movement import cat, stack
from ...ops import boxes as box_ops
from ...ops.losses import complete_box_iou_loss, distance_box_iou_loss, generalized_box_iou_loss
from ...ops.misc import FrozenBatchNorm2d

__all__ = ["BoxCoder", "Matcher", "SSDMatcher", "BalancedPositiveNegativeSampler", "overwrite_eps", "retrieve_out_channels",
           "box_loss", "detection_arguments"]


class BalancedPositiveNegativeSampler:
    """Per image, at most ``batch_size_per_image`` examples, a ``positive_fraction`` of them positive
    (label >= 1) when there are enough, the rest negative (label 0), both drawn at random.

    ``__call__(labels)`` returns two lists of uint8 masks over each image's examples.
    """

    def __init__(self, batch_size_per_image: int, positive_fraction: float) -> None:
        self.batch_size_per_image = batch_size_per_image
        self.positive_fraction = positive_fraction

    def __call__(self, matched_idxs: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        pos_masks, neg_masks = [], []
        for labels in matched_idxs:
            positive = (labels >= 1).nonzero().reshape(-1)
            negative = (labels == 0).nonzero().reshape(-1)
            num_pos = min(positive.numel(), int(self.batch_size_per_image * self.positive_fraction))
            num_neg = min(negative.numel(), self.batch_size_per_image - num_pos)
            pos = positive[randperm(positive.numel(), device=positive.device)[:num_pos]]
            neg = negative[randperm(negative.numel(), device=negative.device)[:num_neg]]
            for picked, masks in ((pos, pos_masks), (neg, neg_masks)):
                mask = labels.new_zeros(labels.shape, dtype=uint8)
                mask[picked] = 1
                masks.append(mask)
        return pos_masks, neg_masks


class BoxCoder:
    """Boxes as (dx, dy, dw, dh) from reference boxes: centre offsets in units of the reference's size
    and log size ratios, each times its weight (R-CNN's parametrisation); ``decode`` clamps dw and dh
    at ``bbox_xform_clip`` so exp cannot overflow."""

    def __init__(self, weights: tuple[float, float, float, float],
                 bbox_xform_clip: float = math.log(1000.0 / 16)) -> None:
        self.weights = weights
        self.bbox_xform_clip = bbox_xform_clip

    def encode(self, reference_boxes: list[Tensor], proposals: list[Tensor]) -> tuple[Tensor, ...]:
        """Per image, the deltas that take each proposal to its reference (ground-truth) box."""
        counts = [len(b) for b in reference_boxes]
        return self.encode_single(cat(reference_boxes, 0), cat(proposals, 0)).split(counts, 0)

    def encode_single(self, reference_boxes: Tensor, proposals: Tensor) -> Tensor:
        wx, wy, ww, wh = self.weights
        ex_w, ex_h, ex_x, ex_y = _size_and_centre(proposals)
        gt_w, gt_h, gt_x, gt_y = _size_and_centre(reference_boxes)
        return stack((wx * (gt_x - ex_x) / ex_w, wy * (gt_y - ex_y) / ex_h,
                      ww * (gt_w / ex_w).log(), wh * (gt_h / ex_h).log()), dim=1)

    def decode(self, rel_codes: Tensor, boxes: list[Tensor]) -> Tensor:
        """(sum of boxes, K, 4) boxes from the (sum of boxes, 4K) deltas applied to each image's boxes."""
        total = sum(b.shape[0] for b in boxes)
        if total > 0:
            rel_codes = rel_codes.reshape(total, -1)
        pred = self.decode_single(rel_codes, cat(boxes, 0))
        return pred.reshape(total, -1, 4) if total > 0 else pred

    def decode_single(self, rel_codes: Tensor, boxes: Tensor) -> Tensor:
        boxes = boxes.to(rel_codes.dtype)
        widths, heights, ctr_x, ctr_y = (v[:, None] for v in _size_and_centre(boxes))
        wx, wy, ww, wh = self.weights
        dx, dy = rel_codes[:, 0::4] / wx, rel_codes[:, 1::4] / wy
        dw = (rel_codes[:, 2::4] / ww).clamp(max=self.bbox_xform_clip)
        dh = (rel_codes[:, 3::4] / wh).clamp(max=self.bbox_xform_clip)
        x, y = dx * widths + ctr_x, dy * heights + ctr_y
        half_w, half_h = 0.5 * dw.exp() * widths, 0.5 * dh.exp() * heights
        return stack((x - half_w, y - half_h, x + half_w, y + half_h), dim=2).flatten(1)


def _size_and_centre(boxes: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    widths, heights = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    return widths, heights, boxes[:, 0] + 0.5 * widths, boxes[:, 1] + 0.5 * heights


class Matcher:
    """Each prediction's best ground truth by IoU (the columns of ``match_quality_matrix``, one row per
    ground truth): its index when the IoU is at least ``high_threshold``, ``BELOW_LOW_THRESHOLD``
    under ``low_threshold``, ``BETWEEN_THRESHOLDS`` in between. With ``allow_low_quality_matches``
    the predictions that are some ground truth's best match keep that match whatever its IoU."""

    BELOW_LOW_THRESHOLD = -1
    BETWEEN_THRESHOLDS = -2

    def __init__(self, high_threshold: float, low_threshold: float, allow_low_quality_matches: bool = False) -> None:
        if low_threshold > high_threshold:
            raise ValueError(f"Matcher: low_threshold {low_threshold} is above high_threshold {high_threshold}")
        self.high_threshold, self.low_threshold = high_threshold, low_threshold
        self.allow_low_quality_matches = allow_low_quality_matches

    def __call__(self, match_quality_matrix: Tensor) -> Tensor:
        if match_quality_matrix.numel() == 0:
            if match_quality_matrix.shape[0] == 0:
                raise ValueError("No ground-truth boxes available for one of the images during training")
            raise ValueError("No proposal boxes available for one of the images during training")
        matched_vals, matches = match_quality_matrix.max(dim=0)
        best = matches.clone() if self.allow_low_quality_matches else None
        below = matched_vals < self.low_threshold
        between = (matched_vals >= self.low_threshold) & (matched_vals < self.high_threshold)
        matches[below] = self.BELOW_LOW_THRESHOLD
        matches[between] = self.BETWEEN_THRESHOLDS
        if best is not None:
            self.set_low_quality_matches_(matches, best, match_quality_matrix)
        return matches

    def set_low_quality_matches_(self, matches: Tensor, all_matches: Tensor, match_quality_matrix: Tensor) -> None:
        """Restore the match of every prediction that ties for some ground truth's highest IoU."""
        highest, _ = match_quality_matrix.max(dim=1)
        preds = (match_quality_matrix == highest[:, None]).nonzero()[:, 1]
        matches[preds] = all_matches[preds]


def match_anchors(matcher: Matcher, targets: list[dict], anchors: list[Tensor]) -> list[Tensor]:
    """Per image, each anchor's matched target box by IoU (-1 for none; all -1 for an image without boxes)."""
    matched = []
    for anchors_i, target in zip(anchors, targets):
        if target["boxes"].numel() == 0:
            matched.append(full((anchors_i.shape[0],), -1, dtype=int64, device=anchors_i.device))
        else:
            matched.append(matcher(box_ops.box_iou(target["boxes"], anchors_i)))
    return matched


def overwrite_eps(model: nn.Module, eps: float) -> None:
    """Set every FrozenBatchNorm2d's eps (the first COCO checkpoints were trained with eps 0)."""
    for module in model.modules():
        if isinstance(module, FrozenBatchNorm2d):
            module.eps = eps


class SSDMatcher(Matcher):
    """SSD's matching: IoU at least ``threshold``, and every ground truth also takes its best prediction."""

    def __init__(self, threshold: float) -> None:
        super().__init__(threshold, threshold, allow_low_quality_matches=False)

    def __call__(self, match_quality_matrix: Tensor) -> Tensor:
        matches = super().__call__(match_quality_matrix)
        _, best_pred = match_quality_matrix.max(dim=1)
        matches[best_pred] = arange(best_pred.shape[0], dtype=matches.dtype, device=matches.device)
        return matches


def retrieve_out_channels(model: nn.Module, size: tuple[int, int]) -> list[int]:
    """The channels of each feature map ``model`` returns for a zero image of ``size`` (width, height)."""
    was_training = model.training
    model.eval()
    with no_grad():
        features = model(zeros((1, 3, size[1], size[0])))
    model.train(was_training)
    if isinstance(features, Tensor):
        return [int(features.shape[1])]
    return [int(x.shape[1]) for x in features.values()]


def box_loss(kind: str, box_coder: BoxCoder, anchors: Tensor, target_boxes: Tensor, deltas: Tensor,
             cnf: dict | None = None) -> Tensor:
    """The summed box loss of ``kind``: ``l1`` / ``smooth_l1`` on the encoded deltas, or ``giou`` /
    ``diou`` / ``ciou`` on the decoded boxes."""
    if kind not in ("l1", "smooth_l1", "ciou", "diou", "giou"):
        raise ValueError(f"Unsupported loss: {kind}")
    cnf = cnf or {}
    if kind in ("l1", "smooth_l1"):
        wanted = box_coder.encode_single(target_boxes, anchors)
        if kind == "l1":
            return F.l1_loss(deltas, wanted, reduction="sum")
        return F.smooth_l1_loss(deltas, wanted, reduction="sum", beta=cnf.get("beta", 1.0))
    boxes = box_coder.decode_single(deltas, anchors)
    loss = {"ciou": complete_box_iou_loss, "diou": distance_box_iou_loss, "giou": generalized_box_iou_loss}[kind]
    return loss(boxes, target_boxes, reduction="sum", eps=cnf.get("eps", 1e-7))


def detection_arguments(weights: Any, num_classes: int | None, weights_backbone: Any) -> tuple[int, Any]:
    """``num_classes`` (91, COCO's category ids, by default) and the backbone weights of a builder.

    Whole-model checkpoints are not offered by name yet: ``weights=`` raises, and a torchvision
    state_dict loads into a model built with ``weights=None`` (the keys are torchvision's).
    """
    if weights is not None:
        raise NotImplementedError("pretrained detection weights are not available by name yet: build with "
                                  "weights=None and load_state_dict a torchvision checkpoint")
    return (91 if num_classes is None else num_classes), weights_backbone
