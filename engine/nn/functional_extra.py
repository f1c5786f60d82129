"""More of ``torch.nn.functional``: channel and alpha dropout, adaptive max pooling, instance and RMS
norm, more activations, pixel shuffling, distances and margin/likelihood losses.

Composites over Tensor ops, built on ``functional_core`` (``functional`` re-exports everything here).
"""
from __future__ import annotations

import math
import warnings

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..core import creation
from ..core.dispatch import composite
from ..base.dtype import bfloat16, finfo, float16, int64
from ..base.grad_mode import no_grad
from ..ops.movement import cat
from ..core.tensor import Tensor
from . import _pool_checks
from .functional_core import (_batched, _channel_affine, _empty_pooled, _inplace, _mixed_norm, _normalize_over,
                              _not_differentiable, _check_reduction, _reduce, _reduction, _unbatch, _with_running_stats, interpolate, logsigmoid)

__all__ = [
    "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "instance_norm", "rms_norm",
    "prelu", "selu", "selu_", "celu", "celu_", "glu", "tanhshrink", "threshold", "threshold_", "softshrink", "hardshrink",
    "pixel_shuffle", "pixel_unshuffle", "upsample", "pairwise_distance",
    "triplet_margin_loss", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "gaussian_nll_loss", "poisson_nll_loss",
]


# ---------------------------------------------------------------- dropout variants
def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _noisy_dropout(input: Tensor, p: float, training: bool, inplace: bool, feature: bool, alpha: bool) -> Tensor:
    """PyTorch's ``_dropout_impl``: a Bernoulli(1-p) mask per element (or per channel when ``feature``),
    scaled by 1/(1-p); the alpha variant keeps SELU's mean and variance instead."""
    if p == 0.0 or not training or input.numel() == 0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        shape = (tuple(input.shape[:2]) + (1,) * (input.ndim - 2)) if feature else tuple(input.shape)
        noise = creation.bernoulli(creation.zeros(shape, dtype=input.dtype, device=input.device), 1.0 - p)
        if alpha:
            a_ = 1.7580993408473766
            a = 1.0 / math.sqrt((a_ * a_ * p + 1) * (1 - p))
            out = input * (noise * a) + ((noise - 1) * (a_ * a) + a_ * a * p)
        else:
            out = input * (noise * (1.0 / (1.0 - p)))
    return input.copy_(out) if inplace else out


def _deprecated_rank(name: str, rank: int, spatial: str, wanted: str) -> None:
    warnings.warn(f"{name}: Received a {rank}-D input to {name}, which is deprecated and will result in an error "
                  "in a future release. To retain the behavior and silence this warning, please use dropout "
                  f"instead. Note that {name} exists to provide channel-wise dropout on inputs with {spatial} "
                  f"spatial dimensions, a channel dimension, and an optional batch dimension (i.e. {wanted} "
                  "inputs).", stacklevel=3)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` (or ``(C, L)``) with probability ``p``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(dropout1d, (input,), input, p=p, training=training, inplace=inplace)
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, "
                           "a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.ndim == 2 and training and p > 0:
        out = _noisy_dropout(input.unsqueeze(0), p, training, False, True, False).squeeze(0)
        return input.copy_(out) if inplace and out is not input else out
    return _noisy_dropout(input, p, training, inplace, True, False)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)``; a 3-D input is read as ``(N, C, L)``, as PyTorch does."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(dropout2d, (input,), input, p=p, training=training, inplace=inplace)
    _check_p(p)
    if input.ndim not in (3, 4):
        _deprecated_rank("dropout2d", input.ndim, "2", "3D or 4D")
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
                      "dim. This behavior will change in a future release to interpret the input as one "
                      "without a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout "
                      "behavior, please switch to using dropout1d instead.", stacklevel=2)
    return _noisy_dropout(input, p, training, inplace, True, False)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(dropout3d, (input,), input, p=p, training=training, inplace=inplace)
    _check_p(p)
    if input.ndim not in (4, 5):
        _deprecated_rank("dropout3d", input.ndim, "3", "4D or 5D")
    if input.ndim == 4 and training and p > 0:
        out = _noisy_dropout(input.unsqueeze(0), p, training, False, True, False).squeeze(0)
        return input.copy_(out) if inplace and out is not input else out
    return _noisy_dropout(input, p, training, inplace, True, False)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(alpha_dropout, (input,), input, p=p, training=training, inplace=inplace)
    _check_p(p)
    return _noisy_dropout(input, p, training, inplace, False, True)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(feature_alpha_dropout, (input,), input, p=p, training=training, inplace=inplace)
    _check_p(p)
    return _noisy_dropout(input, p, training, inplace, True, True)


# ---------------------------------------------------------------- adaptive max pooling
def _adaptive_max_along(x: Tensor, n_out: int, dim: int) -> tuple[Tensor, Tensor]:
    """Max over PyTorch's adaptive windows ``[floor(i*n/o), ceil((i+1)*n/o))`` of one dim; also the
    absolute position of each max (the first one, as PyTorch picks)."""
    n_in = x.shape[dim]
    values, indices = [], []
    for i in range(n_out):
        lo, hi = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        v, j = x.narrow(dim, lo, hi - lo).max(dim, keepdim=True)
        values.append(v)
        indices.append(j + lo)
    return cat(values, dim), cat(indices, dim)


def _adaptive_max_empty(x: Tensor, out: tuple, squeeze: bool, return_indices: bool):
    """``adaptive_max_pool`` to a zero-size output dim: empty values (in the graph) and indices."""
    values = _unbatch(_empty_pooled(x, out), squeeze)
    if not return_indices:
        return values
    return values, _unbatch(creation.zeros(tuple(x.shape[:2]) + tuple(out), dtype=int64, device=x.device), squeeze)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_max_pool1d, (input, output_size), input, output_size,
                                     return_indices=return_indices)
    (out_l,) = _pool_checks.adaptive_max_output(input.shape, output_size, 1)
    x, squeeze = _batched(input, 1, "adaptive_max_pool1d")
    if out_l == 0:
        return _adaptive_max_empty(x, (0,), squeeze, return_indices)
    values, idx = _adaptive_max_along(x, out_l, -1)
    values, idx = _unbatch(values, squeeze), _unbatch(idx, squeeze)
    return (values, idx) if return_indices else values


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Separable: the max over each column window, then over each row window of those; indices are
    flat ``h * W + w`` into each input plane, as PyTorch returns them."""
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_max_pool2d, (input, output_size), input, output_size,
                                     return_indices=return_indices)
    out_h, out_w = _pool_checks.adaptive_max_output(input.shape, output_size, 2)
    x, squeeze = _batched(input, 2, "adaptive_max_pool2d")
    if 0 in (out_h, out_w):
        return _adaptive_max_empty(x, (out_h, out_w), squeeze, return_indices)
    cols_v, cols_i = _adaptive_max_along(x, out_w, -1)            # (N, C, H, out_w)
    values, rows = _adaptive_max_along(cols_v, out_h, -2)         # (N, C, out_h, out_w)
    values = _unbatch(values, squeeze)
    if not return_indices:
        return values
    idx = rows * x.shape[-1] + cols_i.gather(-2, rows)
    return values, _unbatch(idx, squeeze)


# ---------------------------------------------------------------- instance and RMS norm
def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each (sample, channel) plane; running stats average the per-sample statistics."""
    if _DISPATCH.functions is not None and has_tensor_like((input, running_mean, running_var, weight, bias)):
        return handle_torch_function(instance_norm, (input, running_mean, running_var, weight, bias), input,
                                     running_mean=running_mean, running_var=running_var, weight=weight, bias=bias,
                                     use_input_stats=use_input_stats, momentum=momentum, eps=eps)
    if _mixed_norm(input, weight, bias, running_mean, running_var):
        return instance_norm(input.float(), running_mean, running_var, weight, bias, use_input_stats, momentum,
                             eps).to(input.dtype)
    dims = tuple(range(2, input.ndim))
    if use_input_stats:
        count = 1
        for n in input.shape[2:]:
            count *= n
        if count <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
        out, mean, var = _normalize_over(input, dims, eps)
        if running_mean is not None:
            n, c = input.shape[:2]
            with no_grad():
                running_mean.mul_(1 - momentum).add_(mean.reshape(n, c).mean(0) * momentum)
        if running_var is not None:
            n, c = input.shape[:2]
            with no_grad():
                running_var.mul_(1 - momentum).add_(var.reshape(n, c).mean(0) * (momentum * count / (count - 1)))
    else:
        out = _with_running_stats(input, running_mean, running_var, eps)
    return _channel_affine(out, weight, bias)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """``x / sqrt(mean(x²) + eps) * weight`` over the trailing ``normalized_shape`` dims."""
    if _DISPATCH.functions is not None and has_tensor_like((input, normalized_shape, weight)):
        return handle_torch_function(rms_norm, (input, normalized_shape, weight), input, normalized_shape,
                                     weight=weight, eps=eps)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*"
                           f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if input.dtype in (bfloat16, float16):   # ATen's opmath: float32 throughout (its eps too), rounded once
        return rms_norm(input.float(), shape, None if weight is None else weight.float(), eps).to(input.dtype)
    if eps is None:
        eps = finfo(input.dtype).eps
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


# ---------------------------------------------------------------- activations
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where positive, ``weight * x`` elsewhere; one weight, or one per channel (dim 1)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, weight)):
        return handle_torch_function(prelu, (input, weight), input, weight)
    if weight.numel() != 1:
        channels = input.shape[1] if input.ndim >= 2 else 1
        if weight.numel() != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers "
                               f"= {weight.numel()} and channel size = {channels}.")
        w = weight.reshape((-1,) + (1,) * (input.ndim - 2)) if input.ndim >= 2 else weight
    else:
        w = weight.reshape(())
    return composite("prelu", lambda x, w: x.where(x > 0, w * x), input, w)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(selu, (input,), input, inplace=inplace)
    return _inplace(input, lambda x: x.where(x > 0, x.expm1() * _SELU_ALPHA) * _SELU_SCALE, inplace)


def selu_(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(selu_, (input,), input)
    return selu(input, True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(celu, (input,), input, alpha=alpha, inplace=inplace)
    return _inplace(input, lambda x: x.where(x > 0, (x * (1.0 / alpha)).expm1() * alpha), inplace)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(celu_, (input,), input, alpha=alpha)
    return celu(input, alpha, True)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """First half times the sigmoid of the second half along ``dim``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(glu, (input,), input, dim=dim)
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.ndim
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()


def tanhshrink(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(tanhshrink, (input,), input)
    return input - input.tanh()


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where ``x <= threshold``, else ``x`` (ATen's form: a NaN passes)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(_THRESHOLD, (input,), input, threshold, value, inplace=inplace)
    return _inplace(input, lambda x: x.masked_fill(x <= threshold, value), inplace)


_THRESHOLD = threshold   # the name its guard records it by: the parameter ``threshold`` shadows the function


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(threshold_, (input,), input, threshold, value)
    return _inplace(input, lambda x: x.masked_fill(x <= threshold, value), True)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(softshrink, (input,), input, lambd=lambd)
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    zero = input * 0
    return (input - lambd).where(input > lambd, (input + lambd).where(input < -lambd, zero))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(hardshrink, (input,), input, lambd=lambd)
    return input.where((input > lambd) | (input < -lambd), input * 0)


# ---------------------------------------------------------------- shape helpers
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C r², H, W)`` -> ``(*, C, H r, W r)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(pixel_shuffle, (input,), input, upscale_factor)
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c, h, w = input.shape[-3:]
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    lead = tuple(input.shape[:-3])
    n = len(lead)
    x = input.reshape(lead + (c // (r * r), r, r, h, w))
    x = x.permute(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return x.reshape(lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H r, W r)`` -> ``(*, C r², H, W)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(pixel_unshuffle, (input,), input, downscale_factor)
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    c, h, w = input.shape[-3:]
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    lead = tuple(input.shape[:-3])
    n = len(lead)
    x = input.reshape(lead + (c, h // r, r, w // r, r))
    x = x.permute(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return x.reshape(lead + (c * r * r, h // r, w // r))


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, size, scale_factor, align_corners)):
        return handle_torch_function(upsample, (input, size, scale_factor, align_corners), input, size=size,
                                     scale_factor=scale_factor, mode=mode, align_corners=align_corners)
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---------------------------------------------------------------- distances and losses
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``‖x1 - x2 + eps‖_p`` over the last dim."""
    if _DISPATCH.functions is not None and has_tensor_like((x1, x2)):
        return handle_torch_function(pairwise_distance, (x1, x2), x1, x2, p=p, eps=eps, keepdim=keepdim)
    return (x1 - x2 + eps).norm(p, -1, keepdim=keepdim)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((anchor, positive, negative, size_average, reduce)):
        return handle_torch_function(triplet_margin_loss, (anchor, positive, negative, size_average, reduce), anchor,
                                     positive, negative, margin=margin, p=p, eps=eps, swap=swap,
                                     size_average=size_average, reduce=reduce, reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    a, po, ne = anchor.ndim, positive.ndim, negative.ndim
    if not a == po == ne:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {po}D, and negative {ne}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp_min(0), reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input1, input2, target, size_average, reduce)):
        return handle_torch_function(margin_ranking_loss, (input1, input2, target, size_average, reduce), input1,
                                     input2, target, margin=margin, size_average=size_average, reduce=reduce,
                                     reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where target is 1, ``max(0, margin - x)`` where it is -1."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce)):
        return handle_torch_function(hinge_embedding_loss, (input, target, size_average, reduce), input, target,
                                     margin=margin, size_average=size_average, reduce=reduce, reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    zeros = input * 0
    loss = (margin - input).clamp_min(0).where(target != 1, zeros) + input.where(target != -1, zeros)
    return _reduce(loss, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce)):
        return handle_torch_function(soft_margin_loss, (input, target, size_average, reduce), input, target,
                                     size_average=size_average, reduce=reduce, reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    _not_differentiable("soft_margin_loss", target=target)   # ATen's kernel has no target gradient
    return _reduce((-input * target).exp().log1p(), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """Per-class binary cross-entropy on logits, averaged over the classes (last dim)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight, size_average, reduce)):
        return handle_torch_function(multilabel_soft_margin_loss, (input, target, weight, size_average, reduce),
                                     input, target, weight=weight, size_average=size_average, reduce=reduce,
                                     reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.ndim - 1) / input.shape[input.ndim - 1]
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """``0.5 (log var + (input - target)² / var)``; var is clamped at eps without stopping its gradient."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, var)):
        return handle_torch_function(gaussian_nll_loss, (input, target, var), input, target, var, full=full, eps=eps,
                                     reduction=reduction)
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = creation.ones_like(input) * var
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """``exp(input) - target * input`` (log_input), else ``input - target * log(input + eps)``; ``full``
    adds Stirling's approximation of ``log(target!)`` where target > 1."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce)):
        return handle_torch_function(poisson_nll_loss, (input, target, size_average, reduce), input, target,
                                     log_input=log_input, full=full, size_average=size_average, eps=eps,
                                     reduce=reduce, reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (target * (2 * math.pi)).log()
        loss = loss + stirling.where(target > 1, 0.0)
    return _reduce(loss, reduction)
