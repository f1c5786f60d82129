"""GeneralizedRCNN: transform, backbone, region proposals, RoI heads, back to the input sizes."""
from __future__ import annotations

from collections import OrderedDict

from .... import nn
from ....core.tensor import Tensor

__all__ = ["GeneralizedRCNN", "check_targets", "check_degenerate_boxes", "original_sizes", "prepare"]


def check_targets(targets: list[dict] | None) -> None:
    """Training needs targets whose ``boxes`` are (N, 4) tensors."""
    if targets is None:
        raise ValueError("In training mode, targets should be passed")
    for target in targets:
        boxes = target["boxes"]
        if not isinstance(boxes, Tensor):
            raise TypeError(f"Expected target boxes to be of type Tensor, got {type(boxes)}.")
        if boxes.dim() != 2 or boxes.shape[-1] != 4:
            raise ValueError(f"Expected target boxes to be a tensor of shape [N, 4], got {tuple(boxes.shape)}.")


def check_degenerate_boxes(targets: list[dict]) -> None:
    """Every box needs x2 > x1 and y2 > y1 (after the transform's resize)."""
    for index, target in enumerate(targets):
        boxes = target["boxes"]
        bad = (boxes[:, 2:] <= boxes[:, :2]).any(dim=1)
        if bad.any():
            box = boxes[bad.nonzero().reshape(-1)[0]].tolist()
            raise ValueError("All bounding boxes should have positive height and width. "
                             f"Found invalid box {box} for target at index {index}.")


def original_sizes(images: list[Tensor]) -> list[tuple[int, int]]:
    """Each image's (height, width), which the detections are mapped back to."""
    sizes = []
    for img in images:
        size = tuple(int(s) for s in img.shape[-2:])
        if len(size) != 2:
            raise ValueError(f"expecting the last two dimensions of the Tensor to be H and W instead got "
                             f"{tuple(img.shape[-2:])}")
        sizes.append(size)
    return sizes


def prepare(model: nn.Module, images: list[Tensor], targets: list[dict] | None):
    """Every detector's first steps: check the targets (training), note the images' own sizes, batch
    and resize through ``model.transform``, check the resized boxes, run ``model.backbone``. Returns
    the batched images, the targets, the features by name and the original sizes."""
    if model.training:
        check_targets(targets)
    sizes = original_sizes(images)
    images, targets = model.transform(images, targets)
    if targets is not None:
        check_degenerate_boxes(targets)
    features = model.backbone(images.tensors)
    if isinstance(features, Tensor):
        features = OrderedDict([("0", features)])
    return images, targets, features, sizes


class GeneralizedRCNN(nn.Module):
    """``forward(images, targets=None)``: a list of (C, H, W) images in [0, 1] of any sizes. Training
    (targets: per image ``boxes`` (N, 4) xyxy float and ``labels`` (N,) int64, ``masks`` for Mask
    R-CNN) returns the dict of losses; eval returns per image a dict of ``boxes``, ``labels``,
    ``scores`` (and ``masks``) in the image's own coordinates."""

    def __init__(self, backbone: nn.Module, rpn: nn.Module, roi_heads: nn.Module, transform: nn.Module) -> None:
        super().__init__()
        self.transform = transform
        self.backbone = backbone
        self.rpn = rpn
        self.roi_heads = roi_heads

    def forward(self, images: list[Tensor], targets: list[dict] | None = None):
        images, targets, features, sizes = prepare(self, images, targets)
        proposals, proposal_losses = self.rpn(images, features, targets)
        detections, detector_losses = self.roi_heads(features, proposals, images.image_sizes, targets)
        detections = self.transform.postprocess(detections, images.image_sizes, sizes)
        if self.training:
            return {**detector_losses, **proposal_losses}
        return detections
