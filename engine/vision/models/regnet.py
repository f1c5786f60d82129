"""RegNet (Radosavovic et al. 2020): stage widths and depths from a quantized linear rule
(``w_0``, ``w_a``, ``w_m``), residual bottlenecks with group convolutions, optionally SE (RegNetY)."""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ... import nn
from ...nn import init
from ..ops.misc import Conv2dNormActivation, SqueezeExcitation
from ._api import register_model
from .mobilenetv2 import _make_divisible

__all__ = ["RegNet", "BlockParams", "SimpleStemIN", "BottleneckTransform", "ResBottleneckBlock", "AnyStage",
           "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf",
           "regnet_y_16gf", "regnet_y_32gf", "regnet_y_128gf", "regnet_x_400mf", "regnet_x_800mf",
           "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf", "regnet_x_16gf", "regnet_x_32gf"]


class SimpleStemIN(Conv2dNormActivation):
    """The ImageNet stem: 3x3 stride-2 convolution, norm, activation."""

    def __init__(self, width_in: int, width_out: int, norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module]) -> None:
        super().__init__(width_in, width_out, kernel_size=3, stride=2, norm_layer=norm_layer,
                         activation_layer=activation_layer)


class BottleneckTransform(nn.Sequential):
    """1x1 (a), grouped 3x3 (b), optional squeeze-excitation (se), 1x1 without activation (c)."""

    def __init__(self, width_in: int, width_out: int, stride: int, norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module], group_width: int, bottleneck_multiplier: float,
                 se_ratio: float | None) -> None:
        w_b = int(round(width_out * bottleneck_multiplier))
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        layers["a"] = Conv2dNormActivation(width_in, w_b, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=activation_layer)
        layers["b"] = Conv2dNormActivation(w_b, w_b, kernel_size=3, stride=stride, groups=w_b // group_width,
                                           norm_layer=norm_layer, activation_layer=activation_layer)
        if se_ratio:   # the squeeze width follows the block's input width, not the bottleneck's
            layers["se"] = SqueezeExcitation(w_b, int(round(se_ratio * width_in)), activation=activation_layer)
        layers["c"] = Conv2dNormActivation(w_b, width_out, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=None)
        super().__init__(layers)


class ResBottleneckBlock(nn.Module):
    """``activation(x + f(x))``, x projected by a strided 1x1 convolution when the shape changes."""

    def __init__(self, width_in: int, width_out: int, stride: int, norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module], group_width: int = 1,
                 bottleneck_multiplier: float = 1.0, se_ratio: float | None = None) -> None:
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(width_in, width_out, kernel_size=1, stride=stride,
                                             norm_layer=norm_layer, activation_layer=None)
        self.f = BottleneckTransform(width_in, width_out, stride, norm_layer, activation_layer, group_width,
                                     bottleneck_multiplier, se_ratio)
        self.activation = activation_layer(inplace=True)

    def forward(self, x):
        shortcut = x if self.proj is None else self.proj(x)
        return self.activation(shortcut + self.f(x))


class AnyStage(nn.Sequential):
    """``depth`` blocks of one width; the first one strides. Children are named ``block{stage}-{i}``."""

    def __init__(self, width_in: int, width_out: int, stride: int, depth: int,
                 block_constructor: Callable[..., nn.Module], norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module], group_width: int, bottleneck_multiplier: float,
                 se_ratio: float | None = None, stage_index: int = 0) -> None:
        super().__init__()
        for i in range(depth):
            self.add_module(f"block{stage_index}-{i}", block_constructor(
                width_in if i == 0 else width_out, width_out, stride if i == 0 else 1, norm_layer,
                activation_layer, group_width, bottleneck_multiplier, se_ratio))


class BlockParams:
    """Per-stage depths, widths, group widths, bottleneck multipliers and strides."""

    def __init__(self, depths: list[int], widths: list[int], group_widths: list[int],
                 bottleneck_multipliers: list[float], strides: list[int], se_ratio: float | None = None) -> None:
        self.depths, self.widths, self.group_widths = depths, widths, group_widths
        self.bottleneck_multipliers, self.strides, self.se_ratio = bottleneck_multipliers, strides, se_ratio

    @classmethod
    def from_init_params(cls, depth: int, w_0: int, w_a: float, w_m: float, group_width: int,
                         bottleneck_multiplier: float = 1.0, se_ratio: float | None = None,
                         **kwargs: Any) -> BlockParams:
        """The stages of the RegNet rule: block j has width ``w_0 * w_m ** round(log(1 + j w_a / w_0) / log w_m)``
        rounded to a multiple of 8; consecutive blocks of equal width form a stage."""
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 != 0:
            raise ValueError("Invalid RegNet settings")
        # float32 as torchvision computes it: a width on a rounding edge would otherwise move
        f32 = np.float32
        widths_cont = np.arange(depth).astype(f32) * f32(w_a) + f32(w_0)
        capacity = np.round(np.log(widths_cont / f32(w_0)) / f32(math.log(w_m)))
        block_widths = (np.round(f32(w_0) * np.power(f32(w_m), capacity) / f32(8)) * 8).astype(np.int64).tolist()
        starts = [j for j in range(depth) if j == 0 or block_widths[j] != block_widths[j - 1]]
        stage_widths = [block_widths[j] for j in starts]
        depths = np.diff(starts + [depth]).tolist()
        n = len(stage_widths)
        multipliers = [bottleneck_multiplier] * n
        stage_widths, group_widths = cls._adjust_widths_groups_compatibilty(stage_widths, multipliers,
                                                                            [group_width] * n)
        return cls(depths=depths, widths=stage_widths, group_widths=group_widths,
                   bottleneck_multipliers=multipliers, strides=[2] * n, se_ratio=se_ratio)

    def _get_expanded_params(self):
        return zip(self.widths, self.strides, self.depths, self.group_widths, self.bottleneck_multipliers)

    @staticmethod
    def _adjust_widths_groups_compatibilty(stage_widths: list[int], bottleneck_ratios: list[float],
                                           group_widths: list[int]) -> tuple[list[int], list[int]]:
        """Make each bottleneck width a multiple of its group width (shrinking the group if wider)."""
        bottlenecks = [int(w * b) for w, b in zip(stage_widths, bottleneck_ratios)]
        groups = [min(g, w) for g, w in zip(group_widths, bottlenecks)]
        bottlenecks = [_make_divisible(w, g) for w, g in zip(bottlenecks, groups)]
        return [int(w / b) for w, b in zip(bottlenecks, bottleneck_ratios)], groups


class RegNet(nn.Module):
    def __init__(self, block_params: BlockParams, num_classes: int = 1000, stem_width: int = 32,
                 stem_type: Callable[..., nn.Module] | None = None,
                 block_type: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None,
                 activation: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        activation = activation or nn.ReLU
        self.stem = (stem_type or SimpleStemIN)(3, stem_width, norm_layer, activation)
        width = stem_width
        stages = []
        for i, (width_out, stride, depth, group_width, multiplier) in enumerate(block_params._get_expanded_params()):
            stages.append((f"block{i + 1}", AnyStage(width, width_out, stride, depth, block_type or ResBottleneckBlock,
                                                     norm_layer, activation, group_width, multiplier,
                                                     block_params.se_ratio, stage_index=i + 1)))
            width = width_out
        self.trunk_output = nn.Sequential(OrderedDict(stages))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / (m.kernel_size[0] * m.kernel_size[1]
                                                                      * m.out_channels)))
            elif isinstance(m, nn.BatchNorm2d):
                init.ones_(m.weight)
                init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                init.normal_(m.weight, mean=0.0, std=0.01)
                init.zeros_(m.bias)

    def forward(self, x):
        return self.fc(self.avgpool(self.trunk_output(self.stem(x))).flatten(start_dim=1))


# name -> (depth, w_0, w_a, w_m, group_width, se_ratio)
_PARAMS = {
    "y_400mf": (16, 48, 27.89, 2.09, 8, 0.25), "y_800mf": (14, 56, 38.84, 2.4, 16, 0.25),
    "y_1_6gf": (27, 48, 20.71, 2.65, 24, 0.25), "y_3_2gf": (21, 80, 42.63, 2.66, 24, 0.25),
    "y_8gf": (17, 192, 76.82, 2.19, 56, 0.25), "y_16gf": (18, 200, 106.23, 2.48, 112, 0.25),
    "y_32gf": (20, 232, 115.89, 2.53, 232, 0.25), "y_128gf": (27, 456, 160.83, 2.52, 264, 0.25),
    "x_400mf": (22, 24, 24.48, 2.54, 16, None), "x_800mf": (16, 56, 35.73, 2.28, 16, None),
    "x_1_6gf": (18, 80, 34.01, 2.25, 24, None), "x_3_2gf": (25, 88, 26.31, 2.25, 48, None),
    "x_8gf": (23, 80, 49.56, 2.88, 120, None), "x_16gf": (22, 216, 55.59, 2.1, 128, None),
    "x_32gf": (23, 320, 69.86, 2.0, 168, None),
}


def _regnet(name: str, kwargs: dict) -> RegNet:
    depth, w_0, w_a, w_m, group_width, se_ratio = _PARAMS[name]
    params = BlockParams.from_init_params(depth=depth, w_0=w_0, w_a=w_a, w_m=w_m, group_width=group_width,
                                          se_ratio=se_ratio, **kwargs)
    norm_layer = kwargs.pop("norm_layer", partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1))
    return RegNet(params, norm_layer=norm_layer, **kwargs)


@register_model()
def regnet_y_400mf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-400MF (4,344,144 parameters)."""
    return _regnet("y_400mf", kwargs)


@register_model()
def regnet_y_800mf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-800MF (6,432,512 parameters)."""
    return _regnet("y_800mf", kwargs)


@register_model()
def regnet_y_1_6gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-1.6GF (11,202,430 parameters)."""
    return _regnet("y_1_6gf", kwargs)


@register_model()
def regnet_y_3_2gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-3.2GF (19,436,338 parameters)."""
    return _regnet("y_3_2gf", kwargs)


@register_model()
def regnet_y_8gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-8GF (39,381,472 parameters)."""
    return _regnet("y_8gf", kwargs)


@register_model()
def regnet_y_16gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-16GF (83,590,140 parameters)."""
    return _regnet("y_16gf", kwargs)


@register_model()
def regnet_y_32gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-32GF (145,046,770 parameters)."""
    return _regnet("y_32gf", kwargs)


@register_model()
def regnet_y_128gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetY-128GF (644,812,894 parameters)."""
    return _regnet("y_128gf", kwargs)


@register_model()
def regnet_x_400mf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetX-400MF (5,495,976 parameters)."""
    return _regnet("x_400mf", kwargs)


@register_model()
def regnet_x_800mf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetX-800MF (7,259,656 parameters)."""
    return _regnet("x_800mf", kwargs)


@register_model()
def regnet_x_1_6gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetX-1.6GF (9,190,136 parameters)."""
    return _regnet("x_1_6gf", kwargs)


@register_model()
def regnet_x_3_2gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetX-3.2GF (15,296,552 parameters)."""
    return _regnet("x_3_2gf", kwargs)


@register_model()
def regnet_x_8gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetX-8GF (39,572,648 parameters)."""
    return _regnet("x_8gf", kwargs)


@register_model()
def regnet_x_16gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetX-16GF (54,278,536 parameters)."""
    return _regnet("x_16gf", kwargs)


@register_model()
def regnet_x_32gf(*, weights=None, progress: bool = True, **kwargs: Any) -> RegNet:
    """RegNetX-32GF (107,811,560 parameters)."""
    return _regnet("x_32gf", kwargs)
