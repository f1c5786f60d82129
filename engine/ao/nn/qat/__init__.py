"""Quantization-aware-training modules (``torch.ao.nn.qat``): float layers whose weight passes through a fake
quantizer (``weight_fake_quant``, made from ``qconfig.weight``) on every forward."""
from __future__ import annotations

from ....nn import functional as F
from ....nn.modules.conv import Conv1d as _Conv1d, Conv2d as _Conv2d, Conv3d as _Conv3d
from ....nn.modules.container import Sequential
from ....nn.modules.linear import Linear as _Linear
from ....core.tensor import Tensor

__all__ = ["Linear", "Conv1d", "Conv2d", "Conv3d"]


def _float_module(mod, cls) -> object:
    """``mod``'s float layer (the first of a fused module, a Sequential), checked as ``from_float`` checks it."""
    if type(mod) is not cls._FLOAT_MODULE:
        raise AssertionError(f" qat.{cls.__name__}.from_float only works for {cls._FLOAT_MODULE.__name__}")
    if not hasattr(mod, "qconfig"):
        raise AssertionError("Input float module must have qconfig defined")
    if not mod.qconfig:
        raise AssertionError("Input float module must have a valid qconfig")
    return mod[0] if isinstance(mod, Sequential) else mod


def _attach(module, qconfig, factory_kwargs: dict) -> None:
    if not qconfig:
        raise AssertionError("qconfig must be provided for QAT module")
    module.qconfig = qconfig
    module.weight_fake_quant = qconfig.weight(factory_kwargs=factory_kwargs)


class Linear(_Linear):
    """A Linear layer whose weight is fake-quantized on every forward."""

    _FLOAT_MODULE = _Linear

    def __init__(self, in_features: int, out_features: int, bias: bool = True, qconfig=None, device=None,
                 dtype=None) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        _attach(self, qconfig, {"device": device, "dtype": dtype})

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False):
        """The QAT layer sharing ``mod``'s parameters, with ``mod.qconfig``."""
        qconfig = mod.qconfig if hasattr(mod, "qconfig") else None
        linear = _float_module(mod, cls)
        made = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, qconfig=qconfig)
        made.weight, made.bias = linear.weight, linear.bias
        return made

    def to_float(self) -> _Linear:
        linear = _Linear(self.in_features, self.out_features, self.bias is not None)
        linear.weight, linear.bias = self.weight, self.bias
        return linear.train(self.training)


class _QatConv:
    """The QAT side of a convolution: ``weight_fake_quant`` on the weight, ``from_float`` from the float layer."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", qconfig=None, device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, bias=bias, padding_mode=padding_mode, device=device, dtype=dtype)
        _attach(self, qconfig, {"device": device, "dtype": dtype})

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False):
        """The QAT layer sharing ``mod``'s parameters, with ``mod.qconfig``."""
        qconfig = mod.qconfig if hasattr(mod, "qconfig") else None
        conv = _float_module(mod, cls)
        made = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                   dilation=conv.dilation, groups=conv.groups, bias=conv.bias is not None,
                   padding_mode=conv.padding_mode, qconfig=qconfig)
        made.weight, made.bias = conv.weight, conv.bias
        return made

    def to_float(self):
        conv = self._FLOAT_MODULE(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                                  self.dilation, self.groups, self.bias is not None, self.padding_mode)
        conv.weight, conv.bias = self.weight, self.bias
        return conv.train(self.training)


class Conv1d(_QatConv, _Conv1d):
    """A Conv1d whose weight is fake-quantized on every forward."""

    _FLOAT_MODULE = _Conv1d


class Conv2d(_QatConv, _Conv2d):
    """A Conv2d whose weight is fake-quantized on every forward."""

    _FLOAT_MODULE = _Conv2d


class Conv3d(_QatConv, _Conv3d):
    """A Conv3d whose weight is fake-quantized on every forward."""

    _FLOAT_MODULE = _Conv3d
