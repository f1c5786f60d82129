"""MobileNetV2 (Sandler et al. 2018): inverted residuals with linear bottlenecks."""
from __future__ import annotations

from typing import Any

from ... import nn
from ...nn import functional as F
from ...nn import init
from ...ops.movement import flatten
from ..ops.misc import Conv2dNormActivation
from ._api import register_model

__all__ = ["MobileNetV2", "InvertedResidual", "mobilenet_v2"]


def _make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    """Round channels to a multiple of ``divisor`` without going more than 10% below ``v``."""
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def init_mobile_weights(model: nn.Module, init_linear) -> None:
    """The initialisation torchvision's mobile families share (MobileNet v2/v3, EfficientNet):
    Kaiming-normal (fan out) convolutions with zero bias, unit-scale zero-shift norms, and
    ``init_linear(layer)`` for the classifier's linear layers."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            init.ones_(m.weight)
            init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            init_linear(m)


def _normal_linear(m: nn.Linear) -> None:
    init.normal_(m.weight, 0, 0.01)
    init.zeros_(m.bias)


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int, norm_layer=None) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        norm_layer = norm_layer or nn.BatchNorm2d
        self.stride = stride
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=nn.ReLU6))
        layers += [Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim,
                                        norm_layer=norm_layer, activation_layer=nn.ReLU6),
                   nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), norm_layer(oup)]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 inverted_residual_setting: list[list[int]] | None = None, round_nearest: int = 8,
                 block=None, norm_layer=None, dropout: float = 0.2) -> None:
        super().__init__()
        block = block or InvertedResidual
        norm_layer = norm_layer or nn.BatchNorm2d
        input_channel, last_channel = 32, 1280
        # t (expansion), c (channels), n (repeats), s (first stride)
        setting = inverted_residual_setting or [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                                                [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        if len(setting) == 0 or len(setting[0]) != 4:
            raise ValueError(f"inverted_residual_setting should be non-empty and a 4-element list, got {setting}")
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features: list[nn.Module] = [Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer,
                                                          activation_layer=nn.ReLU6)]
        for t, c, n, s in setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(block(input_channel, output_channel, s if i == 0 else 1, expand_ratio=t,
                                      norm_layer=norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1, norm_layer=norm_layer,
                                             activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))
        init_mobile_weights(self, _normal_linear)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(flatten(x, 1))


@register_model()
def mobilenet_v2(*, weights=None, progress: bool = True, **kwargs: Any) -> MobileNetV2:
    """MobileNetV2 (3,504,872 parameters)."""
    return MobileNetV2(**kwargs)
