"""The nn.functional names PyTorch also exposes as ``torch.<name>`` and as Tensor methods."""
from __future__ import annotations

import sys

from .base.dispatch_state import STATE as _DISPATCH
from .core.overrides import handle_torch_function, has_tensor_like
from .nn import functional as F
from .ops import install_methods
from .ops._util import dim_or_axis
from .core.tensor import Tensor

__all__ = ["softmax", "log_softmax", "dropout", "conv1d", "conv2d", "conv_transpose2d", "layer_norm",
           "group_norm", "batch_norm", "embedding", "cosine_similarity", "max_pool1d", "max_pool2d",
           "avg_pool1d", "hardshrink", "prelu"]

conv1d, conv2d, conv_transpose2d = F.conv1d, F.conv2d, F.conv_transpose2d

# torch.<name> is ATen's signature, not nn.functional's: embedding takes the weight first, batch_norm the
# affine parameters before the running statistics, and the norms a trailing cudnn flag
def embedding(weight: Tensor, input: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((weight, input)):
        return handle_torch_function(embedding, (weight, input), weight, input, padding_idx, scale_grad_by_freq, sparse)
    return F.embedding(input, weight, None if padding_idx == -1 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def batch_norm(input: Tensor, weight, bias, running_mean, running_var, training: bool, momentum: float,
               eps: float, cudnn_enabled: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, running_mean, running_var)):
        return handle_torch_function(batch_norm, (input, weight, bias, running_mean, running_var), input, weight,
                                     bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(input: Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias)):
        return handle_torch_function(layer_norm, (input, weight, bias), input, normalized_shape, weight, bias, eps,
                                     cudnn_enable)
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias)):
        return handle_torch_function(group_norm, (input, weight, bias), input, num_groups, weight, bias, eps,
                                     cudnn_enabled)
    return F.group_norm(input, num_groups, weight, bias, eps)


cosine_similarity, max_pool1d, max_pool2d, avg_pool1d = F.cosine_similarity, F.max_pool1d, F.max_pool2d, F.avg_pool1d


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    return F.hardshrink(input, lambd)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    return F.prelu(input, weight)


def softmax(input: Tensor, dim: int | None = None, dtype=None, *, axis=None) -> Tensor:
    return F.softmax(input, dim_or_axis("softmax", dim, axis), dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None, *, axis=None) -> Tensor:
    return F.log_softmax(input, dim_or_axis("log_softmax", dim, axis), dtype=dtype)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(dropout, (input,), input, p, train)
    return F.dropout(input, p, train)


# Tensor methods, bound like the op families' (this module declares no ops of its own)
METHODS = ("softmax", "log_softmax", "hardshrink", "prelu")
install_methods(Tensor, (sys.modules[__name__],), ops=())
