"""ShuffleNetV2 (Ma et al. 2018): split the channels, transform one half, concatenate, shuffle."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import nn
from ...nn import functional as F
from ...ops.movement import cat
from ._api import register_model

__all__ = ["ShuffleNetV2", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0"]


class InvertedResidual(nn.Module):
    """Stride 1: half the channels pass, half go through 1x1-dw3x3-1x1; stride 2: both halves downsample."""

    def __init__(self, inp: int, oup: int, stride: int) -> None:
        super().__init__()
        if not 1 <= stride <= 3:
            raise ValueError("illegal stride value")
        self.stride = stride
        branch = oup // 2
        if stride == 1 and inp != branch << 1:
            raise ValueError(f"Invalid combination of stride {stride}, inp {inp} and oup {oup} values. "
                             f"If stride == 1 then inp should be equal to oup // 2 << 1.")
        if stride > 1:
            self.branch1 = nn.Sequential(self.depthwise_conv(inp, inp, kernel_size=3, stride=stride, padding=1),
                                         nn.BatchNorm2d(inp), nn.Conv2d(inp, branch, 1, 1, 0, bias=False),
                                         nn.BatchNorm2d(branch), nn.ReLU(inplace=True))
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else branch, branch, 1, 1, 0, bias=False), nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True), self.depthwise_conv(branch, branch, kernel_size=3, stride=stride, padding=1),
            nn.BatchNorm2d(branch), nn.Conv2d(branch, branch, 1, 1, 0, bias=False), nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True))

    @staticmethod
    def depthwise_conv(i: int, o: int, kernel_size: int, stride: int = 1, padding: int = 0,
                       bias: bool = False) -> nn.Conv2d:
        return nn.Conv2d(i, o, kernel_size, stride, padding, bias=bias, groups=i)

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = cat((x1, self.branch2(x2)), dim=1)
        else:
            out = cat((self.branch1(x), self.branch2(x)), dim=1)
        return F.channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, stages_repeats: list[int], stages_out_channels: list[int], num_classes: int = 1000,
                 inverted_residual: Callable[..., nn.Module] = InvertedResidual) -> None:
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError("expected stages_repeats as list of 3 positive ints")
        if len(stages_out_channels) != 5:
            raise ValueError("expected stages_out_channels as list of 5 positive ints")
        self._stage_out_channels = stages_out_channels
        channels = stages_out_channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(3, channels, 3, 2, 1, bias=False), nn.BatchNorm2d(channels),
                                   nn.ReLU(inplace=True))
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for name, repeats, out in zip(("stage2", "stage3", "stage4"), stages_repeats, stages_out_channels[1:]):
            blocks = [inverted_residual(channels, out, 2)]
            blocks += [inverted_residual(out, out, 1) for _ in range(repeats - 1)]
            setattr(self, name, nn.Sequential(*blocks))
            channels = out
        out = stages_out_channels[-1]
        self.conv5 = nn.Sequential(nn.Conv2d(channels, out, 1, 1, 0, bias=False), nn.BatchNorm2d(out),
                                   nn.ReLU(inplace=True))
        self.fc = nn.Linear(out, num_classes)

    def forward(self, x):
        x = self.stage4(self.stage3(self.stage2(self.maxpool(self.conv1(x)))))
        return self.fc(self.conv5(x).mean([2, 3]))


_WIDTHS = {"x0_5": [24, 48, 96, 192, 1024], "x1_0": [24, 116, 232, 464, 1024], "x1_5": [24, 176, 352, 704, 1024],
           "x2_0": [24, 244, 488, 976, 2048]}


def _shufflenet_v2(width: str, kwargs: dict) -> ShuffleNetV2:
    return ShuffleNetV2([4, 8, 4], _WIDTHS[width], **kwargs)


@register_model()
def shufflenet_v2_x0_5(*, weights=None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNetV2 at 0.5x width (1,366,792 parameters)."""
    return _shufflenet_v2("x0_5", kwargs)


@register_model()
def shufflenet_v2_x1_0(*, weights=None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNetV2 at 1.0x width (2,278,604 parameters)."""
    return _shufflenet_v2("x1_0", kwargs)


@register_model()
def shufflenet_v2_x1_5(*, weights=None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNetV2 at 1.5x width (3,503,624 parameters)."""
    return _shufflenet_v2("x1_5", kwargs)


@register_model()
def shufflenet_v2_x2_0(*, weights=None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNetV2 at 2.0x width (7,393,996 parameters)."""
    return _shufflenet_v2("x2_0", kwargs)
