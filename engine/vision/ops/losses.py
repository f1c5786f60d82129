"""torchvision's detection losses: sigmoid focal loss and the IoU losses of matched box pairs."""
from __future__ import annotations

import math

from ...base.grad_mode import no_grad
from ...core.tensor import Tensor
from ...nn import functional as F
from ...ops.reduce import max as _max, min as _min

__all__ = ["sigmoid_focal_loss", "generalized_box_iou_loss", "distance_box_iou_loss", "complete_box_iou_loss"]


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: 'none', "
                     f"'mean', 'sum'")


def sigmoid_focal_loss(inputs: Tensor, targets: Tensor, alpha: float = 0.25, gamma: float = 2,
                       reduction: str = "none") -> Tensor:
    """Binary cross-entropy of ``inputs`` (logits) down-weighted by ``(1 - p_t) ** gamma`` on easy
    examples, weighted by ``alpha`` for the positives (RetinaNet's loss)."""
    if reduction not in ("none", "mean", "sum"):
        _reduce(inputs, reduction)
    p = inputs.sigmoid()
    ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * ((1 - p_t) ** gamma)
    if alpha >= 0:
        loss = (alpha * targets + (1 - alpha) * (1 - targets)) * loss
    return _reduce(loss, reduction)


def _pair_terms(boxes1: Tensor, boxes2: Tensor, eps: float) -> tuple:
    """Per matched pair: IoU, and the enclosing box's corners."""
    x1, y1, x2, y2 = boxes1.unbind(-1)
    gx1, gy1, gx2, gy2 = boxes2.unbind(-1)
    ix1, iy1, ix2, iy2 = _max(x1, gx1), _max(y1, gy1), _min(x2, gx2), _min(y2, gy2)
    inside = (iy2 > iy1) & (ix2 > ix1)
    inter = ((ix2 - ix1) * (iy2 - iy1)).where(inside, 0.0 * x1)
    union = (x2 - x1) * (y2 - y1) + (gx2 - gx1) * (gy2 - gy1) - inter
    return inter / (union + eps), union, (_min(x1, gx1), _min(y1, gy1), _max(x2, gx2), _max(y2, gy2))


def generalized_box_iou_loss(boxes1: Tensor, boxes2: Tensor, reduction: str = "none", eps: float = 1e-7) -> Tensor:
    """``1 - GIoU`` of each matched pair of ``xyxy`` boxes."""
    iou, union, (cx1, cy1, cx2, cy2) = _pair_terms(boxes1, boxes2, eps)
    area = (cx2 - cx1) * (cy2 - cy1)
    return _reduce(1 - (iou - (area - union) / (area + eps)), reduction)


def _diou_loss(boxes1: Tensor, boxes2: Tensor, eps: float) -> tuple:
    iou, _, (cx1, cy1, cx2, cy2) = _pair_terms(boxes1, boxes2, eps)
    diagonal = (cx2 - cx1) ** 2 + (cy2 - cy1) ** 2 + eps
    x1, y1, x2, y2 = boxes1.unbind(-1)
    gx1, gy1, gx2, gy2 = boxes2.unbind(-1)
    centres = ((x1 + x2) / 2 - (gx1 + gx2) / 2) ** 2 + ((y1 + y2) / 2 - (gy1 + gy2) / 2) ** 2
    return 1 - iou + centres / diagonal, iou


def distance_box_iou_loss(boxes1: Tensor, boxes2: Tensor, reduction: str = "none", eps: float = 1e-7) -> Tensor:
    """``1 - DIoU`` of each matched pair: IoU plus the squared centre distance over the squared
    diagonal of the enclosing box."""
    return _reduce(_diou_loss(boxes1, boxes2, eps)[0], reduction)


def complete_box_iou_loss(boxes1: Tensor, boxes2: Tensor, reduction: str = "none", eps: float = 1e-7) -> Tensor:
    """``1 - CIoU``: the distance loss plus an aspect-ratio term whose weight is not differentiated."""
    loss, iou = _diou_loss(boxes1, boxes2, eps)
    x1, y1, x2, y2 = boxes1.unbind(-1)
    gx1, gy1, gx2, gy2 = boxes2.unbind(-1)
    v = (4 / math.pi ** 2) * (((gx2 - gx1) / (gy2 - gy1)).atan() - ((x2 - x1) / (y2 - y1)).atan()) ** 2
    with no_grad():
        alpha = v / (1 - iou + v + eps)
    return _reduce(loss + alpha * v, reduction)
