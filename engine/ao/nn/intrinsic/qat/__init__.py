"""Fused quantization-aware-training modules (``torch.ao.nn.intrinsic.qat``): a QAT layer and the ReLU after it
as one module (the ReLU applied in forward, so the output observer sees the activation)."""
from __future__ import annotations

import math

from .....core.creation import empty, zeros, zeros_like
from .....core.tensor import Tensor
from .....nn import functional as F, init
from .....nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .....nn.modules.conv import Conv1d as _Conv1d, Conv2d as _Conv2d, Conv3d as _Conv3d
from .....nn.parameter import Parameter
from .. import modules as nni
from ...qat import Conv1d, Conv2d, Conv3d, Linear

__all__ = ["LinearReLU", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "ConvBn1d", "ConvBn2d", "ConvBn3d",
           "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d", "freeze_bn_stats", "update_bn_stats"]


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


class _ConvBn:
    """A convolution with its batch norm folded in for QAT: the weight is scaled by ``bn.weight / running_std``
    and fake-quantized, the convolution's output scaled back and normalized by ``bn`` (PyTorch's approximate
    path), so training sees the quantization of the weight inference will use."""

    _BN: type = BatchNorm2d
    _RELU = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=None, padding_mode="zeros", eps=1e-05, momentum=0.1, freeze_bn=False, qconfig=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, bias=False, padding_mode=padding_mode)
        if not qconfig:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = self._BN(out_channels, eps, momentum, True, True)
        self.weight_fake_quant = qconfig.weight()
        if bias:
            self.bias = Parameter(empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_bn_parameters()
        if self.training and not freeze_bn:
            self.update_bn_stats()
        else:
            self.freeze_bn_stats()

    def reset_running_stats(self) -> None:
        self.bn.reset_running_stats()

    def reset_bn_parameters(self) -> None:
        self.bn.reset_running_stats()
        init.uniform_(self.bn.weight)
        init.zeros_(self.bn.bias)
        if self.bias is not None:
            bound = 1 / math.sqrt(init._calculate_fan_in_and_fan_out(self.weight)[0])
            init.uniform_(self.bias, -bound, bound)

    def update_bn_stats(self):
        self.freeze_bn = False
        self.bn.training = True
        return self

    def freeze_bn_stats(self):
        self.freeze_bn = True
        self.bn.training = False
        return self

    def forward(self, input: Tensor) -> Tensor:
        bn = self.bn
        scale_factor = bn.weight / (bn.running_var + bn.eps).sqrt()
        weight_shape = [-1] + [1] * (self.weight.dim() - 1)
        bias_shape = [1, -1] + [1] * (self.weight.dim() - 2)
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(weight_shape))
        zero_bias = (zeros_like(self.bias, dtype=input.dtype) if self.bias is not None
                     else zeros(self.out_channels, dtype=input.dtype))
        out = self._conv_forward(input, scaled_weight, zero_bias) / scale_factor.reshape(bias_shape)
        if self.bias is not None:
            out = out + self.bias.reshape(bias_shape)
        out = bn(out)
        return F.relu(out) if self._RELU else out

    def train(self, mode: bool = True):
        self.training = mode
        if not self.freeze_bn:
            for module in self.children():
                module.train(mode)
        return self

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False):
        """The QAT module sharing the fused float module's conv and bn parameters and statistics."""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for {cls._FLOAT_MODULE.__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        if not mod.qconfig:
            raise AssertionError("Input float module must have a valid qconfig")
        conv, bn = mod[0], mod[1]
        made = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                   conv.groups, conv.bias is not None, conv.padding_mode, bn.eps, bn.momentum, False, mod.qconfig)
        made.weight, made.bias = conv.weight, conv.bias
        made.bn.weight, made.bn.bias = bn.weight, bn.bias
        made.bn.running_mean, made.bn.running_var = bn.running_mean, bn.running_var
        made.bn.num_batches_tracked = bn.num_batches_tracked
        return made


def _conv_bn(name: str, conv: type, bn: type, fused: type, relu: bool) -> type:
    doc = f"QAT {conv.__name__} with its {bn.__name__} folded in{' and ReLU after' if relu else ''} (from " \
          f"intrinsic.{fused.__name__})."
    return type(name, (_ConvBn, conv), {"_BN": bn, "_RELU": relu, "_FLOAT_MODULE": fused, "__doc__": doc,
                                       "__module__": __name__})


ConvBn1d = _conv_bn("ConvBn1d", _Conv1d, BatchNorm1d, nni.ConvBn1d, False)
ConvBn2d = _conv_bn("ConvBn2d", _Conv2d, BatchNorm2d, nni.ConvBn2d, False)
ConvBn3d = _conv_bn("ConvBn3d", _Conv3d, BatchNorm3d, nni.ConvBn3d, False)
ConvBnReLU1d = _conv_bn("ConvBnReLU1d", _Conv1d, BatchNorm1d, nni.ConvBnReLU1d, True)
ConvBnReLU2d = _conv_bn("ConvBnReLU2d", _Conv2d, BatchNorm2d, nni.ConvBnReLU2d, True)
ConvBnReLU3d = _conv_bn("ConvBnReLU3d", _Conv3d, BatchNorm3d, nni.ConvBnReLU3d, True)


def freeze_bn_stats(mod) -> None:
    """For ``model.apply``: stop a fused conv-bn QAT module updating its batch statistics."""
    if hasattr(mod, "freeze_bn_stats"):
        mod.freeze_bn_stats()


def update_bn_stats(mod) -> None:
    """For ``model.apply``: let a fused conv-bn QAT module update its batch statistics again."""
    if hasattr(mod, "update_bn_stats"):
        mod.update_bn_stats()
