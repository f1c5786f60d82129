"""Box utilities on (x1, y1, x2, y2) boxes: areas, pairwise IoU, non-maximum suppression.

``box_area`` and ``box_iou`` are Tensor expressions (differentiable); ``nms`` returns indices and
runs its greedy loop on the host, as torchvision's CPU kernel does.
"""
from __future__ import annotations

import numpy as np

from ...base.dtype import int64
from ...core.creation import as_tensor
from ...core.tensor import Tensor
from ...ops.reduce import max as _max, min as _min

__all__ = ["box_area", "box_iou", "nms", "batched_nms"]


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
    lt = _max(boxes1[:, None, :2], boxes2[None, :, :2])
    rb = _min(boxes1[:, None, 2:], boxes2[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(boxes1)[:, None] + box_area(boxes2)[None, :] - inter
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
