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
layer_norm, group_norm, batch_norm, embedding = F.layer_norm, F.group_norm, F.batch_norm, F.embedding
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
