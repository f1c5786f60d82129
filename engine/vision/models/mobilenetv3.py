"""MobileNetV3 (Howard et al. 2019): inverted residuals with squeeze-excitation and hard-swish,
found by architecture search; ``large`` and ``small`` differ only in their block tables."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ... import nn
from ...ops.movement import flatten
from ..ops.misc import Conv2dNormActivation, SqueezeExcitation
from ._api import register_model
from .mobilenetv2 import _make_divisible, _normal_linear, init_mobile_weights

__all__ = ["MobileNetV3", "InvertedResidualConfig", "mobilenet_v3_large", "mobilenet_v3_small"]


class InvertedResidualConfig:
    """One block's row of the table, its channel counts scaled by ``width_mult``."""

    def __init__(self, input_channels: int, kernel: int, expanded_channels: int, out_channels: int, use_se: bool,
                 activation: str, stride: int, dilation: int, width_mult: float) -> None:
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride, self.dilation = stride, dilation

    @staticmethod
    def adjust_channels(channels: int, width_mult: float) -> int:
        return _make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise (kxk), optional SE, project (1x1, no activation); residual when shapes allow."""

    def __init__(self, cnf: InvertedResidualConfig, norm_layer: Callable[..., nn.Module],
                 se_layer: Callable[..., nn.Module] = partial(SqueezeExcitation,
                                                              scale_activation=nn.Hardsigmoid)) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        act = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers: list[nn.Module] = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels, kernel_size=1,
                                               norm_layer=norm_layer, activation_layer=act))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.expanded_channels, kernel_size=cnf.kernel,
                                           stride=1 if cnf.dilation > 1 else cnf.stride, dilation=cnf.dilation,
                                           groups=cnf.expanded_channels, norm_layer=norm_layer,
                                           activation_layer=act))
        if cnf.use_se:
            layers.append(se_layer(cnf.expanded_channels, _make_divisible(cnf.expanded_channels // 4, 8)))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, input):
        result = self.block(input)
        return result + input if self.use_res_connect else result


class MobileNetV3(nn.Module):
    def __init__(self, inverted_residual_setting: list[InvertedResidualConfig], last_channel: int,
                 num_classes: int = 1000, block: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None, dropout: float = 0.2, **kwargs: Any) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not (isinstance(inverted_residual_setting, Sequence)
                and all(isinstance(s, InvertedResidualConfig) for s in inverted_residual_setting)):
            raise TypeError("The inverted_residual_setting should be List[InvertedResidualConfig]")
        block = block or InvertedResidual
        norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        first = inverted_residual_setting[0].input_channels
        layers: list[nn.Module] = [Conv2dNormActivation(3, first, kernel_size=3, stride=2, norm_layer=norm_layer,
                                                        activation_layer=nn.Hardswish)]
        layers += [block(cnf, norm_layer) for cnf in inverted_residual_setting]
        last_in = inverted_residual_setting[-1].out_channels
        layers.append(Conv2dNormActivation(last_in, 6 * last_in, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(6 * last_in, last_channel), nn.Hardswish(inplace=True),
                                        nn.Dropout(p=dropout, inplace=True), nn.Linear(last_channel, num_classes))
        init_mobile_weights(self, _normal_linear)

    def forward(self, x):
        return self.classifier(flatten(self.avgpool(self.features(x)), 1))


def _mobilenet_v3_conf(arch: str, width_mult: float = 1.0, reduced_tail: bool = False, dilated: bool = False,
                       **kwargs: Any) -> tuple[list[InvertedResidualConfig], int]:
    """The block table of ``arch``; ``reduced_tail`` halves the last stage, ``dilated`` dilates it."""
    r = 2 if reduced_tail else 1
    d = 2 if dilated else 1
    conf = partial(InvertedResidualConfig, width_mult=width_mult)
    if arch == "mobilenet_v3_large":
        rows = [(16, 3, 16, 16, False, "RE", 1, 1), (16, 3, 64, 24, False, "RE", 2, 1),
                (24, 3, 72, 24, False, "RE", 1, 1), (24, 5, 72, 40, True, "RE", 2, 1),
                (40, 5, 120, 40, True, "RE", 1, 1), (40, 5, 120, 40, True, "RE", 1, 1),
                (40, 3, 240, 80, False, "HS", 2, 1), (80, 3, 200, 80, False, "HS", 1, 1),
                (80, 3, 184, 80, False, "HS", 1, 1), (80, 3, 184, 80, False, "HS", 1, 1),
                (80, 3, 480, 112, True, "HS", 1, 1), (112, 3, 672, 112, True, "HS", 1, 1),
                (112, 5, 672, 160 // r, True, "HS", 2, d), (160 // r, 5, 960 // r, 160 // r, True, "HS", 1, d),
                (160 // r, 5, 960 // r, 160 // r, True, "HS", 1, d)]
        last = 1280 // r
    elif arch == "mobilenet_v3_small":
        rows = [(16, 3, 16, 16, True, "RE", 2, 1), (16, 3, 72, 24, False, "RE", 2, 1),
                (24, 3, 88, 24, False, "RE", 1, 1), (24, 5, 96, 40, True, "HS", 2, 1),
                (40, 5, 240, 40, True, "HS", 1, 1), (40, 5, 240, 40, True, "HS", 1, 1),
                (40, 5, 120, 48, True, "HS", 1, 1), (48, 5, 144, 48, True, "HS", 1, 1),
                (48, 5, 288, 96 // r, True, "HS", 2, d), (96 // r, 5, 576 // r, 96 // r, True, "HS", 1, d),
                (96 // r, 5, 576 // r, 96 // r, True, "HS", 1, d)]
        last = 1024 // r
    else:
        raise ValueError(f"Unsupported model type {arch}")
    return [conf(*row) for row in rows], InvertedResidualConfig.adjust_channels(last, width_mult)


@register_model()
def mobilenet_v3_large(*, weights=None, progress: bool = True, **kwargs: Any) -> MobileNetV3:
    """MobileNetV3-Large (5,483,032 parameters)."""
    setting, last = _mobilenet_v3_conf("mobilenet_v3_large", **kwargs)
    return MobileNetV3(setting, last, **kwargs)


@register_model()
def mobilenet_v3_small(*, weights=None, progress: bool = True, **kwargs: Any) -> MobileNetV3:
    """MobileNetV3-Small (2,542,856 parameters)."""
    setting, last = _mobilenet_v3_conf("mobilenet_v3_small", **kwargs)
    return MobileNetV3(setting, last, **kwargs)
