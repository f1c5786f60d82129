"""The region proposal network (Faster R-CNN): a small conv head scores and refines the anchors of
every feature map; the best ``pre_nms_top_n`` per map, clipped, pruned and NMS-ed per map, are the
proposals. In training it also returns its objectness and box-regression losses."""
from __future__ import annotations

from .... import nn
from ....base.dtype import float32, int64
from ....core.creation import arange, full, zeros
from ....core.tensor import Tensor
from ....nn import functional as F
from ....nn import init
from ....ops.movement import cat
from ...ops import boxes as box_ops
from ...ops.misc import Conv2dNormActivation, rename_v1_convs
from . import _utils as det_utils
from .anchor_utils import AnchorGenerator
from .image_list import ImageList

__all__ = ["RPNHead", "RegionProposalNetwork", "concat_box_prediction_layers"]


class RPNHead(nn.Module):
    """``conv_depth`` 3x3 conv-ReLUs, then per location ``num_anchors`` objectness logits and 4 deltas each."""

    _version = 2   # version 1 had one plain conv: ``conv.weight`` is now ``conv.0.0.weight``

    def __init__(self, in_channels: int, num_anchors: int, conv_depth: int = 1) -> None:
        super().__init__()
        self.conv = nn.Sequential(*[Conv2dNormActivation(in_channels, in_channels, kernel_size=3, norm_layer=None)
                                    for _ in range(conv_depth)])
        self.cls_logits = nn.Conv2d(in_channels, num_anchors, kernel_size=1, stride=1)
        self.bbox_pred = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=1, stride=1)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                init.normal_(layer.weight, std=0.01)
                if layer.bias is not None:
                    init.constant_(layer.bias, 0)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        rename_v1_convs(state_dict, prefix, local_metadata, {"conv": "conv.0.0"})
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        logits, bbox_reg = [], []
        for feature in x:
            t = self.conv(feature)
            logits.append(self.cls_logits(t))
            bbox_reg.append(self.bbox_pred(t))
        return logits, bbox_reg


def permute_and_flatten(layer: Tensor, N: int, A: int, C: int, H: int, W: int) -> Tensor:
    """(N, A*C, H, W) -> (N, H*W*A, C): location-major, as the anchors are laid out."""
    return layer.reshape(N, -1, C, H, W).permute(0, 3, 4, 1, 2).reshape(N, -1, C)


def concat_box_prediction_layers(box_cls: list[Tensor], box_regression: list[Tensor]) -> tuple[Tensor, Tensor]:
    """All maps' scores as (N * anchors, C) and deltas as (N * anchors, 4), in the anchors' order."""
    flat_cls, flat_reg = [], []
    for cls, reg in zip(box_cls, box_regression):
        N, AxC, H, W = cls.shape
        A = reg.shape[1] // 4
        flat_cls.append(permute_and_flatten(cls, N, A, AxC // A, H, W))
        flat_reg.append(permute_and_flatten(reg, N, A, 4, H, W))
    return cat(flat_cls, dim=1).flatten(0, -2), cat(flat_reg, dim=1).reshape(-1, 4)


class RegionProposalNetwork(nn.Module):
    """``forward(images, features, targets=None)`` returns (proposals per image, losses).

    ``pre_nms_top_n`` / ``post_nms_top_n`` are dicts with ``training`` and ``testing`` entries.
    """

    def __init__(self, anchor_generator: AnchorGenerator, head: nn.Module, fg_iou_thresh: float,
                 bg_iou_thresh: float, batch_size_per_image: int, positive_fraction: float,
                 pre_nms_top_n: dict[str, int], post_nms_top_n: dict[str, int], nms_thresh: float,
                 score_thresh: float = 0.0) -> None:
        super().__init__()
        self.anchor_generator = anchor_generator
        self.head = head
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh, allow_low_quality_matches=True)
        self.fg_bg_sampler = det_utils.BalancedPositiveNegativeSampler(batch_size_per_image, positive_fraction)
        self._pre_nms_top_n, self._post_nms_top_n = pre_nms_top_n, post_nms_top_n
        self.nms_thresh, self.score_thresh = nms_thresh, score_thresh
        self.min_size = 1e-3

    def pre_nms_top_n(self) -> int:
        return self._pre_nms_top_n["training" if self.training else "testing"]

    def post_nms_top_n(self) -> int:
        return self._post_nms_top_n["training" if self.training else "testing"]

    def assign_targets_to_anchors(self, anchors: list[Tensor], targets: list[dict]) -> tuple[list[Tensor], list[Tensor]]:
        """Per image: anchor labels (1 object, 0 background, -1 ignored) and each anchor's matched box."""
        labels, matched_gt_boxes = [], []
        for anchors_per_image, target in zip(anchors, targets):
            gt_boxes = target["boxes"]
            if gt_boxes.numel() == 0:
                matched_gt_boxes.append(zeros(anchors_per_image.shape, dtype=float32, device=anchors_per_image.device))
                labels.append(zeros((anchors_per_image.shape[0],), dtype=float32, device=anchors_per_image.device))
                continue
            matched = self.proposal_matcher(self.box_similarity(gt_boxes, anchors_per_image))
            matched_gt_boxes.append(gt_boxes[matched.clamp(min=0)])
            image_labels = (matched >= 0).to(float32)
            image_labels[matched == self.proposal_matcher.BELOW_LOW_THRESHOLD] = 0.0
            image_labels[matched == self.proposal_matcher.BETWEEN_THRESHOLDS] = -1.0
            labels.append(image_labels)
        return labels, matched_gt_boxes

    def _get_top_n_idx(self, objectness: Tensor, num_anchors_per_level: list[int]) -> Tensor:
        picked, offset = [], 0
        for level in objectness.split(num_anchors_per_level, 1):
            n = level.shape[1]
            _, idx = level.topk(min(self.pre_nms_top_n(), n), dim=1)
            picked.append(idx + offset)
            offset += n
        return cat(picked, dim=1)

    def filter_proposals(self, proposals: Tensor, objectness: Tensor, image_shapes: list[tuple[int, int]],
                         num_anchors_per_level: list[int]) -> tuple[list[Tensor], list[Tensor]]:
        num_images = proposals.shape[0]
        objectness = objectness.detach().reshape(num_images, -1)
        levels = cat([full((n,), idx, dtype=int64, device=proposals.device)
                      for idx, n in enumerate(num_anchors_per_level)], 0).reshape(1, -1).expand_as(objectness)
        top_n_idx = self._get_top_n_idx(objectness, num_anchors_per_level)
        batch_idx = arange(num_images, device=proposals.device)[:, None]
        objectness, levels = objectness[batch_idx, top_n_idx], levels[batch_idx, top_n_idx]
        proposals = proposals[batch_idx, top_n_idx]
        final_boxes, final_scores = [], []
        for boxes, scores, lvl, shape in zip(proposals, objectness.sigmoid(), levels, image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, shape)
            keep = box_ops.remove_small_boxes(boxes, self.min_size)
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = (scores >= self.score_thresh).nonzero().reshape(-1)
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = box_ops.batched_nms(boxes, scores, lvl, self.nms_thresh)[: self.post_nms_top_n()]
            final_boxes.append(boxes[keep])
            final_scores.append(scores[keep])
        return final_boxes, final_scores

    def compute_loss(self, objectness: Tensor, pred_bbox_deltas: Tensor, labels: list[Tensor],
                     regression_targets: list[Tensor]) -> tuple[Tensor, Tensor]:
        """Binary cross-entropy over the sampled anchors; smooth L1 (beta 1/9) over the positive ones,
        summed and divided by the number sampled."""
        pos_masks, neg_masks = self.fg_bg_sampler(labels)
        pos = cat(pos_masks, dim=0).nonzero().reshape(-1)
        neg = cat(neg_masks, dim=0).nonzero().reshape(-1)
        sampled = cat([pos, neg], dim=0)
        labels, regression_targets = cat(labels, dim=0), cat(regression_targets, dim=0)
        box_loss = F.smooth_l1_loss(pred_bbox_deltas[pos], regression_targets[pos], beta=1 / 9,
                                    reduction="sum") / sampled.numel()
        objectness_loss = F.binary_cross_entropy_with_logits(objectness.flatten()[sampled], labels[sampled])
        return objectness_loss, box_loss

    def forward(self, images: ImageList, features: dict[str, Tensor],
                targets: list[dict] | None = None) -> tuple[list[Tensor], dict[str, Tensor]]:
        features = list(features.values())
        objectness, pred_bbox_deltas = self.head(features)
        anchors = self.anchor_generator(images, features)
        num_images = len(anchors)
        num_anchors_per_level = [int(o.shape[1] * o.shape[2] * o.shape[3]) for o in objectness]
        objectness, pred_bbox_deltas = concat_box_prediction_layers(objectness, pred_bbox_deltas)
        proposals = self.box_coder.decode(pred_bbox_deltas.detach(), anchors).reshape(num_images, -1, 4)
        boxes, _ = self.filter_proposals(proposals, objectness, images.image_sizes, num_anchors_per_level)
        losses = {}
        if self.training:
            if targets is None:
                raise ValueError("targets should not be None")
            labels, matched_gt_boxes = self.assign_targets_to_anchors(anchors, targets)
            regression_targets = self.box_coder.encode(matched_gt_boxes, anchors)
            loss_objectness, loss_rpn_box_reg = self.compute_loss(objectness, pred_bbox_deltas, labels,
                                                                  regression_targets)
            losses = {"loss_objectness": loss_objectness, "loss_rpn_box_reg": loss_rpn_box_reg}
        return boxes, losses
