"""Lite R-ASPP (Howard et al. 2019, the MobileNetV3 paper): a 1x1 branch on the last features gated
by their global average, upsampled and added to a classifier on an earlier, finer map."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .... import nn
from ....nn import functional as F
from .._api import register_model
from .._utils import IntermediateLayerGetter, stage_indices
from ..mobilenetv3 import MobileNetV3, mobilenet_v3_large
from ._utils import resolve_arguments

__all__ = ["LRASPP", "LRASPPHead", "lraspp_mobilenet_v3_large"]


class LRASPP(nn.Module):
    """``forward(x)`` returns ``{"out": (N, num_classes, H, W)}``; the backbone gives ``low`` and ``high`` maps."""

    def __init__(self, backbone: nn.Module, low_channels: int, high_channels: int, num_classes: int,
                 inter_channels: int = 128) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = LRASPPHead(low_channels, high_channels, num_classes, inter_channels)

    def forward(self, input):
        out = self.classifier(self.backbone(input))
        result = OrderedDict()
        result["out"] = F.interpolate(out, size=tuple(input.shape[-2:]), mode="bilinear", align_corners=False)
        return result


class LRASPPHead(nn.Module):
    """``cbr`` (1x1 conv-BN-ReLU) times ``scale`` (pooled 1x1 conv, sigmoid) on the high map, classified
    and upsampled to the low map, plus the low map's own 1x1 classifier."""

    def __init__(self, low_channels: int, high_channels: int, num_classes: int, inter_channels: int) -> None:
        super().__init__()
        self.cbr = nn.Sequential(nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                 nn.BatchNorm2d(inter_channels), nn.ReLU(inplace=True))
        self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                   nn.Sigmoid())
        self.low_classifier = nn.Conv2d(low_channels, num_classes, 1)
        self.high_classifier = nn.Conv2d(inter_channels, num_classes, 1)

    def forward(self, input: dict):
        low, high = input["low"], input["high"]
        x = self.cbr(high) * self.scale(high)
        x = F.interpolate(x, size=tuple(low.shape[-2:]), mode="bilinear", align_corners=False)
        return self.low_classifier(low) + self.high_classifier(x)


def _lraspp_mobilenetv3(backbone: MobileNetV3, num_classes: int) -> LRASPP:
    features = backbone.features
    stages = stage_indices(features)
    low_pos, high_pos = stages[-4], stages[-1]
    body = IntermediateLayerGetter(features, {str(low_pos): "low", str(high_pos): "high"})
    return LRASPP(body, features[low_pos].out_channels, features[high_pos].out_channels, num_classes)


@register_model()
def lraspp_mobilenet_v3_large(*, weights=None, progress: bool = True, num_classes: int | None = None,
                              weights_backbone: Any = "IMAGENET1K_V1", **kwargs: Any) -> LRASPP:
    """Lite R-ASPP on a dilated MobileNetV3-Large (3,221,538 parameters with 21 classes)."""
    if kwargs.pop("aux_loss", None):
        raise NotImplementedError("This model does not use auxiliary loss")
    num_classes, _, weights_backbone = resolve_arguments(weights, num_classes, None, weights_backbone)
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress, dilated=True)
    return _lraspp_mobilenetv3(backbone, num_classes)
