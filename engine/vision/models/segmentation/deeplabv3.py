"""DeepLabV3 (Chen et al. 2017): atrous spatial pyramid pooling (parallel dilated 3x3 convolutions
and an image-level pooled branch) over a dilated ResNet or MobileNetV3 backbone."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .... import nn
from ....nn import functional as F
from ....ops.movement import cat
from .._api import register_model
from .._utils import IntermediateLayerGetter, stage_indices
from ..mobilenetv3 import MobileNetV3, mobilenet_v3_large
from ..resnet import ResNet, resnet50, resnet101
from ._utils import _SimpleSegmentationModel, resolve_arguments
from .fcn import FCNHead, _dilated_resnet

__all__ = ["DeepLabV3", "DeepLabHead", "ASPP", "ASPPConv", "ASPPPooling", "deeplabv3_resnet50",
           "deeplabv3_resnet101", "deeplabv3_mobilenet_v3_large"]


class DeepLabV3(_SimpleSegmentationModel):
    """DeepLabV3: ``forward`` returns ``{"out", "aux"}`` at the input's size."""


class DeepLabHead(nn.Sequential):
    """ASPP, a 3x3 conv-BN-ReLU, and a 1x1 conv to the classes."""

    def __init__(self, in_channels: int, num_classes: int, atrous_rates: Sequence[int] = (12, 24, 36)) -> None:
        super().__init__(ASPP(in_channels, atrous_rates), nn.Conv2d(256, 256, 3, padding=1, bias=False),
                         nn.BatchNorm2d(256), nn.ReLU(), nn.Conv2d(256, num_classes, 1))


class ASPPConv(nn.Sequential):
    """A 3x3 convolution dilated by ``dilation`` (padded to keep the size), BN, ReLU."""

    def __init__(self, in_channels: int, out_channels: int, dilation: int) -> None:
        super().__init__(nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


class ASPPPooling(nn.Sequential):
    """The image-level branch: global average, 1x1 conv-BN-ReLU, broadcast back to the map's size."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x):
        size = tuple(x.shape[-2:])
        for module in self:
            x = module(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    """A 1x1 branch, one dilated 3x3 branch per rate and the pooled branch, concatenated and projected
    to ``out_channels`` (1x1 conv, BN, ReLU, dropout 0.5)."""

    def __init__(self, in_channels: int, atrous_rates: Sequence[int], out_channels: int = 256) -> None:
        super().__init__()
        branches = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels),
                                  nn.ReLU())]
        branches += [ASPPConv(in_channels, out_channels, rate) for rate in atrous_rates]
        branches.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(branches)
        self.project = nn.Sequential(nn.Conv2d(len(branches) * out_channels, out_channels, 1, bias=False),
                                     nn.BatchNorm2d(out_channels), nn.ReLU(), nn.Dropout(0.5))

    def forward(self, x):
        return self.project(cat([conv(x) for conv in self.convs], dim=1))


def _deeplabv3_resnet(backbone: ResNet, num_classes: int, aux: bool | None) -> DeepLabV3:
    return_layers = {"layer4": "out", **({"layer3": "aux"} if aux else {})}
    body = IntermediateLayerGetter(backbone, return_layers)
    return DeepLabV3(body, DeepLabHead(2048, num_classes), FCNHead(1024, num_classes) if aux else None)


def _deeplabv3_mobilenetv3(backbone: MobileNetV3, num_classes: int, aux: bool | None) -> DeepLabV3:
    features = backbone.features
    stages = stage_indices(features)
    out_pos, aux_pos = stages[-1], stages[-4]
    return_layers = {str(out_pos): "out", **({str(aux_pos): "aux"} if aux else {})}
    body = IntermediateLayerGetter(features, return_layers)
    aux_classifier = FCNHead(features[aux_pos].out_channels, num_classes) if aux else None
    return DeepLabV3(body, DeepLabHead(features[out_pos].out_channels, num_classes), aux_classifier)


@register_model()
def deeplabv3_resnet50(*, weights=None, progress: bool = True, num_classes: int | None = None,
                       aux_loss: bool | None = None, weights_backbone: Any = "IMAGENET1K_V1",
                       **kwargs: Any) -> DeepLabV3:
    """DeepLabV3 on a dilated ResNet-50 (42,004,074 parameters with 21 classes and the aux head)."""
    num_classes, aux_loss, weights_backbone = resolve_arguments(weights, num_classes, aux_loss, weights_backbone)
    return _deeplabv3_resnet(_dilated_resnet(resnet50, weights_backbone, progress), num_classes, aux_loss)


@register_model()
def deeplabv3_resnet101(*, weights=None, progress: bool = True, num_classes: int | None = None,
                        aux_loss: bool | None = None, weights_backbone: Any = "IMAGENET1K_V1",
                        **kwargs: Any) -> DeepLabV3:
    """DeepLabV3 on a dilated ResNet-101 (60,996,202 parameters with 21 classes and the aux head)."""
    num_classes, aux_loss, weights_backbone = resolve_arguments(weights, num_classes, aux_loss, weights_backbone)
    return _deeplabv3_resnet(_dilated_resnet(resnet101, weights_backbone, progress), num_classes, aux_loss)


@register_model()
def deeplabv3_mobilenet_v3_large(*, weights=None, progress: bool = True, num_classes: int | None = None,
                                 aux_loss: bool | None = None, weights_backbone: Any = "IMAGENET1K_V1",
                                 **kwargs: Any) -> DeepLabV3:
    """DeepLabV3 on a dilated MobileNetV3-Large (11,029,328 parameters with 21 classes and the aux head)."""
    num_classes, aux_loss, weights_backbone = resolve_arguments(weights, num_classes, aux_loss, weights_backbone)
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress, dilated=True)
    return _deeplabv3_mobilenetv3(backbone, num_classes, aux_loss)
