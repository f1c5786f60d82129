"""Box utilities on (x1, y1, x2, y2) boxes: areas, pairwise IoU and its generalized, distance and
complete variants, format conversion, clipping, non-maximum suppression.

``box_area`` and ``box_iou`` are Tensor expressions (differentiable); ``nms`` returns indices and
runs its greedy loop on the host, as torchvision's CPU kernel does.
"""
from __future__ import annotations

import math

import numpy as np

from ...base.dtype import float32, int64
from ...base.grad_mode import no_grad
from ...core.creation import as_tensor, zeros
from ...core.tensor import Tensor
from ...ops.movement import stack
from ...ops.reduce import max as _max, min as _min

__all__ = ["box_area", "box_iou", "nms", "batched_nms", "box_convert", "clip_boxes_to_image", "remove_small_boxes",
           "masks_to_boxes", "generalized_box_iou", "distance_box_iou", "complete_box_iou"]


def _check_boxes(fn: str, boxes: Tensor) -> None:
    if boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"{fn}: boxes must be a (N, 4) tensor of (x1, y1, x2, y2), got shape {tuple(boxes.shape)}")


def box_area(boxes: Tensor) -> Tensor:
    """Area of each (x1, y1, x2, y2) box."""
    _check_boxes("box_area", boxes)
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """(N, M) intersection over union of every pair of boxes."""
    _check_boxes("box_iou", boxes1)
    _check_boxes("box_iou", boxes2)
    inter, union = _inter_union(boxes1, boxes2)
    return inter / union


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Indices of the boxes kept by greedy NMS, by decreasing score.

    A box is dropped when its IoU with a kept, higher-scoring box is above ``iou_threshold``.
    """
    _check_boxes("nms", boxes)
    if scores.dim() != 1 or scores.shape[0] != boxes.shape[0]:
        raise ValueError(f"nms: scores must be (N,) for boxes of shape {tuple(boxes.shape)}, "
                         f"got {tuple(scores.shape)}")
    b = boxes.detach().cpu().numpy().astype(np.float64)
    order = np.argsort(-scores.detach().cpu().numpy(), kind="stable")
    areas = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    suppressed = np.zeros(len(b), dtype=bool)
    keep = []
    for pos, i in enumerate(order):
        if suppressed[i]:
            continue
        keep.append(i)
        rest = order[pos + 1:]
        w = np.clip(np.minimum(b[i, 2], b[rest, 2]) - np.maximum(b[i, 0], b[rest, 0]), 0, None)
        h = np.clip(np.minimum(b[i, 3], b[rest, 3]) - np.maximum(b[i, 1], b[rest, 1]), 0, None)
        inter = w * h
        iou = inter / (areas[i] + areas[rest] - inter)
        suppressed[rest[iou > iou_threshold]] = True
    return as_tensor(np.asarray(keep, dtype=np.int64), dtype=int64, device=boxes.device)


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """NMS within each category of ``idxs``: boxes of different categories never suppress each other."""
    if boxes.numel() == 0:
        return as_tensor(np.zeros(0, dtype=np.int64), device=boxes.device)
    # shift each category's boxes out of reach of the others' (torchvision's coordinate trick)
    offsets = idxs.to(boxes.dtype) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)


# ---------------------------------------------------------------- formats and clean-up
_FORMATS = ("xyxy", "xywh", "cxcywh")


def box_convert(boxes: Tensor, in_fmt: str, out_fmt: str) -> Tensor:
    """Between ``xyxy`` (corners), ``xywh`` (corner, size) and ``cxcywh`` (centre, size)."""
    if in_fmt not in _FORMATS or out_fmt not in _FORMATS:
        raise ValueError("Unsupported Bounding Box Conversions for given in_fmt and out_fmt")
    if in_fmt == out_fmt:
        return boxes.clone()
    a, b, c, d = boxes.unbind(-1)
    if in_fmt == "xywh":
        a, b, c, d = a, b, a + c, b + d
    elif in_fmt == "cxcywh":
        a, b, c, d = a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d
    if out_fmt == "xywh":
        a, b, c, d = a, b, c - a, d - b
    elif out_fmt == "cxcywh":
        a, b, c, d = (a + c) / 2, (b + d) / 2, c - a, d - b
    return stack((a, b, c, d), dim=-1)


def clip_boxes_to_image(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    """Boxes clipped to an image of ``size`` ``(height, width)``."""
    height, width = size
    xs = boxes[..., 0::2].clamp(min=0, max=width)
    ys = boxes[..., 1::2].clamp(min=0, max=height)
    return stack((xs, ys), dim=boxes.dim()).reshape(boxes.shape)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    """Indices of the boxes whose sides are both at least ``min_size``."""
    ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    return ((ws >= min_size) & (hs >= min_size)).nonzero().reshape(-1)


def masks_to_boxes(masks: Tensor) -> Tensor:
    """The ``xyxy`` box around the non-zero pixels of each ``(N, H, W)`` mask."""
    if masks.numel() == 0:
        return zeros((0, 4), device=masks.device)
    out = []
    for mask in masks:
        y, x = (mask != 0).nonzero(as_tuple=True)
        out.append(stack((x.min(), y.min(), x.max(), y.max())))
    return stack(out).to(float32)


# ---------------------------------------------------------------- IoU variants
def _enclosing(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """(N, M, 2) width and height of the smallest box around each pair."""
    lt = _min(boxes1[:, None, :2], boxes2[None, :, :2])
    rb = _max(boxes1[:, None, 2:], boxes2[None, :, 2:])
    return (rb - lt).clamp(min=0)


def _centres(boxes: Tensor) -> tuple:
    return (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2


def generalized_box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """(N, M) IoU minus the enclosing box's share not covered by the union."""
    _check_boxes("generalized_box_iou", boxes1)
    _check_boxes("generalized_box_iou", boxes2)
    inter, union = _inter_union(boxes1, boxes2)
    wh = _enclosing(boxes1, boxes2)
    area = wh[..., 0] * wh[..., 1]
    return inter / union - (area - union) / area


def distance_box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7) -> Tensor:
    """(N, M) IoU minus the squared centre distance over the enclosing box's squared diagonal."""
    _check_boxes("distance_box_iou", boxes1)
    _check_boxes("distance_box_iou", boxes2)
    return _diou_iou(boxes1, boxes2, eps)[0]


def _diou_iou(boxes1: Tensor, boxes2: Tensor, eps: float) -> tuple:
    inter, union = _inter_union(boxes1, boxes2)
    iou = inter / union
    wh = _enclosing(boxes1, boxes2)
    diagonal = wh[..., 0] ** 2 + wh[..., 1] ** 2 + eps
    (xp, yp), (xg, yg) = _centres(boxes1), _centres(boxes2)
    centres = (xp[:, None] - xg[None, :]) ** 2 + (yp[:, None] - yg[None, :]) ** 2
    return iou - centres / diagonal, iou


def complete_box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7) -> Tensor:
    """(N, M) distance IoU minus an aspect-ratio consistency term (its weight not differentiated)."""
    _check_boxes("complete_box_iou", boxes1)
    _check_boxes("complete_box_iou", boxes2)
    diou, iou = _diou_iou(boxes1, boxes2, eps)
    wp, hp = (boxes1[:, None, 2] - boxes1[:, None, 0]), (boxes1[:, None, 3] - boxes1[:, None, 1])
    wg, hg = boxes2[:, 2] - boxes2[:, 0], boxes2[:, 3] - boxes2[:, 1]
    v = (4 / math.pi ** 2) * ((wp / hp).atan() - (wg / hg).atan()) ** 2
    with no_grad():
        alpha = v / (1 - iou + v + eps)
    return diou - alpha * v


def _inter_union(boxes1: Tensor, boxes2: Tensor) -> tuple:
    lt = _max(boxes1[:, None, :2], boxes2[None, :, :2])
    rb = _min(boxes1[:, None, 2:], boxes2[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter, box_area(boxes1)[:, None] + box_area(boxes2)[None, :] - inter
