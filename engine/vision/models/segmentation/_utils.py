"""The frame the FCN and DeepLabV3 models share: a backbone giving ``out`` (and ``aux``) feature
maps, a head per map, each output upsampled bilinearly to the input's size."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .... import nn
from ....nn import functional as F

__all__ = ["_SimpleSegmentationModel", "resolve_arguments"]


class _SimpleSegmentationModel(nn.Module):
    """``forward(x)`` returns ``{"out": ..., "aux": ...}`` (``aux`` only with an aux classifier),
    each of shape (N, num_classes, H, W) for an (N, C, H, W) input."""

    __constants__ = ["aux_classifier"]

    def __init__(self, backbone: nn.Module, classifier: nn.Module, aux_classifier: nn.Module | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux_classifier

    def forward(self, x):
        size = tuple(x.shape[-2:])
        features = self.backbone(x)
        result = OrderedDict()
        result["out"] = F.interpolate(self.classifier(features["out"]), size=size, mode="bilinear",
                                      align_corners=False)
        if self.aux_classifier is not None:
            result["aux"] = F.interpolate(self.aux_classifier(features["aux"]), size=size, mode="bilinear",
                                          align_corners=False)
        return result


def resolve_arguments(weights: Any, num_classes: int | None, aux_loss: bool | None,
                      weights_backbone: Any) -> tuple[int, bool | None, Any]:
    """A builder's ``num_classes`` (21, the VOC classes, by default), ``aux_loss`` and backbone weights.

    Whole-model checkpoints are not offered by name yet: ``weights=`` raises, and a torchvision
    state_dict loads into a model built with ``weights=None`` (the keys are torchvision's).
    """
    if weights is not None:
        raise NotImplementedError("pretrained segmentation weights are not available by name yet: build with "
                                  "weights=None and load_state_dict a torchvision checkpoint")
    return (21 if num_classes is None else num_classes), aux_loss, weights_backbone
