"""Normalization layers: LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm and CrossMapLRN2d (batch and
instance norms are in ``batchnorm.py`` and ``instancenorm.py``, as in PyTorch)."""
from __future__ import annotations

import numbers
import numpy as np

from ...autograd.function import Function
from ...core import creation
from ...core.tensor import Tensor
from .. import functional as F, init
from ..parameter import Parameter
from .batchnorm import _affine
from .module import Module

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm", "CrossMapLRN2d"]


class LayerNorm(Module):
    """Normalises over the trailing ``normalized_shape`` dims of each sample."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
            tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        _affine(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalises each group of channels of each sample."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine(self, (num_channels,), affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """``x / sqrt(mean(x²) + eps) * weight`` over the trailing ``normalized_shape`` dims."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            from .. import init
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def _channel_mix(window: np.ndarray, x: Tensor) -> Tensor:
    """``sum_c' window[c, c'] * x[:, c']`` for every channel ``c`` of an ``(N, C, H, W)`` tensor."""
    mix = creation.tensor(window, dtype=x.dtype, device=x.device)
    return mix.matmul(x.movedim(1, -1).unsqueeze(-1)).squeeze(-1).movedim(-1, 1)


class _CrossMapLRN(Function):
    """Lua Torch's cross-map LRN, kept as PyTorch keeps it: the forward's running window never drops
    channel 0 and reaches ``(size - 1) // 2`` channels ahead, and the hand-written backward sums a
    different window; both are reproduced so values and gradients match PyTorch's."""

    @staticmethod
    def forward(ctx, input, size, alpha, beta, k):
        c = input.shape[1]
        ahead = (size - 1) // 2 + 1
        window = np.zeros((c, c))
        for i in range(c):
            window[i, 0 if i <= ahead else i - ahead + 1:min(i + ahead, c)] = 1.0
            window[i, 0] = 1.0
        scale = _channel_mix(window, input * input) * (alpha / size) + k
        out = input * scale.pow(-beta)
        ctx.save_for_backward(input, out, scale)
        ctx.params = (size, alpha, beta)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, out, scale = ctx.saved_tensors
        size, alpha, beta = ctx.params
        c = input.shape[1]
        shift = size - (size - 1) // 2
        back = np.zeros((c, c))
        for i in range(c):
            back[i, max(0, i - shift):max(0, min(c, i + size - shift))] = 1.0
        ratio = _channel_mix(back, grad_output * out / scale)
        return grad_output * scale.pow(-beta) - input * ratio * (2 * alpha * beta / size), None, None, None, None


class CrossMapLRN2d(Module):
    """Local response normalisation across channels of a 4-d input, in Lua Torch's form (no
    ``LocalResponseNorm`` subclass, as in PyTorch)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    extra_repr = LocalResponseNorm.extra_repr

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        return _CrossMapLRN.apply(input, self.size, self.alpha, self.beta, self.k)
