"""MNASNet (Tan et al. 2019), variant B1: a mobile network found by platform-aware search;
``alpha`` scales every width (rounded to multiples of 8, rounding up unless within 10%)."""
from __future__ import annotations

import warnings
from typing import Any

from ... import nn
from ...nn import init
from ._api import register_model

__all__ = ["MNASNet", "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"]

_BN_MOMENTUM = 1 - 0.9997   # TensorFlow's 0.9997 decay, in PyTorch's convention


class _InvertedResidual(nn.Module):
    """Expand (1x1), depthwise (kxk), project (1x1, no activation); residual when shapes allow."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, stride: int, expansion_factor: int,
                 bn_momentum: float = 0.1) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        if kernel_size not in (3, 5):
            raise ValueError(f"kernel_size should be 3 or 5 instead of {kernel_size}")
        mid = in_ch * expansion_factor
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, bias=False), nn.BatchNorm2d(mid, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, kernel_size, padding=kernel_size // 2, stride=stride, groups=mid, bias=False),
            nn.BatchNorm2d(mid, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch, momentum=bn_momentum))

    def forward(self, input):
        return self.layers(input) + input if self.apply_residual else self.layers(input)


def _stack(in_ch: int, out_ch: int, kernel_size: int, stride: int, exp_factor: int, repeats: int,
           bn_momentum: float) -> nn.Sequential:
    if repeats < 1:
        raise ValueError(f"repeats should be >= 1, instead got {repeats}")
    return nn.Sequential(_InvertedResidual(in_ch, out_ch, kernel_size, stride, exp_factor, bn_momentum),
                         *[_InvertedResidual(out_ch, out_ch, kernel_size, 1, exp_factor, bn_momentum)
                           for _ in range(1, repeats)])


def _round_to_multiple_of(val: float, divisor: int, round_up_bias: float = 0.9) -> int:
    """The nearest multiple of ``divisor``, rounded up when the nearest is over 10% below ``val``."""
    if not 0.0 < round_up_bias < 1.0:
        raise ValueError(f"round_up_bias should be greater than 0.0 and smaller than 1.0 instead of {round_up_bias}")
    new_val = max(divisor, int(val + divisor / 2) // divisor * divisor)
    return new_val if new_val >= round_up_bias * val else new_val + divisor


def _get_depths(alpha: float) -> list[int]:
    return [_round_to_multiple_of(depth * alpha, 8) for depth in (32, 16, 24, 40, 80, 96, 192, 320)]


def _v1_stem() -> list[nn.Module]:
    """The first nine layers before version 2, when the stem's widths did not follow ``alpha``."""
    m = _BN_MOMENTUM
    return [nn.Conv2d(3, 32, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(32, momentum=m),
            nn.ReLU(inplace=True), nn.Conv2d(32, 32, 3, padding=1, stride=1, groups=32, bias=False),
            nn.BatchNorm2d(32, momentum=m), nn.ReLU(inplace=True),
            nn.Conv2d(32, 16, 1, padding=0, stride=1, bias=False), nn.BatchNorm2d(16, momentum=m)]


class MNASNet(nn.Module):
    _version = 2

    def __init__(self, alpha: float, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        if alpha <= 0.0:
            raise ValueError(f"alpha should be greater than 0.0 instead of {alpha}")
        self.alpha, self.num_classes = alpha, num_classes
        d = _get_depths(alpha)
        m = _BN_MOMENTUM
        self.layers = nn.Sequential(
            nn.Conv2d(3, d[0], 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[0], 3, padding=1, stride=1, groups=d[0], bias=False), nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[1], 1, padding=0, stride=1, bias=False), nn.BatchNorm2d(d[1], momentum=m),
            _stack(d[1], d[2], 3, 2, 3, 3, m), _stack(d[2], d[3], 5, 2, 3, 3, m), _stack(d[3], d[4], 5, 2, 6, 3, m),
            _stack(d[4], d[5], 3, 1, 6, 2, m), _stack(d[5], d[6], 5, 2, 6, 4, m), _stack(d[6], d[7], 3, 1, 6, 1, m),
            nn.Conv2d(d[7], 1280, 1, padding=0, stride=1, bias=False), nn.BatchNorm2d(1280, momentum=m),
            nn.ReLU(inplace=True))
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(1280, num_classes))
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
                if mod.bias is not None:
                    init.zeros_(mod.bias)
            elif isinstance(mod, nn.BatchNorm2d):
                init.ones_(mod.weight)
                init.zeros_(mod.bias)
            elif isinstance(mod, nn.Linear):
                init.kaiming_uniform_(mod.weight, mode="fan_out", nonlinearity="sigmoid")
                init.zeros_(mod.bias)

    def forward(self, x):
        return self.classifier(self.layers(x).mean([2, 3]))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """A version-1 checkpoint of alpha != 1 has a fixed-width stem: rebuild it so that it loads."""
        version = local_metadata.get("version", None)
        if version not in (1, 2, None):   # None: a plain dict, taken as the current layout
            raise ValueError(f"version should be set to 1 or 2 instead of {version}")
        if version == 1 and self.alpha != 1.0:
            depths = _get_depths(self.alpha)
            for idx, layer in enumerate(_v1_stem() + [_stack(16, depths[2], 3, 2, 3, 3, _BN_MOMENTUM)]):
                self.layers[idx] = layer
            self._version = 1
            warnings.warn("A new version of MNASNet model has been implemented. Your checkpoint was saved using "
                          "the previous version. This checkpoint will load and work as before, but you may want "
                          "to upgrade by training a newer model or transfer learning from an updated ImageNet "
                          "checkpoint.", UserWarning)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


def _mnasnet(alpha: float, kwargs: dict) -> MNASNet:
    return MNASNet(alpha, **kwargs)


@register_model()
def mnasnet0_5(*, weights=None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 0.5 (2,218,512 parameters)."""
    return _mnasnet(0.5, kwargs)


@register_model()
def mnasnet0_75(*, weights=None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 0.75 (3,170,208 parameters)."""
    return _mnasnet(0.75, kwargs)


@register_model()
def mnasnet1_0(*, weights=None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 1.0 (4,383,312 parameters)."""
    return _mnasnet(1.0, kwargs)


@register_model()
def mnasnet1_3(*, weights=None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 1.3 (6,282,256 parameters)."""
    return _mnasnet(1.3, kwargs)
