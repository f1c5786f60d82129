"""GoogLeNet (Inception v1, Szegedy et al. 2014): four parallel branches per block, and two auxiliary
classifiers that add their logits in training."""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
import warnings
from typing import Any

from ... import nn
from ...nn import functional as F
from ...nn import init
from ...ops.movement import cat, flatten
from ._api import register_model

__all__ = ["GoogLeNet", "GoogLeNetOutputs", "_GoogLeNetOutputs", "BasicConv2d", "Inception", "InceptionAux",
           "googlenet"]

GoogLeNetOutputs = namedtuple("GoogLeNetOutputs", ["logits", "aux_logits2", "aux_logits1"])
_GoogLeNetOutputs = GoogLeNetOutputs


class BasicConv2d(nn.Module):
    """Convolution without bias, batch norm (eps 1e-3), ReLU."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs: Any) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


def init_truncated_normal(model: nn.Module, label: str, init_weights: bool | None, std) -> None:
    """GoogLeNet's and Inception v3's initialisation, as torchvision's: convolutions and linear
    layers truncated-normal with ``std(layer)``, batch norms unit scale and zero shift; ``None``
    (the default) warns that the default will change, then initialises."""
    if init_weights is None:
        warnings.warn(f"The default weight initialization of {label} will be changed in future releases of "
                      "torchvision. If you wish to keep the old behavior (which leads to long initialization "
                      "times due to scipy/scipy#11299), please set init_weights=True.", FutureWarning)
        init_weights = True
    if init_weights:
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                init.trunc_normal_(m.weight, mean=0.0, std=std(m), a=-2, b=2)
            elif isinstance(m, nn.BatchNorm2d):
                init.constant_(m.weight, 1)
                init.constant_(m.bias, 0)


def _transform_imagenet_input(x):
    """Map an input normalised with ImageNet's mean and std to one normalised to [-1, 1] (ported weights)."""
    channels = [x[:, c:c + 1] * (std / 0.5) + (mean - 0.5) / 0.5
                for c, (mean, std) in enumerate(((0.485, 0.229), (0.456, 0.224), (0.406, 0.225)))]
    return cat(channels, 1)


class Inception(nn.Module):
    """1x1 | 1x1 -> 3x3 | 1x1 -> 3x3 (torchvision's "5x5" branch is 3x3) | maxpool -> 1x1, concatenated."""

    def __init__(self, in_channels: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int,
                 pool_proj: int, conv_block: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1 = conv_block(in_channels, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(conv_block(in_channels, ch3x3red, kernel_size=1),
                                     conv_block(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(conv_block(in_channels, ch5x5red, kernel_size=1),
                                     conv_block(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
                                     conv_block(in_channels, pool_proj, kernel_size=1))

    def forward(self, x):
        return cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier: 4x4 average, 1x1 convolution, two linear layers."""

    def __init__(self, in_channels: int, num_classes: int, conv_block: Callable[..., nn.Module] | None = None,
                 dropout: float = 0.7) -> None:
        super().__init__()
        self.conv = (conv_block or BasicConv2d)(in_channels, 128, kernel_size=1)
        self.fc1 = nn.Linear(2048, 1024)
        self.fc2 = nn.Linear(1024, num_classes)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        x = flatten(self.conv(F.adaptive_avg_pool2d(x, (4, 4))), 1)
        return self.fc2(self.dropout(F.relu(self.fc1(x), inplace=True)))


class GoogLeNet(nn.Module):
    """Returns the logits, or ``GoogLeNetOutputs(logits, aux_logits2, aux_logits1)`` when training
    with ``aux_logits``."""

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True, transform_input: bool = False,
                 init_weights: bool | None = None, blocks: list[Callable[..., nn.Module]] | None = None,
                 dropout: float = 0.2, dropout_aux: float = 0.7) -> None:
        super().__init__()
        blocks = blocks or [BasicConv2d, Inception, InceptionAux]
        if len(blocks) != 3:
            raise ValueError(f"blocks length should be 3 instead of {len(blocks)}")
        conv_block, inception_block, aux_block = blocks
        self.aux_logits, self.transform_input = aux_logits, transform_input
        self.conv1 = conv_block(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = conv_block(64, 64, kernel_size=1)
        self.conv3 = conv_block(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = inception_block(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = inception_block(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = inception_block(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = inception_block(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = inception_block(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = inception_block(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = inception_block(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = inception_block(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = inception_block(832, 384, 192, 384, 48, 128, 128)
        self.aux1 = aux_block(512, num_classes, dropout=dropout_aux) if aux_logits else None
        self.aux2 = aux_block(528, num_classes, dropout=dropout_aux) if aux_logits else None
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(1024, num_classes)
        init_truncated_normal(self, "GoogleNet", init_weights, lambda m: 0.01)

    def forward(self, x):
        if self.transform_input:
            x = _transform_imagenet_input(x)
        x = self.maxpool2(self.conv3(self.conv2(self.maxpool1(self.conv1(x)))))
        x = self.inception4a(self.maxpool3(self.inception3b(self.inception3a(x))))
        aux = self.training and self.aux_logits
        aux1 = self.aux1(x) if aux and self.aux1 is not None else None
        x = self.inception4d(self.inception4c(self.inception4b(x)))
        aux2 = self.aux2(x) if aux and self.aux2 is not None else None
        x = self.inception5b(self.inception5a(self.maxpool4(self.inception4e(x))))
        x = self.fc(self.dropout(flatten(self.avgpool(x), 1)))
        return GoogLeNetOutputs(x, aux2, aux1) if aux else x


@register_model()
def googlenet(*, weights=None, progress: bool = True, **kwargs: Any) -> GoogLeNet:
    """GoogLeNet (6,624,904 parameters without the auxiliary classifiers, ``aux_logits=False``)."""
    return GoogLeNet(**kwargs)
