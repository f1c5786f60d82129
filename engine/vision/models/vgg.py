"""VGG (Simonyan and Zisserman 2014), configurations A, B, D, E (vgg11/13/16/19), with or without BN."""
from __future__ import annotations

from typing import Any

from ... import nn
from ...nn import init
from ...ops.movement import flatten
from ._api import register_model

__all__ = ["VGG", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"]

# channels of each 3x3 convolution; "M" is a 2x2 max pool
cfgs: dict[str, list] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, features: nn.Module, num_classes: int = 1000, init_weights: bool = True,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes))
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    init.constant_(m.weight, 1)
                    init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    init.normal_(m.weight, 0, 0.01)
                    init.constant_(m.bias, 0)

    def forward(self, x):
        return self.classifier(flatten(self.avgpool(self.features(x)), 1))


def make_layers(cfg: list, batch_norm: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(in_channels, v, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU(inplace=True))
        in_channels = v
    return nn.Sequential(*layers)


def _vgg(cfg: str, batch_norm: bool, kwargs: dict[str, Any]) -> VGG:
    return VGG(make_layers(cfgs[cfg], batch_norm), **kwargs)


@register_model()
def vgg11(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-11 (132,863,336 parameters)."""
    return _vgg("A", False, kwargs)


@register_model()
def vgg11_bn(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-11 with batch norm (132,868,840 parameters)."""
    return _vgg("A", True, kwargs)


@register_model()
def vgg16(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-16 (138,357,544 parameters)."""
    return _vgg("D", False, kwargs)


@register_model()
def vgg16_bn(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-16 with batch norm (138,365,992 parameters)."""
    return _vgg("D", True, kwargs)


@register_model()
def vgg13(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-13 (133,047,848 parameters)."""
    return _vgg("B", False, kwargs)


@register_model()
def vgg13_bn(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-13 with batch norm (133,053,736 parameters)."""
    return _vgg("B", True, kwargs)


@register_model()
def vgg19(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-19 (143,667,240 parameters)."""
    return _vgg("E", False, kwargs)


@register_model()
def vgg19_bn(*, weights=None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-19 with batch norm (143,678,248 parameters)."""
    return _vgg("E", True, kwargs)
