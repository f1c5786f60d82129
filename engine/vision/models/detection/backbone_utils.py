"""Detection backbones: a classifier's stages (``IntermediateLayerGetter``) under a feature pyramid,
with the stages nearest the input frozen (``trainable_layers`` counts from the output end)."""
from __future__ import annotations

import warnings
from collections.abc import Callable

from .... import nn
from ...ops.feature_pyramid_network import ExtraFPNBlock, FeaturePyramidNetwork, LastLevelMaxPool
from ...ops.misc import FrozenBatchNorm2d
from .. import mobilenetv2, mobilenetv3, resnet
from .._utils import IntermediateLayerGetter, stage_indices

__all__ = ["BackboneWithFPN", "resnet_fpn_backbone", "mobilenet_backbone"]


class BackboneWithFPN(nn.Module):
    """``body`` (the returned stages) then ``fpn``; ``out_channels`` is the pyramid's width."""

    def __init__(self, backbone: nn.Module, return_layers: dict[str, str], in_channels_list: list[int],
                 out_channels: int, extra_blocks: ExtraFPNBlock | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.body = IntermediateLayerGetter(backbone, return_layers=return_layers)
        self.fpn = FeaturePyramidNetwork(in_channels_list, out_channels,
                                         extra_blocks=extra_blocks or LastLevelMaxPool(), norm_layer=norm_layer)
        self.out_channels = out_channels

    def forward(self, x):
        return self.fpn(self.body(x))


def _validate_trainable_layers(is_trained: bool, trainable_backbone_layers: int | None, max_value: int,
                               default_value: int) -> int:
    """Untrained backbones train every layer; pretrained ones ``default_value`` unless told."""
    if not is_trained:
        if trainable_backbone_layers is not None:
            warnings.warn("Changing trainable_backbone_layers has no effect if neither pretrained nor "
                          f"pretrained_backbone have been set to True, falling back to trainable_backbone_layers="
                          f"{max_value} so that all layers are trainable")
        trainable_backbone_layers = max_value
    if trainable_backbone_layers is None:
        trainable_backbone_layers = default_value
    if not 0 <= trainable_backbone_layers <= max_value:
        raise ValueError(f"Trainable backbone layers should be in the range [0,{max_value}], "
                         f"got {trainable_backbone_layers} ")
    return trainable_backbone_layers


def _resnet_fpn_extractor(backbone: resnet.ResNet, trainable_layers: int, returned_layers: list[int] | None = None,
                          extra_blocks: ExtraFPNBlock | None = None,
                          norm_layer: Callable[..., nn.Module] | None = None) -> BackboneWithFPN:
    if not 0 <= trainable_layers <= 5:
        raise ValueError(f"Trainable layers should be in the range [0,5], got {trainable_layers}")
    train = ["layer4", "layer3", "layer2", "layer1", "conv1"][:trainable_layers] + (["bn1"] if trainable_layers == 5
                                                                                     else [])
    for name, parameter in backbone.named_parameters():
        if not any(name.startswith(layer) for layer in train):
            parameter.requires_grad_(False)
    returned_layers = returned_layers or [1, 2, 3, 4]
    if min(returned_layers) <= 0 or max(returned_layers) >= 5:
        raise ValueError(f"Each returned layer should be in the range [1,4]. Got {returned_layers}")
    return_layers = {f"layer{k}": str(v) for v, k in enumerate(returned_layers)}
    stage2 = backbone.inplanes // 8
    in_channels_list = [stage2 * 2 ** (i - 1) for i in returned_layers]
    return BackboneWithFPN(backbone, return_layers, in_channels_list, 256, extra_blocks=extra_blocks,
                           norm_layer=norm_layer)


def resnet50_fpn_backbone(weights_backbone, progress: bool, trainable_backbone_layers: int | None,
                          returned_layers: list[int] | None = None,
                          extra_blocks: Callable[[], ExtraFPNBlock] | None = None) -> BackboneWithFPN:
    """ResNet-50 under an FPN, as the detection builders make it: frozen batch norm and the first stages
    frozen when pretrained. ``extra_blocks`` is a factory, called after the ResNet is made, so a seeded
    build draws its weights in torchvision's order."""
    is_trained = weights_backbone is not None
    trainable = _validate_trainable_layers(is_trained, trainable_backbone_layers, 5, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    body = resnet.resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    return _resnet_fpn_extractor(body, trainable, returned_layers,
                                 extra_blocks() if extra_blocks is not None else None)


def resnet_fpn_backbone(*, backbone_name: str, weights=None, norm_layer: Callable[..., nn.Module] = FrozenBatchNorm2d,
                        trainable_layers: int = 3, returned_layers: list[int] | None = None,
                        extra_blocks: ExtraFPNBlock | None = None) -> BackboneWithFPN:
    """A ResNet (``backbone_name``, e.g. ``"resnet50"``) with an FPN of width 256 on its stages."""
    backbone = getattr(resnet, backbone_name)(weights=weights, norm_layer=norm_layer)
    return _resnet_fpn_extractor(backbone, trainable_layers, returned_layers, extra_blocks)


def _mobilenet_extractor(backbone: nn.Module, fpn: bool, trainable_layers: int,
                         returned_layers: list[int] | None = None, extra_blocks: ExtraFPNBlock | None = None,
                         norm_layer: Callable[..., nn.Module] | None = None) -> nn.Module:
    features = backbone.features
    stages = stage_indices(features)
    num_stages = len(stages)
    if not 0 <= trainable_layers <= num_stages:
        raise ValueError(f"Trainable layers should be in the range [0,{num_stages}], got {trainable_layers} ")
    freeze_before = len(features) if trainable_layers == 0 else stages[num_stages - trainable_layers]
    for block in features[:freeze_before]:
        for parameter in block.parameters():
            parameter.requires_grad_(False)
    out_channels = 256
    if fpn:
        returned_layers = returned_layers or [num_stages - 2, num_stages - 1]
        if min(returned_layers) < 0 or max(returned_layers) >= num_stages:
            raise ValueError(f"Each returned layer should be in the range [0,{num_stages - 1}], got {returned_layers} ")
        return_layers = {f"{stages[k]}": str(v) for v, k in enumerate(returned_layers)}
        in_channels_list = [features[stages[i]].out_channels for i in returned_layers]
        return BackboneWithFPN(features, return_layers, in_channels_list, out_channels, extra_blocks=extra_blocks,
                               norm_layer=norm_layer)
    model = nn.Sequential(features, nn.Conv2d(features[-1].out_channels, out_channels, 1))
    model.out_channels = out_channels
    return model


def mobilenet_backbone(*, backbone_name: str, weights=None, fpn: bool,
                       norm_layer: Callable[..., nn.Module] = FrozenBatchNorm2d, trainable_layers: int = 2,
                       returned_layers: list[int] | None = None,
                       extra_blocks: ExtraFPNBlock | None = None) -> nn.Module:
    """A MobileNet's features, under an FPN (``fpn=True``) or a 1x1 conv to 256 channels."""
    build = getattr(mobilenetv3, backbone_name, None) or getattr(mobilenetv2, backbone_name)
    return _mobilenet_extractor(build(weights=weights, norm_layer=norm_layer), fpn, trainable_layers,
                                returned_layers, extra_blocks)
