"""Fused quantization-aware-training modules (``torch.ao.nn.intrinsic.qat``): a QAT layer and the ReLU after it
as one module (the ReLU applied in forward, so the output observer sees the activation)."""
from __future__ import annotations

from .....nn import functional as F
from .....core.tensor import Tensor
from ... import intrinsic as nni
from ...qat import Conv1d, Conv2d, Conv3d, Linear

__all__ = ["LinearReLU", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "freeze_bn_stats", "update_bn_stats"]


class LinearReLU(Linear):
    """QAT Linear followed by ReLU (from a fused ``intrinsic.LinearReLU``)."""

    _FLOAT_MODULE = nni.LinearReLU

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(super().forward(input))


class _ReLUAfter:
    def forward(self, input: Tensor) -> Tensor:
        return F.relu(super().forward(input))


class ConvReLU1d(_ReLUAfter, Conv1d):
    """QAT Conv1d followed by ReLU (from a fused ``intrinsic.ConvReLU1d``)."""

    _FLOAT_MODULE = nni.ConvReLU1d


class ConvReLU2d(_ReLUAfter, Conv2d):
    """QAT Conv2d followed by ReLU (from a fused ``intrinsic.ConvReLU2d``)."""

    _FLOAT_MODULE = nni.ConvReLU2d


class ConvReLU3d(_ReLUAfter, Conv3d):
    """QAT Conv3d followed by ReLU (from a fused ``intrinsic.ConvReLU3d``)."""

    _FLOAT_MODULE = nni.ConvReLU3d


def freeze_bn_stats(mod) -> None:
    """For ``model.apply``: stop a fused conv-bn QAT module updating its batch statistics."""
    if hasattr(mod, "freeze_bn_stats"):
        mod.freeze_bn_stats()


def update_bn_stats(mod) -> None:
    """For ``model.apply``: let a fused conv-bn QAT module update its batch statistics again."""
    if hasattr(mod, "update_bn_stats"):
        mod.update_bn_stats()
