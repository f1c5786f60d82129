"""RoIHeads: the second stage of Faster / Mask R-CNN. Proposals (plus, in training, the ground truth)
are matched and sampled, pooled from the feature maps, classified and refined; in eval the refined
boxes are thresholded, NMS-ed per class and capped. The mask branch predicts a mask per box."""
from __future__ import annotations

from .... import nn
from ....base.dtype import float32, int64
from ....core.creation import arange, zeros
from ....core.tensor import Tensor
from ....nn import functional as F
from ....ops.movement import cat, stack
from ...ops import boxes as box_ops
from ...ops.roi_align import roi_align
from . import _utils as det_utils

__all__ = ["RoIHeads", "fastrcnn_loss", "maskrcnn_loss", "maskrcnn_inference", "paste_masks_in_image",
           "keypointrcnn_loss", "keypointrcnn_inference"]


def fastrcnn_loss(class_logits: Tensor, box_regression: Tensor, labels: list[Tensor],
                  regression_targets: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Cross-entropy over the sampled proposals; smooth L1 (beta 1/9) of the true class's deltas over
    the positive ones, summed and divided by the number sampled."""
    labels, regression_targets = cat(labels, 0), cat(regression_targets, 0)
    classification_loss = F.cross_entropy(class_logits, labels)
    pos = (labels > 0).nonzero().reshape(-1)
    N = class_logits.shape[0]
    box_regression = box_regression.reshape(N, box_regression.shape[-1] // 4, 4)
    box_loss = F.smooth_l1_loss(box_regression[pos, labels[pos]], regression_targets[pos], beta=1 / 9,
                                reduction="sum")
    return classification_loss, box_loss / labels.numel()


def maskrcnn_inference(x: Tensor, labels: list[Tensor]) -> list[Tensor]:
    """Each box's mask probabilities for its predicted class, (boxes, 1, M, M) per image."""
    labels_all = cat(labels)
    probs = x.sigmoid()[arange(x.shape[0], device=labels_all.device), labels_all][:, None]
    return list(probs.split([len(label) for label in labels], dim=0))


def project_masks_on_boxes(gt_masks: Tensor, boxes: Tensor, matched_idxs: Tensor, M: int) -> Tensor:
    """The ground-truth mask matched to each box, cropped to the box and resampled to M x M (RoIAlign)."""
    rois = cat([matched_idxs.to(boxes.dtype)[:, None], boxes], dim=1)
    return roi_align(gt_masks[:, None].to(rois.dtype), rois, (M, M), 1.0)[:, 0]


def maskrcnn_loss(mask_logits: Tensor, proposals: list[Tensor], gt_masks: list[Tensor], gt_labels: list[Tensor],
                  mask_matched_idxs: list[Tensor]) -> Tensor:
    """Per-pixel binary cross-entropy of the true class's mask against the projected ground truth."""
    M = mask_logits.shape[-1]
    labels = cat([gt[idxs] for gt, idxs in zip(gt_labels, mask_matched_idxs)])
    targets = cat([project_masks_on_boxes(m, p, i, M) for m, p, i in zip(gt_masks, proposals, mask_matched_idxs)])
    if targets.numel() == 0:
        return mask_logits.sum() * 0
    picked = mask_logits[arange(labels.shape[0], device=labels.device), labels]
    return F.binary_cross_entropy_with_logits(picked, targets)


def keypoints_to_heatmap(keypoints: Tensor, rois: Tensor, heatmap_size: int) -> tuple[Tensor, Tensor]:
    """Each visible keypoint inside its box as the flat index of its cell on a ``heatmap_size`` grid
    over the box, and whether it counts (visible and inside)."""
    scale_x = (heatmap_size / (rois[:, 2] - rois[:, 0]))[:, None]
    scale_y = (heatmap_size / (rois[:, 3] - rois[:, 1]))[:, None]
    x, y = keypoints[..., 0], keypoints[..., 1]
    x_edge, y_edge = x == rois[:, 2][:, None], y == rois[:, 3][:, None]
    x = ((x - rois[:, 0][:, None]) * scale_x).floor().long()
    y = ((y - rois[:, 1][:, None]) * scale_y).floor().long()
    x[x_edge] = heatmap_size - 1
    y[y_edge] = heatmap_size - 1
    inside = (x >= 0) & (y >= 0) & (x < heatmap_size) & (y < heatmap_size)
    valid = (inside & (keypoints[..., 2] > 0)).long()
    return (y * heatmap_size + x) * valid, valid


def keypointrcnn_loss(keypoint_logits: Tensor, proposals: list[Tensor], gt_keypoints: list[Tensor],
                      keypoint_matched_idxs: list[Tensor]) -> Tensor:
    """Cross-entropy over each valid keypoint's heatmap cells (one class per cell)."""
    N, K, H, W = keypoint_logits.shape
    if H != W:
        raise ValueError(f"keypoint_logits height and width (last two elements of shape) should be equal. "
                         f"Instead got H = {H} and W = {W}")
    heatmaps, valid = [], []
    for props, kps, idxs in zip(proposals, gt_keypoints, keypoint_matched_idxs):
        h, v = keypoints_to_heatmap(kps[idxs], props, H)
        heatmaps.append(h.reshape(-1))
        valid.append(v.reshape(-1))
    targets = cat(heatmaps, dim=0)
    valid = cat(valid, dim=0).nonzero().reshape(-1)
    if targets.numel() == 0 or len(valid) == 0:
        return keypoint_logits.sum() * 0
    return F.cross_entropy(keypoint_logits.reshape(N * K, H * W)[valid], targets[valid])


def heatmaps_to_keypoints(maps: Tensor, rois: Tensor) -> tuple[Tensor, Tensor]:
    """Per box: each keypoint at the peak of its heatmap resized (bicubic) to the box, as (x, y, 1),
    and the peak's value as its score."""
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    num_keypoints = maps.shape[1]
    xy, scores = [], []
    for i in range(len(rois)):
        w_i, h_i = int(widths[i].ceil().item()), int(heights[i].ceil().item())
        roi_map = F.interpolate(maps[i][:, None], size=(h_i, w_i), mode="bicubic", align_corners=False)[:, 0]
        pos = roi_map.reshape(num_keypoints, -1).argmax(dim=1)
        x_int, y_int = pos % w_i, pos // w_i
        x = (x_int.float() + 0.5) * (widths[i] / w_i) + rois[i, 0]
        y = (y_int.float() + 0.5) * (heights[i] / h_i) + rois[i, 1]
        xy.append(stack((x, y, x.new_ones(x.shape)), dim=1))
        scores.append(roi_map[arange(num_keypoints, device=maps.device), y_int, x_int])
    if not xy:
        return maps.new_zeros((0, num_keypoints, 3)), maps.new_zeros((0, num_keypoints))
    return stack(xy).to(float32), stack(scores).to(float32)


def keypointrcnn_inference(x: Tensor, boxes: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """Per image: (boxes, K, 3) keypoints and (boxes, K) scores."""
    probs, scores = [], []
    for maps, bb in zip(x.split([len(b) for b in boxes], dim=0), boxes):
        p, s = heatmaps_to_keypoints(maps, bb)
        probs.append(p)
        scores.append(s)
    return probs, scores


def expand_boxes(boxes: Tensor, scale: float) -> Tensor:
    half_w, half_h = (boxes[:, 2] - boxes[:, 0]) * 0.5 * scale, (boxes[:, 3] - boxes[:, 1]) * 0.5 * scale
    x_c, y_c = (boxes[:, 2] + boxes[:, 0]) * 0.5, (boxes[:, 3] + boxes[:, 1]) * 0.5
    return stack((x_c - half_w, y_c - half_h, x_c + half_w, y_c + half_h), dim=1)


def paste_mask_in_image(mask: Tensor, box: list[int], im_h: int, im_w: int) -> Tensor:
    """One M x M mask resized to its (integer) box and written into an empty image."""
    w, h = max(box[2] - box[0] + 1, 1), max(box[3] - box[1] + 1, 1)
    mask = F.interpolate(mask[None, None], size=(h, w), mode="bilinear", align_corners=False)[0, 0]
    out = zeros((im_h, im_w), dtype=mask.dtype, device=mask.device)
    x0, x1 = max(box[0], 0), min(box[2] + 1, im_w)
    y0, y1 = max(box[1], 0), min(box[3] + 1, im_h)
    if x1 > x0 and y1 > y0:
        out[y0:y1, x0:x1] = mask[y0 - box[1]:y1 - box[1], x0 - box[0]:x1 - box[0]]
    return out


def paste_masks_in_image(masks: Tensor, boxes: Tensor, img_shape: tuple[int, int], padding: int = 1) -> Tensor:
    """(N, 1, M, M) box-relative masks as (N, 1, H, W) image masks: each padded by ``padding`` (its box
    grown to match), resized to the box rounded to integers, and pasted."""
    M = masks.shape[-1]
    padded = F.pad(masks, (padding,) * 4)
    scale = float(M + 2 * padding) / M
    int_boxes = expand_boxes(boxes, scale).to(int64).tolist()
    im_h, im_w = (int(s) for s in img_shape)
    pasted = [paste_mask_in_image(m[0], b, im_h, im_w) for m, b in zip(padded, int_boxes)]
    if pasted:
        return stack(pasted, dim=0)[:, None]
    return padded.new_zeros((0, 1, im_h, im_w))


class RoIHeads(nn.Module):
    """``forward(features, proposals, image_shapes, targets=None)`` returns (detections, losses):
    per image ``boxes``/``labels``/``scores`` (and ``masks``) in eval, the losses in training."""

    def __init__(self, box_roi_pool: nn.Module, box_head: nn.Module, box_predictor: nn.Module,
                 fg_iou_thresh: float, bg_iou_thresh: float, batch_size_per_image: int, positive_fraction: float,
                 bbox_reg_weights: tuple[float, float, float, float] | None, score_thresh: float, nms_thresh: float,
                 detections_per_img: int, mask_roi_pool: nn.Module | None = None, mask_head: nn.Module | None = None,
                 mask_predictor: nn.Module | None = None, keypoint_roi_pool: nn.Module | None = None,
                 keypoint_head: nn.Module | None = None, keypoint_predictor: nn.Module | None = None) -> None:
        super().__init__()
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh, allow_low_quality_matches=False)
        self.fg_bg_sampler = det_utils.BalancedPositiveNegativeSampler(batch_size_per_image, positive_fraction)
        self.box_coder = det_utils.BoxCoder(bbox_reg_weights or (10.0, 10.0, 5.0, 5.0))
        self.box_roi_pool, self.box_head, self.box_predictor = box_roi_pool, box_head, box_predictor
        self.score_thresh, self.nms_thresh = score_thresh, nms_thresh
        self.detections_per_img = detections_per_img
        self.mask_roi_pool, self.mask_head, self.mask_predictor = mask_roi_pool, mask_head, mask_predictor
        self.keypoint_roi_pool, self.keypoint_head = keypoint_roi_pool, keypoint_head
        self.keypoint_predictor = keypoint_predictor

    def has_mask(self) -> bool:
        return not (self.mask_roi_pool is None or self.mask_head is None or self.mask_predictor is None)

    def has_keypoint(self) -> bool:
        return not (self.keypoint_roi_pool is None or self.keypoint_head is None or self.keypoint_predictor is None)

    def assign_targets_to_proposals(self, proposals: list[Tensor], gt_boxes: list[Tensor],
                                    gt_labels: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        """Per image: each proposal's matched ground truth (index, clamped at 0) and label (0 background,
        -1 ignored)."""
        matched_idxs, labels = [], []
        for props, boxes, classes in zip(proposals, gt_boxes, gt_labels):
            if boxes.numel() == 0:
                matched_idxs.append(zeros((props.shape[0],), dtype=int64, device=props.device))
                labels.append(zeros((props.shape[0],), dtype=int64, device=props.device))
                continue
            matched = self.proposal_matcher(self.box_similarity(boxes, props))
            clamped = matched.clamp(min=0)
            image_labels = classes[clamped].to(int64)
            image_labels[matched == self.proposal_matcher.BELOW_LOW_THRESHOLD] = 0
            image_labels[matched == self.proposal_matcher.BETWEEN_THRESHOLDS] = -1
            matched_idxs.append(clamped)
            labels.append(image_labels)
        return matched_idxs, labels

    def subsample(self, labels: list[Tensor]) -> list[Tensor]:
        pos_masks, neg_masks = self.fg_bg_sampler(labels)
        return [(pos | neg).nonzero().reshape(-1) for pos, neg in zip(pos_masks, neg_masks)]

    def add_gt_proposals(self, proposals: list[Tensor], gt_boxes: list[Tensor]) -> list[Tensor]:
        return [cat((p, gt)) for p, gt in zip(proposals, gt_boxes)]

    def check_targets(self, targets: list[dict] | None) -> None:
        if targets is None:
            raise ValueError("targets should not be None")
        if not all("boxes" in t for t in targets):
            raise ValueError("Every element of targets should have a boxes key")
        if not all("labels" in t for t in targets):
            raise ValueError("Every element of targets should have a labels key")
        if self.has_mask() and not all("masks" in t for t in targets):
            raise ValueError("Every element of targets should have a masks key")
        if self.has_keypoint() and not all("keypoints" in t for t in targets):
            raise ValueError("Every element of targets should have a keypoints key")

    def select_training_samples(self, proposals: list[Tensor], targets: list[dict]):
        """The sampled proposals per image (ground truth added), their matches, labels and box targets."""
        self.check_targets(targets)
        dtype = proposals[0].dtype
        gt_boxes = [t["boxes"].to(dtype) for t in targets]
        gt_labels = [t["labels"] for t in targets]
        proposals = self.add_gt_proposals(proposals, gt_boxes)
        matched_idxs, labels = self.assign_targets_to_proposals(proposals, gt_boxes, gt_labels)
        sampled = self.subsample(labels)
        matched_gt_boxes = []
        for i, inds in enumerate(sampled):
            proposals[i], labels[i], matched_idxs[i] = proposals[i][inds], labels[i][inds], matched_idxs[i][inds]
            boxes = gt_boxes[i]
            if boxes.numel() == 0:
                boxes = zeros((1, 4), dtype=dtype, device=boxes.device)
            matched_gt_boxes.append(boxes[matched_idxs[i]])
        regression_targets = self.box_coder.encode(matched_gt_boxes, proposals)
        return proposals, matched_idxs, labels, regression_targets

    def postprocess_detections(self, class_logits: Tensor, box_regression: Tensor, proposals: list[Tensor],
                               image_shapes: list[tuple[int, int]]):
        """Per image: a box per (proposal, foreground class) above ``score_thresh``, not tiny, kept by
        per-class NMS, at most ``detections_per_img`` by score."""
        num_classes = class_logits.shape[-1]
        counts = [b.shape[0] for b in proposals]
        pred_boxes = self.box_coder.decode(box_regression, proposals).split(counts, 0)
        pred_scores = F.softmax(class_logits, -1).split(counts, 0)
        all_boxes, all_scores, all_labels = [], [], []
        for boxes, scores, shape in zip(pred_boxes, pred_scores, image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, shape)
            labels = arange(num_classes, device=boxes.device).reshape(1, -1).expand_as(scores)
            boxes, scores, labels = boxes[:, 1:].reshape(-1, 4), scores[:, 1:].reshape(-1), labels[:, 1:].reshape(-1)
            keep = (scores > self.score_thresh).nonzero().reshape(-1)
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = box_ops.remove_small_boxes(boxes, min_size=1e-2)
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)[: self.detections_per_img]
            all_boxes.append(boxes[keep])
            all_scores.append(scores[keep])
            all_labels.append(labels[keep])
        return all_boxes, all_scores, all_labels

    def _check_target_types(self, targets: list[dict]) -> None:
        for t in targets:
            if not t["boxes"].is_floating_point():
                raise TypeError(f"target boxes must of float type, instead got {t['boxes'].dtype}")
            if t["labels"].dtype != int64:
                raise TypeError(f"target labels must of int64 type, instead got {t['labels'].dtype}")
            if self.has_keypoint() and not t["keypoints"].is_floating_point():
                raise TypeError(f"target keypoints must of float type, instead got {t['keypoints'].dtype}")

    def forward(self, features: dict[str, Tensor], proposals: list[Tensor], image_shapes: list[tuple[int, int]],
                targets: list[dict] | None = None) -> tuple[list[dict], dict[str, Tensor]]:
        if targets is not None:
            self._check_target_types(targets)
        matched_idxs = labels = None
        if self.training:
            proposals, matched_idxs, labels, regression_targets = self.select_training_samples(proposals, targets)
        box_features = self.box_head(self.box_roi_pool(features, proposals, image_shapes))
        class_logits, box_regression = self.box_predictor(box_features)
        result: list[dict] = []
        losses: dict[str, Tensor] = {}
        if self.training:
            loss_classifier, loss_box_reg = fastrcnn_loss(class_logits, box_regression, labels, regression_targets)
            losses = {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg}
        else:
            for b, s, lab in zip(*self.postprocess_detections(class_logits, box_regression, proposals, image_shapes)):
                result.append({"boxes": b, "labels": lab, "scores": s})
        if self.has_mask():
            losses.update(self._mask_branch(features, proposals, image_shapes, targets, matched_idxs, labels, result))
        if self.has_keypoint():
            losses.update(self._keypoint_branch(features, proposals, image_shapes, targets, matched_idxs, labels,
                                                result))
        return result, losses

    def _positive(self, proposals, matched_idxs, labels) -> tuple[list[Tensor], list[Tensor]]:
        """In training, each image's positive proposals and their matched ground truths."""
        positive = [(lab > 0).nonzero().reshape(-1) for lab in labels]
        return [p[pos] for p, pos in zip(proposals, positive)], [m[pos] for m, pos in zip(matched_idxs, positive)]

    def _keypoint_branch(self, features, proposals, image_shapes, targets, matched_idxs, labels, result) -> dict:
        """Keypoint heatmaps for the positive proposals (training: the loss) or the detections (eval:
        ``keypoints`` and ``keypoints_scores``)."""
        if self.training:
            kp_proposals, pos_matched_idxs = self._positive(proposals, matched_idxs, labels)
        else:
            kp_proposals = [r["boxes"] for r in result]
        pooled = self.keypoint_roi_pool(features, kp_proposals, image_shapes)
        logits = self.keypoint_predictor(self.keypoint_head(pooled))
        if self.training:
            return {"loss_keypoint": keypointrcnn_loss(logits, kp_proposals, [t["keypoints"] for t in targets],
                                                       pos_matched_idxs)}
        for probs, scores, r in zip(*keypointrcnn_inference(logits, kp_proposals), result):
            r["keypoints"], r["keypoints_scores"] = probs, scores
        return {}

    def _mask_branch(self, features, proposals, image_shapes, targets, matched_idxs, labels, result) -> dict:
        """Mask logits for the positive proposals (training: the loss) or the detections (eval: ``masks``)."""
        if self.training:
            mask_proposals, pos_matched_idxs = self._positive(proposals, matched_idxs, labels)
        else:
            mask_proposals = [r["boxes"] for r in result]
        pooled = self.mask_roi_pool(features, mask_proposals, image_shapes)
        if pooled.shape[0] == 0:   # the engine's conv2d refuses an empty batch: run one zero RoI, keep none
            pooled = pooled.new_zeros((1, *pooled.shape[1:]))
            mask_logits = self.mask_predictor(self.mask_head(pooled))[:0]
        else:
            mask_logits = self.mask_predictor(self.mask_head(pooled))
        if self.training:
            loss = maskrcnn_loss(mask_logits, mask_proposals, [t["masks"] for t in targets],
                                 [t["labels"] for t in targets], pos_matched_idxs)
            return {"loss_mask": loss}
        for probs, r in zip(maskrcnn_inference(mask_logits, [r["labels"] for r in result]), result):
            r["masks"] = probs
        return {}
