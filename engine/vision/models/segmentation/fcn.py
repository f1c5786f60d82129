"""FCN (Long et al. 2015) on a dilated ResNet: the last two stages keep stride 8, a 3x3 conv head
classifies each pixel of the final map (and, for the auxiliary loss, of layer3's)."""
from __future__ import annotations

from typing import Any

from .... import nn
from .._api import register_model
from .._utils import IntermediateLayerGetter
from ..resnet import ResNet, resnet50, resnet101
from ._utils import _SimpleSegmentationModel, resolve_arguments

__all__ = ["FCN", "FCNHead", "fcn_resnet50", "fcn_resnet101"]


class FCN(_SimpleSegmentationModel):
    """Fully convolutional network: ``forward`` returns ``{"out", "aux"}`` at the input's size."""


class FCNHead(nn.Sequential):
    """3x3 conv to a quarter of the channels, BN, ReLU, dropout 0.1, 1x1 conv to the classes."""

    def __init__(self, in_channels: int, channels: int) -> None:
        inter = in_channels // 4
        super().__init__(nn.Conv2d(in_channels, inter, 3, padding=1, bias=False), nn.BatchNorm2d(inter), nn.ReLU(),
                         nn.Dropout(0.1), nn.Conv2d(inter, channels, 1))


def _fcn_resnet(backbone: ResNet, num_classes: int, aux: bool | None) -> FCN:
    return_layers = {"layer4": "out", **({"layer3": "aux"} if aux else {})}
    body = IntermediateLayerGetter(backbone, return_layers)
    return FCN(body, FCNHead(2048, num_classes), FCNHead(1024, num_classes) if aux else None)


def _dilated_resnet(build, weights_backbone: Any, progress: bool) -> ResNet:
    return build(weights=weights_backbone, progress=progress, replace_stride_with_dilation=[False, True, True])


@register_model()
def fcn_resnet50(*, weights=None, progress: bool = True, num_classes: int | None = None,
                 aux_loss: bool | None = None, weights_backbone: Any = "IMAGENET1K_V1", **kwargs: Any) -> FCN:
    """FCN on a dilated ResNet-50 (35,322,218 parameters with 21 classes and the aux head)."""
    num_classes, aux_loss, weights_backbone = resolve_arguments(weights, num_classes, aux_loss, weights_backbone)
    return _fcn_resnet(_dilated_resnet(resnet50, weights_backbone, progress), num_classes, aux_loss)


@register_model()
def fcn_resnet101(*, weights=None, progress: bool = True, num_classes: int | None = None,
                  aux_loss: bool | None = None, weights_backbone: Any = "IMAGENET1K_V1", **kwargs: Any) -> FCN:
    """FCN on a dilated ResNet-101 (54,314,346 parameters with 21 classes and the aux head)."""
    num_classes, aux_loss, weights_backbone = resolve_arguments(weights, num_classes, aux_loss, weights_backbone)
    return _fcn_resnet(_dilated_resnet(resnet101, weights_backbone, progress), num_classes, aux_loss)
