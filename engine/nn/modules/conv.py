"""Convolution layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d and their lazy forms."""
from __future__ import annotations

import math
import warnings

from ...core import creation
from ...core.tensor import Tensor
from .. import functional as F, init
from ..parameter import Parameter, UninitializedParameter
from .lazy import LazyModuleMixin
from .linear import _uniform_bias
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    """Shared parameters, initialisation and repr of the convolution layers."""

    _nd = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation, transposed: bool,
                 output_padding, groups: int, bias: bool, padding_mode: str, device=None, dtype=None):
        """PyTorch's signature (quantization and deformable-conv libraries subclass this class and call it so);
        the number of spatial dims is the class's, or the length of a tuple ``kernel_size``."""
        super().__init__()
        if isinstance(kernel_size, tuple) and len(kernel_size) != self._nd:
            self._nd = len(kernel_size)
        nd = self._nd
        self.transposed = transposed
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, nd)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _tuple(kernel_size, nd), _tuple(stride, nd)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, nd)
        self.dilation, self.output_padding = _tuple(dilation, nd), _tuple(output_padding, nd)
        self.groups, self.padding_mode = groups, padding_mode
        self._reversed_padding_repeated_twice = self._pads_for_mode()
        shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(creation.empty(shape + self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _pads_for_mode(self) -> list:
        """``F.pad``'s amounts (last dim first) that a non-zeros ``padding_mode`` applies before the
        convolution, as PyTorch's attribute of this name: 'same' puts the odd extra element on the right."""
        if not isinstance(self.padding, str):
            return [p for q in reversed(self.padding) for p in (q, q)]
        if self.padding == "valid":
            return [0, 0] * len(self.kernel_size)
        totals = [d * (k - 1) for d, k in zip(reversed(self.dilation), reversed(self.kernel_size))]
        return [p for t in totals for p in (t // 2, t - t // 2)]

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            _uniform_bias(self.bias, init._calculate_fan_in_and_fan_out(self.weight)[0])

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """The convolution with this layer's geometry and padding mode on a given weight and bias (PyTorch's
        hook for subclasses that transform the weight: QAT's fake-quantized weight, weight standardisation)."""
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._nd - 1]
        if self.padding_mode == "zeros":
            return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        return conv(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), weight,
                    bias, self.stride, 0, self.dilation, self.groups)


class Conv1d(_Conv):
    _nd = 1


class Conv2d(_Conv):
    _nd = 2


class Conv3d(_Conv):
    _nd = 3


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed, output_padding,
                 groups, bias, padding_mode, device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """The output_padding that makes the result ``output_size`` (PyTorch's ``output_size=`` form)."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        want = tuple(output_size)[-nd:]
        base = tuple((n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in
                     zip(input.shape[-nd:], self.stride, self.padding, self.dilation, self.kernel_size))
        extra = tuple(w - b for w, b in zip(want, base))
        if any(e < 0 or e >= max(s, d) for e, s, d in zip(extra, self.stride, self.dilation)):
            raise ValueError(f"requested an output size of {list(want)}, but valid sizes range from "
                             f"{list(base)} to {[b + max(s, d) - 1 for b, s, d in zip(base, self.stride, self.dilation)]} "
                             f"(for an input of {list(input.shape[-nd:])})")
        return extra

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        conv = (F.conv_transpose1d, F.conv_transpose2d)[self._nd - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)


class _ConvTransposeMixin(_ConvTransposeNd):
    """PyTorch's deprecated internal base, which OpenMMLab's mmengine imports (``parrots_wrapper``)."""

    def __init__(self, *args, **kwargs) -> None:
        warnings.warn("`_ConvTransposeMixin` is a deprecated internal class. Please consider using public APIs.",
                      FutureWarning, stacklevel=2)
        super().__init__(*args, **kwargs)


class _ConvTranspose(_ConvTransposeNd):
    """The public transposed layers' signature."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)


class ConvTranspose1d(_ConvTranspose):
    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    _nd = 3

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class _LazyConvMixin(LazyModuleMixin):
    """``in_channels`` from dim 1 of a batched first input (dim 0 of an unbatched one). The eager
    constructor runs with ``in_channels=0``, as PyTorch's, so its ``reset_parameters`` draws no random
    numbers (a seeded program's later draws match PyTorch's); the weights then become placeholders."""

    def _lazy_weights(self, bias: bool, device, dtype) -> None:
        self.in_channels = 0
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        self._lazy_init()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        self.in_channels = input.shape[1] if input.ndim == self._nd + 2 else input.shape[0]
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups)
        else:
            shape = (self.out_channels, self.in_channels // self.groups)
        self._materialize_all({"weight": shape + tuple(self.kernel_size), "bias": (self.out_channels,)})


class _LazyConv(_LazyConvMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)
        self._lazy_weights(bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
                         padding_mode, device, dtype)
        self._lazy_weights(bias, device, dtype)


def _lazy_conv(name: str, eager: type, doc: str) -> type:
    mixin = _LazyConvTranspose if eager.transposed else _LazyConv
    return type(name, (mixin, eager), {"cls_to_become": eager, "__doc__": doc, "__module__": __name__})


LazyConv1d = _lazy_conv("LazyConv1d", Conv1d, "``Conv1d`` whose ``in_channels`` comes from the first input.")


LazyConv2d = _lazy_conv("LazyConv2d", Conv2d, "``Conv2d`` whose ``in_channels`` comes from the first input.")


LazyConv3d = _lazy_conv("LazyConv3d", Conv3d, "``Conv3d`` whose ``in_channels`` comes from the first input.")


LazyConvTranspose1d = _lazy_conv("LazyConvTranspose1d", ConvTranspose1d,
                                 "``ConvTranspose1d`` whose ``in_channels`` comes from the first input.")


LazyConvTranspose2d = _lazy_conv("LazyConvTranspose2d", ConvTranspose2d,
                                 "``ConvTranspose2d`` whose ``in_channels`` comes from the first input.")


LazyConvTranspose3d = _lazy_conv("LazyConvTranspose3d", ConvTranspose3d,
                                 "``ConvTranspose3d`` whose ``in_channels`` comes from the first input.")
