"""ConvNeXt (Liu et al. 2022): a ResNet modernised toward vision transformers: patchify stem,
7x7 depthwise convolutions, LayerNorm, inverted MLP with GELU, layer scale and stochastic depth."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ... import nn
from ...core.creation import ones
from ...nn import functional as F
from ...nn import init
from ..ops.misc import Conv2dNormActivation, Permute
from ..ops.stochastic_depth import StochasticDepth
from ._api import register_model

__all__ = ["ConvNeXt", "CNBlock", "CNBlockConfig", "LayerNorm2d", "convnext_tiny", "convnext_small",
           "convnext_base", "convnext_large"]


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an (N, C, H, W) tensor."""

    def forward(self, x):
        x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """Depthwise 7x7, LayerNorm and a 4x MLP in channels-last, scaled per channel, added to the input."""

    def __init__(self, dim: int, layer_scale: float, stochastic_depth_prob: float,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)
        self.block = nn.Sequential(nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
                                   Permute([0, 2, 3, 1]), norm_layer(dim), nn.Linear(dim, 4 * dim), nn.GELU(),
                                   nn.Linear(4 * dim, dim), Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, input):
        return self.stochastic_depth(self.layer_scale * self.block(input)) + input


class CNBlockConfig:
    """One stage: its width, the width the downsampling after it leads to (None: last stage), its depth."""

    def __init__(self, input_channels: int, out_channels: int | None, num_layers: int) -> None:
        self.input_channels, self.out_channels, self.num_layers = input_channels, out_channels, num_layers

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(input_channels={self.input_channels}, "
                f"out_channels={self.out_channels}, num_layers={self.num_layers})")


class ConvNeXt(nn.Module):
    def __init__(self, block_setting: list[CNBlockConfig], stochastic_depth_prob: float = 0.0,
                 layer_scale: float = 1e-6, num_classes: int = 1000, block: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None, **kwargs: Any) -> None:
        super().__init__()
        if not block_setting:
            raise ValueError("The block_setting should not be empty")
        if not (isinstance(block_setting, Sequence) and all(isinstance(s, CNBlockConfig) for s in block_setting)):
            raise TypeError("The block_setting should be List[CNBlockConfig]")
        block = block or CNBlock
        norm_layer = norm_layer or partial(LayerNorm2d, eps=1e-6)
        layers: list[nn.Module] = [Conv2dNormActivation(3, block_setting[0].input_channels, kernel_size=4, stride=4,
                                                        padding=0, norm_layer=norm_layer, activation_layer=None,
                                                        bias=True)]
        total = sum(cnf.num_layers for cnf in block_setting)
        block_id = 0
        for cnf in block_setting:
            stage = []
            for _ in range(cnf.num_layers):   # the drop probability grows linearly to its maximum at the last block
                stage.append(block(cnf.input_channels, layer_scale, stochastic_depth_prob * block_id / (total - 1.0)))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if cnf.out_channels is not None:
                layers.append(nn.Sequential(norm_layer(cnf.input_channels),
                                            nn.Conv2d(cnf.input_channels, cnf.out_channels, kernel_size=2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last = block_setting[-1]
        last_channels = last.out_channels if last.out_channels is not None else last.input_channels
        self.classifier = nn.Sequential(norm_layer(last_channels), nn.Flatten(1), nn.Linear(last_channels, num_classes))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


# (stage widths, stage depths, default stochastic depth)
_SIZES = {"tiny": ((96, 192, 384, 768), (3, 3, 9, 3), 0.1), "small": ((96, 192, 384, 768), (3, 3, 27, 3), 0.4),
          "base": ((128, 256, 512, 1024), (3, 3, 27, 3), 0.5), "large": ((192, 384, 768, 1536), (3, 3, 27, 3), 0.5)}


def _convnext(size: str, kwargs: dict) -> ConvNeXt:
    widths, depths, sd_prob = _SIZES[size]
    setting = [CNBlockConfig(w, nxt, d) for w, nxt, d in zip(widths, widths[1:] + (None,), depths)]
    return ConvNeXt(setting, stochastic_depth_prob=kwargs.pop("stochastic_depth_prob", sd_prob), **kwargs)


@register_model()
def convnext_tiny(*, weights=None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-Tiny (28,589,128 parameters)."""
    return _convnext("tiny", kwargs)


@register_model()
def convnext_small(*, weights=None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-Small (50,223,688 parameters)."""
    return _convnext("small", kwargs)


@register_model()
def convnext_base(*, weights=None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-Base (88,591,464 parameters)."""
    return _convnext("base", kwargs)


@register_model()
def convnext_large(*, weights=None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-Large (197,767,336 parameters)."""
    return _convnext("large", kwargs)
