"""Padding layers: constant, zero, reflection, replication and circular, 1-d to 3-d."""
from __future__ import annotations

from ...core.tensor import Tensor
from .. import functional as F
from .module import Module


__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ReflectionPad1d",
           "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "ReflectionPad3d", "ReplicationPad3d",
           "ZeroPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


def _pad_tuple(padding, n: int) -> tuple:
    return tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * n


class _PadNd(Module):
    _mode, _n = "constant", 2

    def __init__(self, padding):
        super().__init__()
        self.padding = _pad_tuple(padding, self._n)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ReflectionPadNd(_PadNd):
    """(The per-mode bases are PyTorch's: profilers such as thop map ``_ReflectionPadNd`` and its kin,
    and libraries test ``isinstance`` against them.)"""
    _mode = "reflect"


class _ReplicationPadNd(_PadNd):
    _mode = "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"


class _ZeroPad:
    """Mixed in before a ConstantPadNd: a pad of 0.0 whose repr shows only the padding, as PyTorch's."""
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ConstantPad1d(_ConstantPadNd):
    _n = 2


class ConstantPad2d(_ConstantPadNd):
    _n = 4


class ConstantPad3d(_ConstantPadNd):
    _n = 6


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    pass


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    pass


class ReflectionPad1d(_ReflectionPadNd):
    _n = 2


class ReflectionPad2d(_ReflectionPadNd):
    _n = 4


class ReplicationPad1d(_ReplicationPadNd):
    _n = 2


class ReplicationPad2d(_ReplicationPadNd):
    _n = 4


class ReflectionPad3d(_ReflectionPadNd):
    _n = 6


class ReplicationPad3d(_ReplicationPadNd):
    _n = 6


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    pass


class CircularPad1d(_CircularPadNd):
    _n = 2


class CircularPad2d(_CircularPadNd):
    _n = 4


class CircularPad3d(_CircularPadNd):
    _n = 6
