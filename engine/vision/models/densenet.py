"""DenseNet-121 (Huang et al. 2016): each layer reads the concatenation of all earlier ones."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ... import nn
from ...nn import functional as F
from ...nn import init
from ...ops.movement import cat, flatten
from ._api import register_model

__all__ = ["DenseNet", "densenet121", "densenet161", "densenet169", "densenet201"]


class _DenseLayer(nn.Module):
    def __init__(self, num_input_features: int, growth_rate: int, bn_size: int, drop_rate: float,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient   # accepted for torchvision's signature; nothing to checkpoint

    def forward(self, input):
        prev = [input] if not isinstance(input, list) else input
        bottleneck = self.conv1(self.relu1(self.norm1(cat(prev, 1))))
        new_features = self.conv2(self.relu2(self.norm2(bottleneck)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(nn.ModuleDict):
    def __init__(self, num_layers: int, num_input_features: int, bn_size: int, growth_rate: int,
                 drop_rate: float, memory_efficient: bool = False) -> None:
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", _DenseLayer(num_input_features + i * growth_rate, growth_rate,
                                                              bn_size, drop_rate, memory_efficient))

    def forward(self, init_features):
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    def __init__(self, growth_rate: int = 32, block_config: tuple[int, ...] = (6, 12, 24, 16),
                 num_init_features: int = 64, bn_size: int = 4, drop_rate: float = 0, num_classes: int = 1000,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}", _DenseBlock(num_layers, num_features, bn_size, growth_rate,
                                                                       drop_rate, memory_efficient))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                init.constant_(m.weight, 1)
                init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                init.constant_(m.bias, 0)

    def forward(self, x):
        out = F.adaptive_avg_pool2d(F.relu(self.features(x), inplace=True), (1, 1))
        return self.classifier(flatten(out, 1))


@register_model()
def densenet121(*, weights=None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-121 (7,978,856 parameters)."""
    return DenseNet(32, (6, 12, 24, 16), 64, **kwargs)


@register_model()
def densenet161(*, weights=None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-161 (28,681,000 parameters): growth rate 48, 96 initial features."""
    return DenseNet(48, (6, 12, 36, 24), 96, **kwargs)


@register_model()
def densenet169(*, weights=None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-169 (14,149,480 parameters)."""
    return DenseNet(32, (6, 12, 32, 32), 64, **kwargs)


@register_model()
def densenet201(*, weights=None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-201 (20,013,928 parameters)."""
    return DenseNet(32, (6, 12, 48, 32), 64, **kwargs)
