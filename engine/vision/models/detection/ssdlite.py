"""SSDlite (Sandler et al. 2018, the MobileNetV2 paper; MobileNetV3's variant): SSD with depthwise
separable prediction convs and extra feature blocks on a MobileNetV3-Large cut at its C4 expansion."""
from __future__ import annotations

import warnings
from collections import OrderedDict
from functools import partial
from typing import Any

from .... import nn
from ....nn import init
from ...ops.misc import Conv2dNormActivation
from .._api import register_model
from .._utils import stage_indices
from ..mobilenetv3 import mobilenet_v3_large
from . import _utils as det_utils
from .anchor_utils import DefaultBoxGenerator
from .backbone_utils import _validate_trainable_layers
from .ssd import SSD, SSDScoringHead

__all__ = ["SSDLiteHead", "SSDLiteClassificationHead", "SSDLiteRegressionHead", "ssdlite320_mobilenet_v3_large"]


def _prediction_block(in_channels: int, out_channels: int, kernel_size: int, norm_layer) -> nn.Sequential:
    """Depthwise kxk conv-norm-ReLU6, then a 1x1 conv to the outputs."""
    return nn.Sequential(Conv2dNormActivation(in_channels, in_channels, kernel_size=kernel_size, groups=in_channels,
                                              norm_layer=norm_layer, activation_layer=nn.ReLU6),
                         nn.Conv2d(in_channels, out_channels, 1))


def _extra_block(in_channels: int, out_channels: int, norm_layer) -> nn.Sequential:
    """1x1 down to half, stride-2 depthwise 3x3, 1x1 up to ``out_channels`` (each with norm and ReLU6)."""
    mid = out_channels // 2
    return nn.Sequential(
        Conv2dNormActivation(in_channels, mid, kernel_size=1, norm_layer=norm_layer, activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, mid, kernel_size=3, stride=2, groups=mid, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, out_channels, kernel_size=1, norm_layer=norm_layer, activation_layer=nn.ReLU6))


def _normal_init(module: nn.Module) -> None:
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d):
            init.normal_(layer.weight, mean=0.0, std=0.03)
            if layer.bias is not None:
                init.constant_(layer.bias, 0.0)


class SSDLiteClassificationHead(SSDScoringHead):
    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int, norm_layer) -> None:
        blocks = nn.ModuleList([_prediction_block(c, num_classes * a, 3, norm_layer)
                                for c, a in zip(in_channels, num_anchors)])
        _normal_init(blocks)
        super().__init__(blocks, num_classes)


class SSDLiteRegressionHead(SSDScoringHead):
    def __init__(self, in_channels: list[int], num_anchors: list[int], norm_layer) -> None:
        blocks = nn.ModuleList([_prediction_block(c, 4 * a, 3, norm_layer) for c, a in zip(in_channels, num_anchors)])
        _normal_init(blocks)
        super().__init__(blocks, 4)


class SSDLiteHead(nn.Module):
    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int, norm_layer) -> None:
        super().__init__()
        self.classification_head = SSDLiteClassificationHead(in_channels, num_anchors, num_classes, norm_layer)
        self.regression_head = SSDLiteRegressionHead(in_channels, num_anchors, norm_layer)

    def forward(self, x):
        return {"bbox_regression": self.regression_head(x), "cls_logits": self.classification_head(x)}


class SSDLiteFeatureExtractorMobileNet(nn.Module):
    """Two maps from the MobileNet (cut inside block ``c4_pos``, after its expansion) and four extra
    stride-2 blocks after it."""

    def __init__(self, backbone: nn.Sequential, c4_pos: int, norm_layer, width_mult: float = 1.0,
                 min_depth: int = 16) -> None:
        super().__init__()
        if backbone[c4_pos].use_res_connect:
            raise ValueError("backbone[c4_pos].use_res_connect should be False")
        self.features = nn.ModuleList([nn.Sequential(*backbone[:c4_pos], backbone[c4_pos].block[0]),
                                       nn.Sequential(backbone[c4_pos].block[1:], *backbone[c4_pos + 1:])])
        depth = [max(min_depth, int(d * width_mult)) for d in (512, 256, 256, 128)]
        widths = [backbone[-1].out_channels, *depth]
        self.extra = nn.ModuleList([_extra_block(a, b, norm_layer) for a, b in zip(widths, widths[1:])])
        _normal_init(self.extra)

    def forward(self, x):
        output = []
        for block in [*self.features, *self.extra]:
            x = block(x)
            output.append(x)
        return OrderedDict((str(i), v) for i, v in enumerate(output))


def _mobilenet_extractor(backbone, trainable_layers: int, norm_layer) -> SSDLiteFeatureExtractorMobileNet:
    features = backbone.features
    stages = stage_indices(features)
    if not 0 <= trainable_layers <= len(stages):
        raise ValueError(f"trainable_layers should be in the range [0, {len(stages)}], instead got {trainable_layers}")
    freeze_before = len(features) if trainable_layers == 0 else stages[len(stages) - trainable_layers]
    for block in features[:freeze_before]:
        for parameter in block.parameters():
            parameter.requires_grad_(False)
    return SSDLiteFeatureExtractorMobileNet(features, stages[-2], norm_layer)


@register_model()
def ssdlite320_mobilenet_v3_large(*, weights=None, progress: bool = True, num_classes: int | None = None,
                                  weights_backbone: Any = "IMAGENET1K_V1", trainable_backbone_layers: int | None = None,
                                  norm_layer=None, **kwargs: Any) -> SSD:
    """SSDlite at 320x320 on MobileNetV3-Large (3,440,060 parameters with 91 classes; without a pretrained
    backbone its last stage is halved, as the COCO weights were trained)."""
    if "size" in kwargs:
        warnings.warn("The size of the model is already fixed; ignoring the parameter.")
        kwargs.pop("size")
    num_classes, weights_backbone = det_utils.detection_arguments(weights, num_classes, weights_backbone)
    trainable = _validate_trainable_layers(weights_backbone is not None, trainable_backbone_layers, 6, 6)
    norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress, norm_layer=norm_layer,
                                  reduced_tail=weights_backbone is None, **kwargs)
    if weights_backbone is None:
        _normal_init(backbone)
    backbone = _mobilenet_extractor(backbone, trainable, norm_layer)
    size = (320, 320)
    anchors = DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
    out_channels = det_utils.retrieve_out_channels(backbone, size)
    num_anchors = anchors.num_anchors_per_location()
    if len(out_channels) != len(anchors.aspect_ratios):
        raise ValueError(f"The length of the output channels from the backbone {len(out_channels)} do not match the "
                         f"length of the anchor generator aspect ratios {len(anchors.aspect_ratios)}")
    kwargs = {"score_thresh": 0.001, "nms_thresh": 0.55, "detections_per_img": 300, "topk_candidates": 300,
              "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], **kwargs}   # inputs to [-1, 1]
    return SSD(backbone, anchors, size, num_classes, head=SSDLiteHead(out_channels, num_anchors, num_classes,
                                                                     norm_layer), **kwargs)
