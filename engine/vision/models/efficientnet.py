"""EfficientNet (Tan & Le 2019) and EfficientNetV2 (2021): MBConv stages scaled in width and depth;
V2 starts with fused MBConv stages (one full convolution in place of expand + depthwise)."""
from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ... import nn
from ...nn import init
from ...ops.movement import flatten
from ..ops.misc import Conv2dNormActivation, SqueezeExcitation
from ..ops.stochastic_depth import StochasticDepth
from ._api import register_model
from .mobilenetv2 import _make_divisible, init_mobile_weights

__all__ = ["EfficientNet", "MBConv", "FusedMBConv", "MBConvConfig", "FusedMBConvConfig",
           "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4",
           "efficientnet_b5", "efficientnet_b6", "efficientnet_b7",
           "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l"]


def _uniform_linear(m: nn.Linear) -> None:
    """EfficientNet's classifier: uniform in +-1/sqrt(out_features), zero bias."""
    bound = 1.0 / math.sqrt(m.out_features)
    init.uniform_(m.weight, -bound, bound)
    init.zeros_(m.bias)


class _MBConvConfig:
    """One stage: expansion, kernel, first stride, channels in/out, number of blocks, block class."""

    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, block: Callable[..., nn.Module]) -> None:
        self.expand_ratio, self.kernel, self.stride = expand_ratio, kernel, stride
        self.input_channels, self.out_channels = input_channels, out_channels
        self.num_layers, self.block = num_layers, block

    @staticmethod
    def adjust_channels(channels: int, width_mult: float, min_value: int | None = None) -> int:
        return _make_divisible(channels * width_mult, 8, min_value)


class MBConvConfig(_MBConvConfig):
    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, width_mult: float = 1.0, depth_mult: float = 1.0,
                 block: Callable[..., nn.Module] | None = None) -> None:
        super().__init__(expand_ratio, kernel, stride, self.adjust_channels(input_channels, width_mult),
                         self.adjust_channels(out_channels, width_mult), self.adjust_depth(num_layers, depth_mult),
                         block or MBConv)

    @staticmethod
    def adjust_depth(num_layers: int, depth_mult: float) -> int:
        return int(math.ceil(num_layers * depth_mult))


class FusedMBConvConfig(_MBConvConfig):
    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, block: Callable[..., nn.Module] | None = None) -> None:
        super().__init__(expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                         block or FusedMBConv)


class _Residual(nn.Module):
    """``block(x)``, plus ``x`` through stochastic depth when stride and channels allow it."""

    def _finish(self, cnf: _MBConvConfig, layers: list[nn.Module], stochastic_depth_prob: float) -> None:
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, input):
        result = self.block(input)
        return self.stochastic_depth(result) + input if self.use_res_connect else result


class MBConv(_Residual):
    """Expand (1x1), depthwise (kxk), squeeze-excitation, project (1x1); SiLU throughout."""

    def __init__(self, cnf: MBConvConfig, stochastic_depth_prob: float, norm_layer: Callable[..., nn.Module],
                 se_layer: Callable[..., nn.Module] = SqueezeExcitation) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("illegal stride value")
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        layers: list[nn.Module] = []
        if expanded != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=nn.SiLU))
        layers.append(Conv2dNormActivation(expanded, expanded, kernel_size=cnf.kernel, stride=cnf.stride,
                                           groups=expanded, norm_layer=norm_layer, activation_layer=nn.SiLU))
        layers.append(se_layer(expanded, max(1, cnf.input_channels // 4), activation=partial(nn.SiLU, inplace=True)))
        layers.append(Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=None))
        self._finish(cnf, layers, stochastic_depth_prob)


class FusedMBConv(_Residual):
    """A full kxk convolution that expands, then a 1x1 projection (one kxk conv when not expanding)."""

    def __init__(self, cnf: FusedMBConvConfig, stochastic_depth_prob: float,
                 norm_layer: Callable[..., nn.Module]) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("illegal stride value")
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded != cnf.input_channels:
            layers = [Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=cnf.kernel, stride=cnf.stride,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU),
                      Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=None)]
        else:
            layers = [Conv2dNormActivation(cnf.input_channels, cnf.out_channels, kernel_size=cnf.kernel,
                                           stride=cnf.stride, norm_layer=norm_layer, activation_layer=nn.SiLU)]
        self._finish(cnf, layers, stochastic_depth_prob)


class EfficientNet(nn.Module):
    def __init__(self, inverted_residual_setting: Sequence[_MBConvConfig], dropout: float,
                 stochastic_depth_prob: float = 0.2, num_classes: int = 1000,
                 norm_layer: Callable[..., nn.Module] | None = None, last_channel: int | None = None) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not (isinstance(inverted_residual_setting, Sequence)
                and all(isinstance(s, _MBConvConfig) for s in inverted_residual_setting)):
            raise TypeError("The inverted_residual_setting should be List[MBConvConfig]")
        norm_layer = norm_layer or nn.BatchNorm2d
        layers: list[nn.Module] = [Conv2dNormActivation(3, inverted_residual_setting[0].input_channels, kernel_size=3,
                                                        stride=2, norm_layer=norm_layer, activation_layer=nn.SiLU)]
        total = sum(cnf.num_layers for cnf in inverted_residual_setting)
        block_id = 0
        for cnf in inverted_residual_setting:
            stage: list[nn.Module] = []
            for _ in range(cnf.num_layers):
                block_cnf = copy.copy(cnf)
                if stage:   # later blocks of a stage keep the resolution and the channel count
                    block_cnf.input_channels, block_cnf.stride = block_cnf.out_channels, 1
                # the drop probability grows linearly with depth
                stage.append(block_cnf.block(block_cnf, stochastic_depth_prob * block_id / total, norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        last_in = inverted_residual_setting[-1].out_channels
        last_out = last_channel if last_channel is not None else 4 * last_in
        layers.append(Conv2dNormActivation(last_in, last_out, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(last_out, num_classes))
        init_mobile_weights(self, _uniform_linear)

    def forward(self, x):
        return self.classifier(flatten(self.avgpool(self.features(x)), 1))


_V1_STAGES = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
              (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]
# V2: (fused?, expand, kernel, stride, in, out, blocks)
_V2_STAGES = {
    "s": [(1, 1, 3, 1, 24, 24, 2), (1, 4, 3, 2, 24, 48, 4), (1, 4, 3, 2, 48, 64, 4), (0, 4, 3, 2, 64, 128, 6),
          (0, 6, 3, 1, 128, 160, 9), (0, 6, 3, 2, 160, 256, 15)],
    "m": [(1, 1, 3, 1, 24, 24, 3), (1, 4, 3, 2, 24, 48, 5), (1, 4, 3, 2, 48, 80, 5), (0, 4, 3, 2, 80, 160, 7),
          (0, 6, 3, 1, 160, 176, 14), (0, 6, 3, 2, 176, 304, 18), (0, 6, 3, 1, 304, 512, 5)],
    "l": [(1, 1, 3, 1, 32, 32, 4), (1, 4, 3, 2, 32, 64, 7), (1, 4, 3, 2, 64, 96, 7), (0, 4, 3, 2, 96, 192, 10),
          (0, 6, 3, 1, 192, 224, 19), (0, 6, 3, 2, 224, 384, 25), (0, 6, 3, 1, 384, 640, 7)],
}
# B0..B7: (width_mult, depth_mult, dropout); B5 and up use batch norm with eps=1e-3, momentum=0.01
_V1_SCALING = {0: (1.0, 1.0, 0.2), 1: (1.0, 1.1, 0.2), 2: (1.1, 1.2, 0.3), 3: (1.2, 1.4, 0.3),
               4: (1.4, 1.8, 0.4), 5: (1.6, 2.2, 0.4), 6: (1.8, 2.6, 0.5), 7: (2.0, 3.1, 0.5)}
_V2_DROPOUT = {"s": 0.2, "m": 0.3, "l": 0.4}


def _efficientnet_b(k: int, kwargs: dict) -> EfficientNet:
    width, depth, dropout = _V1_SCALING[k]
    setting = [MBConvConfig(*row, width_mult=width, depth_mult=depth) for row in _V1_STAGES]
    if k >= 5:
        kwargs.setdefault("norm_layer", partial(nn.BatchNorm2d, eps=0.001, momentum=0.01))
    return EfficientNet(setting, kwargs.pop("dropout", dropout), last_channel=None, **kwargs)


def _efficientnet_v2(size: str, kwargs: dict) -> EfficientNet:
    setting = [(FusedMBConvConfig if fused else MBConvConfig)(*row) for fused, *row in _V2_STAGES[size]]
    kwargs.setdefault("norm_layer", partial(nn.BatchNorm2d, eps=1e-03))
    return EfficientNet(setting, kwargs.pop("dropout", _V2_DROPOUT[size]), last_channel=1280, **kwargs)


@register_model()
def efficientnet_b0(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B0 (5,288,548 parameters)."""
    return _efficientnet_b(0, kwargs)


@register_model()
def efficientnet_b1(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B1 (7,794,184 parameters)."""
    return _efficientnet_b(1, kwargs)


@register_model()
def efficientnet_b2(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B2 (9,109,994 parameters)."""
    return _efficientnet_b(2, kwargs)


@register_model()
def efficientnet_b3(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B3 (12,233,232 parameters)."""
    return _efficientnet_b(3, kwargs)


@register_model()
def efficientnet_b4(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B4 (19,341,616 parameters)."""
    return _efficientnet_b(4, kwargs)


@register_model()
def efficientnet_b5(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B5 (30,389,784 parameters)."""
    return _efficientnet_b(5, kwargs)


@register_model()
def efficientnet_b6(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B6 (43,040,704 parameters)."""
    return _efficientnet_b(6, kwargs)


@register_model()
def efficientnet_b7(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B7 (66,347,960 parameters)."""
    return _efficientnet_b(7, kwargs)


@register_model()
def efficientnet_v2_s(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNetV2-S (21,458,488 parameters)."""
    return _efficientnet_v2("s", kwargs)


@register_model()
def efficientnet_v2_m(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNetV2-M (54,139,356 parameters)."""
    return _efficientnet_v2("m", kwargs)


@register_model()
def efficientnet_v2_l(*, weights=None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNetV2-L (118,515,272 parameters)."""
    return _efficientnet_v2("l", kwargs)
