"""Lazy layers: the input size is read from the first input, then the layer becomes its eager class.

``UninitializedParameter`` / ``UninitializedBuffer`` (in ``nn.parameter``) hold no values until
``materialize(shape)`` turns them, in place, into a ``Parameter`` / plain ``Tensor``; a lazy layer materialises its
tensors in a forward pre-hook, re-runs ``reset_parameters`` and takes ``cls_to_become``'s class,
as PyTorch's ``LazyModuleMixin`` does.
"""
from __future__ import annotations

from ...core import creation
from ...core.tensor import Tensor
from ..parameter import UninitializedBuffer, UninitializedParameter, _Uninitialized
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from .extra_layers import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .linear import Linear
from .more_layers import ConvTranspose3d
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]


def _uninitialized(t) -> bool:
    return isinstance(t, _Uninitialized)


class LazyModuleMixin:
    """Materialise the uninitialised tensors from the first input, then become ``cls_to_become``."""

    cls_to_become: type | None = None

    def _lazy_init(self) -> None:
        self._lazy_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self) -> bool:
        return any(_uninitialized(t) for t in list(self._parameters.values()) + list(self._buffers.values()))

    def initialize_parameters(self, input: Tensor) -> None:
        raise NotImplementedError

    def _materialize_all(self, shapes: dict) -> None:
        for name, shape in shapes.items():
            t = getattr(self, name)
            if _uninitialized(t):
                t.materialize(shape)
        self.reset_parameters()


def _infer_parameters(module, args):
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
    module._lazy_hook.remove()
    del module._lazy_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` whose ``in_features`` is the last dim of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self._lazy_init()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self._materialize_all({"weight": (self.out_features, self.in_features), "bias": (self.out_features,)})


class _LazyConvMixin(LazyModuleMixin):
    """``in_channels`` from dim 1 of a batched first input (dim 0 of an unbatched one). The eager
    constructor runs with ``in_channels=groups`` (always valid); the weights then become placeholders."""

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
        super().__init__(groups, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)
        self._lazy_weights(bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(groups, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
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


class _LazyNormMixin(LazyModuleMixin):
    """``num_features`` from the channel dim of the first input."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None):
        super().__init__(0, eps, momentum, affine, track_running_stats, device, dtype)
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
        self._lazy_init()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[self._feature_dim(input)]
        n = (self.num_features,)
        self._materialize_all({"weight": n, "bias": n, "running_mean": n, "running_var": n})


class _LazyBatchNorm(_LazyNormMixin):
    @staticmethod
    def _feature_dim(input: Tensor) -> int:
        return 1


class _LazyInstanceNorm(_LazyNormMixin):
    """(PyTorch's lazy instance norms default to ``affine=True, track_running_stats=True``.)"""

    def _feature_dim(self, input: Tensor) -> int:
        return input.ndim - self._no_batch_dim


def _lazy_norm(name: str, mixin: type, eager: type) -> type:
    doc = f"``{eager.__name__}`` whose ``num_features`` comes from the first input."
    return type(name, (mixin, eager), {"cls_to_become": eager, "__doc__": doc, "__module__": __name__})


LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", _LazyBatchNorm, BatchNorm1d)
LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", _LazyBatchNorm, BatchNorm2d)
LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", _LazyBatchNorm, BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", _LazyInstanceNorm, InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", _LazyInstanceNorm, InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", _LazyInstanceNorm, InstanceNorm3d)
