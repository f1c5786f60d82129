"""The core of ``torch.nn.functional``: linear, convolution, pooling, normalization, dropout,
embedding, resampling, the common activations and losses, and the argument helpers that
``functional_extra`` and ``functional_attention`` build on. ``functional`` re-exports it all.

Everything here is written with Tensor ops, so it runs on every device and shows on the
tape; only convolution, pooling, im2col and embedding are primitives of their own (``_ops``).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..core.overrides import handle_torch_function, has_tensor_like
from ..base import dtype as _dt
from ..core import batching as _batching
from ..core import creation
from ..core.arguments import refuse_non_tensors
from ..core.dispatch import composite
from ..base.grad_mode import is_grad_enabled, no_grad
from ..base.dispatch_state import STATE as _DISPATCH
from ..ops.indexing import one_hot
from ..ops.movement import pad
from ..base.pytype import tp_name
from ..core.tensor import Tensor, _wrap_dim
from . import _fused, _fused_linear, _group_norm, _ops, _pool_checks, _resample, _resize_u8, _robust_losses, _upsample

__all__ = [
    "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "batch_norm", "layer_norm", "group_norm", "dropout", "embedding", "one_hot", "pad", "interpolate",
    "unfold", "fold", "normalize", "cosine_similarity",
    "relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "gelu", "silu", "mish", "softplus", "hardswish",
    "hardsigmoid", "hardtanh", "hardtanh_", "tanh", "sigmoid", "logsigmoid", "softsign", "softmax", "softmin",
    "log_softmax",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "cross_entropy",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
]


# ---------------------------------------------------------------- argument helpers
def _ntuple(v, n: int, name: str = "") -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1 and n > 1:
            return tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"expected {name or 'argument'} to be a single integer value or a list of "
                               f"{n} values to match the convolution dimensions, but got {name}={list(v)}")
        return tuple(int(x) for x in v)
    return (int(v),) * n


def _batched(input: Tensor, nd: int, name: str) -> tuple[Tensor, bool]:
    """Adds the batch dim to unbatched input; says whether to take it away again."""
    if input.ndim == nd + 1:
        try:
            return input.unsqueeze(0), True
        except AttributeError:
            refuse_non_tensors(name, input)
            raise
    if input.ndim != nd + 2:
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, "
                           f"but got input of size: {list(input.shape)}")
    return input, False


def _unbatch(out: Tensor, squeeze: bool) -> Tensor:
    return out.squeeze(0) if squeeze else out


def _channel_view(t: Tensor, ndim: int) -> Tensor:
    """A per-channel vector shaped to broadcast over ``(N, C, *spatial)``."""
    return t.reshape((1, -1) + (1,) * (ndim - 2))


def _check_bias(weight: Tensor, bias: Tensor | None, dim: int, groups: int = 1) -> None:
    """ATen's check of a convolution's bias: one value per output channel (the weight's dim 0, or
    a transposed convolution's dim 1 times the groups)."""
    if bias is None:
        return
    n = weight.shape[dim] * (groups if dim else 1)
    if bias.ndim != 1 or bias.shape[0] != n:
        raise RuntimeError(f"Given {'transposed=1, ' if dim else ''}weight of size {list(weight.shape)}, expected bias "
                           f"to be 1-dimensional with {n} elements, but got bias of size {list(bias.shape)} instead")


# ---------------------------------------------------------------- linear
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias)):
        return handle_torch_function(linear, (input, weight, bias), input, weight, bias=bias)
    if _fused_linear.applies(input, weight, bias):
        return _fused_linear.linear(input, weight, bias)
    out = input.matmul(weight.t())      # a vector weight, a broadcast bias, or PyTorch's mismatch errors
    return out if bias is None else out + bias


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y_k = x1^T W_k x2 + b_k`` as one matmul and a contraction."""
    if _DISPATCH.functions is not None and has_tensor_like((input1, input2, weight, bias)):
        return handle_torch_function(bilinear, (input1, input2, weight, bias), input1, input2, weight, bias=bias)
    out_f, in1, in2 = weight.shape
    left = input1.matmul(weight.permute(1, 0, 2).reshape(in1, out_f * in2))
    out = (left.reshape(tuple(input1.shape[:-1]) + (out_f, in2)) * input2.unsqueeze(-2)).sum(-1)
    return out if bias is None else out + bias


# ---------------------------------------------------------------- convolution
_same_warned: list = []   # the asymmetric 'same' padding warning is given once per process


def _conv_pads(padding, weight: Tensor, stride: tuple, dilation: tuple, nd: int) -> tuple:
    kernel = weight.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding != "same":
            raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
        if any(s != 1 for s in stride):
            raise ValueError("padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        if any(t % 2 for t in total) and not _same_warned:
            _same_warned.append(True)   # ATen's TORCH_WARN_ONCE, at the caller of F.convNd
            warnings.warn("Using padding='same' with even kernel lengths and odd dilation may require a zero-padded "
                          "copy of the input be created", UserWarning, stacklevel=4)
        return tuple((t // 2, t - t // 2) for t in total)
    return tuple((p, p) for p in _ntuple(padding, nd, "padding"))


def _conv(input, weight, bias, stride, padding, dilation, groups, nd: int, name: str) -> Tensor:
    x, squeeze = _batched(input, nd, name)
    stride, dilation = _ntuple(stride, nd, "stride"), _ntuple(dilation, nd, "dilation")
    pads = _conv_pads(padding, weight, stride, dilation, nd)
    if weight.ndim != nd + 2:
        raise RuntimeError(f"weight should have at least {nd + 2} dimensions (got {list(weight.shape)})")
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(x.shape)} to have {weight.shape[1] * groups} channels, but got "
                           f"{x.shape[1]} channels instead")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
                           f"0, but got weight of size {list(weight.shape)} instead")
    padded = [n + lo + hi for n, (lo, hi) in zip(x.shape[2:], pads)]
    eff = [d * (k - 1) + 1 for d, k in zip(dilation, weight.shape[2:])]
    if any(p < e for p, e in zip(padded, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                           f"Kernel size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                           "actual input size")
    _check_bias(weight, bias, 0)
    return _unbatch(_ops.convolution(x, weight, stride, pads, dilation, groups, bias), squeeze)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, stride, padding, dilation, groups)):
        return handle_torch_function(conv1d, (input, weight, bias, stride, padding, dilation, groups), input, weight,
                                     bias=bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, stride, padding, dilation, groups)):
        return handle_torch_function(conv2d, (input, weight, bias, stride, padding, dilation, groups), input, weight,
                                     bias=bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, stride, padding, dilation, groups)):
        return handle_torch_function(conv3d, (input, weight, bias, stride, padding, dilation, groups), input, weight,
                                     bias=bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, nd, name):
    x, squeeze = _batched(input, nd, name)
    stride, dilation = _ntuple(stride, nd, "stride"), _ntuple(dilation, nd, "dilation")
    padding, output_padding = _ntuple(padding, nd, "padding"), _ntuple(output_padding, nd, "output_padding")
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                           f"{list(x.shape)} to have {weight.shape[0]} channels, but got {x.shape[1]} "
                           "channels instead")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                           f"output_padding={list(output_padding)}, stride={list(stride)}, "
                           f"dilation={list(dilation)}")
    size = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, s, p, d, k, op in
                 zip(x.shape[2:], stride, padding, dilation, weight.shape[2:], output_padding))
    _check_bias(weight, bias, 1, groups)
    out = _ops.convolution_transpose(x, weight, stride, tuple((p, p) for p in padding), dilation, groups, size, bias)
    return _unbatch(out, squeeze)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, stride, padding, output_padding, groups, dilation)):
        return handle_torch_function(conv_transpose1d, (input, weight, bias, stride, padding, output_padding, groups,
                                     dilation), input, weight, bias=bias, stride=stride, padding=padding,
                                     output_padding=output_padding, groups=groups, dilation=dilation)
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                           "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, stride, padding, output_padding, groups, dilation)):
        return handle_torch_function(conv_transpose2d, (input, weight, bias, stride, padding, output_padding, groups,
                                     dilation), input, weight, bias=bias, stride=stride, padding=padding,
                                     output_padding=output_padding, groups=groups, dilation=dilation)
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                           "conv_transpose2d")


# ---------------------------------------------------------------- pooling
def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd, name):
    k, s, p, d = _pool_checks.max_pool_args(input, kernel_size, stride, padding, dilation, ceil_mode,
                                            return_indices, nd)
    x, squeeze = _batched(input, nd, name)
    if not return_indices and _ops.blocks_divide(x.shape[2:], k, s, p, d):
        return _unbatch(_ops.max_pool_blocks(x, k), squeeze)     # the 2x2 pool: no indices needed
    out, idx = _ops.max_pool(x, k, s, p, d, ceil_mode)
    out, idx = _unbatch(out, squeeze), _unbatch(idx, squeeze)
    return (out, idx) if return_indices else out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)):
        return handle_torch_function(max_pool1d, (input, kernel_size, stride, padding, dilation, ceil_mode,
                                     return_indices), input, kernel_size, stride=stride, padding=padding,
                                     dilation=dilation, ceil_mode=ceil_mode, return_indices=return_indices)
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)):
        return handle_torch_function(max_pool2d, (input, kernel_size, stride, padding, dilation, ceil_mode,
                                     return_indices), input, kernel_size, stride=stride, padding=padding,
                                     dilation=dilation, ceil_mode=ceil_mode, return_indices=return_indices)
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")


def _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nd, name):
    k, s, p = _pool_checks.avg_pool_args(input, kernel_size, stride, padding, ceil_mode, divisor_override, nd)
    x, squeeze = _batched(input, nd, name)
    out = _ops.avg_pool(x, k, s, p, ceil_mode, count_include_pad, divisor_override)
    return _unbatch(out, squeeze)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, ceil_mode, count_include_pad)):
        return handle_torch_function(avg_pool1d, (input, kernel_size, stride, padding, ceil_mode, count_include_pad),
                                     input, kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                                     count_include_pad=count_include_pad)
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)):
        return handle_torch_function(avg_pool2d, (input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                     divisor_override), input, kernel_size, stride=stride, padding=padding,
                                     ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                                     divisor_override=divisor_override)
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2,
                     "avg_pool2d")


def _adaptive_matrix(n_in: int, n_out: int, like: Tensor) -> Tensor:
    """Row i averages PyTorch's adaptive window ``[floor(i*in/out), ceil((i+1)*in/out))``."""
    rows = []
    for i in range(n_out):
        lo, hi = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        rows.append([1.0 / (hi - lo) if lo <= j < hi else 0.0 for j in range(n_in)])
    return creation.tensor(rows, dtype=like.dtype, device=like.device)


def _separable(x: Tensor, mats: list) -> Tensor:
    """Apply one (out, in) matrix along each trailing spatial dim (None leaves a dim alone)."""
    nd = len(mats)
    for i, m in enumerate(mats):
        if m is None:
            continue
        dim = x.ndim - nd + i
        x = m.matmul(x.transpose(dim, -2)).transpose(dim, -2) if dim != x.ndim - 1 else x.matmul(m.t())
    return x


def _adaptive_avg_pool(input, output_size, nd, name):
    out = _pool_checks.adaptive_avg_output(input.shape, output_size, nd)
    if all(o == 1 for o in out):   # ATen's shortcut, before its rank check: a mean over the trailing dims
        return input.mean(tuple(range(-nd, 0)), keepdim=True)
    x, squeeze = _batched(input, nd, name)
    size = tuple(x.shape[2:])
    if 0 in out:
        res = _empty_pooled(x, out)
    elif _resample.adaptive_applies(x, out):   # ATen's adaptive kernel: the sum divided by each extent
        res = _resample.adaptive_avg_pool(x, out)
    elif all(n % o == 0 for n, o in zip(size, out)):
        k = tuple(n // o for n, o in zip(size, out))
        res = _ops.avg_pool(x, k, k, (0,) * nd, False, True, None)
    else:
        res = _separable(x, [None if n == o else _adaptive_matrix(n, o, x) for n, o in zip(size, out)])
    return _unbatch(res, squeeze)


def _empty_pooled(x: Tensor, out: tuple) -> Tensor:
    """A pooled ``(N, C, *out)`` with a zero-size output dim: no windows, an empty result, as ATen's
    forward gives (kept in the graph with a zero gradient, where ATen's backward refuses it)."""
    return x.reshape(-1)[:0].reshape(tuple(x.shape[:2]) + tuple(out))


def _ntuple_none(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_avg_pool1d, (input, output_size), input, output_size)
    return _adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_avg_pool2d, (input, output_size), input, output_size)
    return _adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")


# ---------------------------------------------------------------- normalization
def _normalize_over(x: Tensor, dims: tuple, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """``(x - mean) / sqrt(biased var + eps)`` over ``dims``; also returns mean and biased var."""
    mean = x.mean(dims, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(dims, keepdim=True)
    return centered * (var + eps).rsqrt(), mean, var


def _check_batch_norm_args(input: Tensor, running_mean, running_var, weight, bias, training: bool) -> None:
    """PyTorch's checks (in its order): every per-channel tensor has one element per channel of
    ``input`` (dim 1), and eval mode has running statistics; nothing broadcasts silently."""
    channels = input.shape[1] if input.ndim > 1 else 1
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is None:
            if not training:
                raise RuntimeError(f"{name} must be defined in evaluation mode")
        elif t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")


def _with_running_stats(input: Tensor, running_mean: Tensor, running_var: Tensor, eps: float) -> Tensor:
    """``input`` normalised per channel (dim 1) by stored statistics (eval-mode batch/instance norm)."""
    return (input - _channel_view(running_mean, input.ndim)) * _channel_view((running_var + eps).rsqrt(), input.ndim)


def _channel_affine(out: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """The per-channel scale and shift every channel norm ends with."""
    if weight is not None:
        out = out * _channel_view(weight, out.ndim)
    if bias is not None:
        out = out + _channel_view(bias, out.ndim)
    return out


def _mixed_norm(input: Tensor, *params: Tensor | None) -> bool:
    """PyTorch's CPU normalisations take a bfloat16/float16 input with float32 parameters (autocast's
    conv output into a float32 BatchNorm): they compute in float32 and return the input's dtype, where
    promotion would give float32 to the rest of the network."""
    return input.dtype in (_dt.bfloat16, _dt.float16) and any(p is not None and p.dtype is _dt.float32
                                                                 for p in params)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel by batch statistics (training) or the running ones (eval)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, running_mean, running_var, weight, bias)):
        return handle_torch_function(batch_norm, (input, running_mean, running_var, weight, bias), input,
                                     running_mean, running_var, weight=weight, bias=bias, training=training,
                                     momentum=momentum, eps=eps)
    if _mixed_norm(input, weight, bias, running_mean, running_var):
        return batch_norm(input.float(), running_mean, running_var, weight, bias, training, momentum,
                          eps).to(input.dtype)
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        count = input.numel() // input.shape[1]
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{input.shape}")
        _check_batch_norm_args(input, running_mean, running_var, weight, bias, training)
        if running_mean is not None and _DISPATCH.slow and _batching.modes():
            _batch_norm_vmap_check(input, running_mean, running_var)
        out, mean, _, unbiased = _ops.batch_norm_normalize(input, dims, eps, weight, bias)   # one fused primitive
        if running_mean is not None:
            m = running_mean.dtype.np.type(momentum)
            update_running_stats(running_mean, running_var, mean, unbiased, float(m), float(m.dtype.type(1) - m))
        return out
    _check_batch_norm_args(input, running_mean, running_var, weight, bias, training)
    if running_mean.dtype != input.dtype or running_var.dtype != input.dtype:
        return _channel_affine(_with_running_stats(input, running_mean, running_var, eps), weight, bias)
    return _ops.batch_norm_eval(input, running_mean, running_var, eps, weight, bias)   # one primitive


def _batch_norm_vmap_check(input: Tensor, running_mean: Tensor, running_var: Tensor) -> None:
    """Inside vmap, PyTorch refuses training batch norm on a batched input whose running statistics, which
    it updates in place, are not batched at the input's levels."""
    levels = set(_batching.unwrap_all(input)[1])
    if not levels <= set(_batching.unwrap_all(running_mean)[1]) or \
            not levels <= set(_batching.unwrap_all(running_var)[1]):
        raise RuntimeError("Batch norm got a batched tensor as input while the running_mean or running_var, which "
                           "will be updated in place, were not batched.\nIf you are using a module and do not need "
                           "eval mode, please set `track_running_stats` to be False.If you are using a prebuilt "
                           "module and do not need eval mode, please see the functorch website for resources on "
                           "how to patch your module to work with vmap")


def update_running_stats(running_mean: Tensor, running_var: Tensor, mean: Tensor, unbiased: Tensor, m, keep) -> None:
    """ATen's running-estimate update (``batch_norm_cpu_update_stats_template``): ``m`` the momentum and
    ``keep`` its complement ``1 - m``, both already in the statistics' dtype (Python floats or 0-d
    tensors): ``mean' = m * mean + keep * mean`` in that dtype; for float32 statistics the variance's
    sum is float64, ``var' = f32(f64(m) * f64(unbiased) + f64(f32(keep * var)))``, as ATen adds a float
    product to its double ``unbiased_var``. While nobody watches (no mode, tape, profiler or capture), on
    float32 cpu arrays the same arithmetic runs on the arrays, each write counted on the version counters
    as the in-place ops count them (the ten dispatched ops cost ~25 us per layer, ResNet's step has five)."""
    if not _DISPATCH.slow and type(m) is float and _float32_arrays(running_mean, running_var, mean, unbiased):
        rm, rv, f = running_mean._data, running_var._data, np.float32(keep)
        rm *= f
        rm += mean._data * np.float32(m)
        running_mean._vc[0] += 2
        var = unbiased._data.astype(np.float64)
        var *= m
        var += rv * f
        rv[...] = var
        running_var._vc[0] += 1
        return
    with no_grad():
        running_mean.mul_(keep).add_(mean.to(running_mean.dtype) * m)
        unbiased = unbiased.to(running_var.dtype)
        if running_var.dtype == _dt.float32:
            # one float64 cast: the float32 operands of the in-place ops convert exactly
            running_var.copy_(unbiased.double().mul_(m).add_(running_var.mul(keep)))
        else:
            running_var.mul_(keep).add_(unbiased * m)


def _float32_arrays(*tensors) -> bool:
    """Whether each is a plain tensor over a float32 numpy array of one shape (the running statistics'
    update on arrays)."""
    shape = tensors[0].shape
    return all(type(t) is Tensor and type(t._data) is np.ndarray and t._data.dtype == np.float32 and t.shape == shape
               for t in tensors)


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, normalized_shape, weight, bias)):
        return handle_torch_function(layer_norm, (input, normalized_shape, weight, bias), input, normalized_shape,
                                     weight=weight, bias=bias, eps=eps)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of "
                               f"shape {list(t.shape)} and normalized_shape = {list(shape)}")
    if _mixed_norm(input, weight, bias):
        return _fused.layer_norm(input.float(), len(shape), weight, bias, eps,
                                 bf16_sums=input.dtype is _dt.bfloat16).to(input.dtype)
    return _fused.layer_norm(input, len(shape), weight, bias, eps)   # one fused op


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias)):
        return handle_torch_function(group_norm, (input, weight, bias), input, num_groups, weight=weight, bias=bias,
                                     eps=eps)
    n, c = input.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got "
                           f"input of shape {list(input.shape)} and num_groups={num_groups}")
    if _mixed_norm(input, weight, bias):
        return group_norm(input.float(), num_groups, weight, bias, eps).to(input.dtype)
    if input.dtype in (_dt.bfloat16, _dt.float16):   # ATen's kernel: float32 statistics and affine, one rounding
        return group_norm(input.float(), num_groups, None if weight is None else weight.float(),
                          None if bias is None else bias.float(), eps).to(input.dtype)
    return _group_norm.group_norm(input, num_groups, weight, bias, eps)   # one op


# ---------------------------------------------------------------- dropout and embedding
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` (tapelab's default generator), scale the rest."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(dropout, (input,), input, p=p, training=training, inplace=inplace)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        out = input * (creation.bernoulli(input.detach(), 1.0 - p) * (1.0 / (1.0 - p)))
    return input.copy_(out) if inplace else out


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight)):
        return handle_torch_function(embedding, (input, weight), input, weight, padding_idx, max_norm, norm_type,
                                     scale_grad_by_freq, sparse)
    if padding_idx is not None:
        num = weight.shape[0]
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= num
    try:
        if max_norm is not None:
            _renorm_rows(weight, input, max_norm, norm_type)
        return _ops.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
    except AttributeError:   # PyTorch's parser names the op it calls, torch.embedding(weight, indices)
        for i, (name, x) in enumerate((("weight", weight), ("indices", input))):
            if not isinstance(x, Tensor):
                raise TypeError(f"embedding(): argument '{name}' (position {i + 1}) must be Tensor, not "
                                f"{tp_name(x)}") from None
        raise


def _renorm_rows(weight: Tensor, idx: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescale, in place and unrecorded, the looked-up rows whose norm exceeds ``max_norm``."""
    with no_grad():
        rows = idx.flatten()
        norms = weight[rows].norm(norm_type, dim=1, keepdim=True)
        scale = (max_norm / (norms + 1e-7)).clamp(max=1.0)
        weight[rows] = weight[rows] * scale


# ---------------------------------------------------------------- shape helpers
def _cubic_weights(t: float, a: float) -> tuple:
    """The four taps (at -1, 0, 1, 2 from floor) of cubic convolution with parameter ``a``."""
    def near(x):                  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):                   # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _aa_filter(x: float, cubic: bool) -> float:
    """Antialiasing kernels (PIL's): the triangle, or cubic convolution with a = -0.5."""
    x = abs(x)
    if not cubic:
        return 1.0 - x if x < 1.0 else 0.0
    if x < 1.0:
        return (1.5 * x - 2.5) * x * x + 1.0
    return ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0 if x < 2.0 else 0.0


def _interp_matrix(n_in: int, n_out: int, mode: str, align_corners: bool | None, scale: float | None,
                   like: Tensor, antialias: bool = False) -> Tensor:
    """The (out, in) matrix of 1-d nearest, linear or cubic resampling, with PyTorch's index rules
    (cubic: convolution with a = -0.75 over four taps clamped at the edges; ``antialias``: the
    kernel widened by the downscale factor and normalised, as PyTorch's ``antialias=True``)."""
    ratio = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    # the interpolating modes' step between output and input positions (area_pixel_compute_scale)
    step = ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0) if align_corners else ratio
    rows = [[0.0] * n_in for _ in range(n_out)]
    if antialias and mode in ("linear", "cubic"):
        support = (2.0 if mode == "cubic" else 1.0) * max(step, 1.0)
        inv = 1.0 / step if step >= 1.0 else 1.0
        for i in range(n_out):
            center = step * (i + 0.5)
            lo, hi = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), n_in)
            ws = [_aa_filter((j - center + 0.5) * inv, mode == "cubic") for j in range(lo, hi)]
            total = sum(ws)
            for j, w in zip(range(lo, hi), ws):
                rows[i][j] = w / total if total else w
        return creation.tensor(rows, dtype=like.dtype, device=like.device)
    for i in range(n_out):
        if mode == "nearest":
            rows[i][min(int(math.floor(i * ratio)), n_in - 1)] = 1.0
            continue
        if mode == "nearest-exact":
            rows[i][min(int(math.floor((i + 0.5) * ratio)), n_in - 1)] = 1.0
            continue
        src = step * i if align_corners else step * (i + 0.5) - 0.5
        if mode == "cubic":
            lo = math.floor(src)
            for k, w in zip(range(lo - 1, lo + 3), _cubic_weights(src - lo, -0.75)):
                rows[i][min(max(k, 0), n_in - 1)] += w
            continue
        src = max(src, 0.0)              # linear clamps a negative source position, cubic does not
        lo = min(int(math.floor(src)), n_in - 1)
        hi = min(lo + 1, n_in - 1)
        frac = src - lo
        rows[i][lo] += 1.0 - frac
        rows[i][hi] += frac
    return creation.tensor(rows, dtype=like.dtype, device=like.device)


_INTERP_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resample the spatial dims: nearest / nearest-exact / (bi/tri)linear / bicubic, one matrix per
    dim (separable, as PyTorch's kernels are), or ``area`` (adaptive average pooling)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, size, scale_factor)):
        return handle_torch_function(interpolate, (input, size, scale_factor), input, size=size,
                                     scale_factor=scale_factor, mode=mode, align_corners=align_corners,
                                     recompute_scale_factor=recompute_scale_factor, antialias=antialias)
    nd = input.ndim - 2
    if mode in _INTERP_DIMS and _INTERP_DIMS[mode] != nd:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{_INTERP_DIMS[mode] + 2}D input")
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area"):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor as input")
    if align_corners is not None and mode.startswith("nearest"):
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    in_size = tuple(input.shape[2:])
    if size is not None:
        out = _ntuple(size, nd, "size")
        scales = (None,) * nd
    else:
        scales = tuple(float(s) for s in _ntuple_none(scale_factor, nd))
        out = tuple(int(math.floor(n * s)) for n, s in zip(in_size, scales))
        if recompute_scale_factor:
            scales = (None,) * nd
    if mode == "area":
        return _adaptive_avg_pool(input, out, nd, f"adaptive_avg_pool{nd}d")
    if _resize_u8.applies(input, mode, align_corners, antialias):
        return _resize_u8.resize(input, out, mode, antialias)
    if input.dtype == _dt.uint8 and not mode.startswith("nearest"):   # in float32, rounded back (uint8 sums overflow)
        return interpolate(input.float(), size, scale_factor, mode, align_corners, recompute_scale_factor,
                           antialias).round().clamp(0, 255).to(_dt.uint8)
    if mode == "bicubic" and _resample.cubic_applies(input, antialias):
        return composite("upsample_bicubic",
                         lambda x: _resample.bicubic(x, out, scales, bool(align_corners)), input)
    if _resample.aa_applies(input, antialias):
        return composite(f"upsample_{mode}",
                         lambda x: _resample.antialias(x, out, scales, bool(align_corners), mode == "bicubic"), input)
    if mode in ("linear", "bilinear", "trilinear") and _upsample.applies(input, nd, antialias):
        return composite(f"upsample_{mode}",
                         lambda x: _upsample.upsample_linear(x, out, scales, bool(align_corners)), input)
    mode_1d = mode if mode.startswith("nearest") else "cubic" if mode == "bicubic" else "linear"
    mats = [None if (n == o and s in (None, 1.0)) else
            _interp_matrix(n, o, mode_1d, align_corners, s, input, antialias)
            for n, o, s in zip(in_size, out, scales)]
    # PyTorch's one upsample kernel (its matrix products are not autocast's)
    return composite(f"upsample_{mode}", lambda x: _separable(x, mats), input)


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """im2col: ``(N, C, H, W)`` -> ``(N, C * kh * kw, L)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, dilation, padding, stride)):
        return handle_torch_function(unfold, (input, kernel_size, dilation, padding, stride), input, kernel_size,
                                     dilation=dilation, padding=padding, stride=stride)
    x, squeeze = _batched(input, 2, "unfold")
    pads = tuple((p, p) for p in _ntuple(padding, 2, "padding"))
    out = _ops.im2col(x, _ntuple(kernel_size, 2, "kernel_size"), _ntuple(dilation, 2, "dilation"), pads,
                      _ntuple(stride, 2, "stride"))
    return _unbatch(out, squeeze)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """col2im, the adjoint of ``unfold``: sums overlapping blocks into ``(N, C, *output_size)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size, kernel_size, dilation, padding, stride)):
        return handle_torch_function(fold, (input, output_size, kernel_size, dilation, padding, stride), input,
                                     output_size, kernel_size, dilation=dilation, padding=padding, stride=stride)
    squeeze = input.ndim == 2
    x = input.unsqueeze(0) if squeeze else input
    size, k = _ntuple(output_size, 2, "output_size"), _ntuple(kernel_size, 2, "kernel_size")
    d, p, st = _ntuple(dilation, 2, "dilation"), _ntuple(padding, 2, "padding"), _ntuple(stride, 2, "stride")
    blocks = [(n + 2 * pi - di * (ki - 1) - 1) // si + 1 for n, pi, di, ki, si in zip(size, p, d, k, st)]
    if x.shape[1] % (k[0] * k[1]) or x.shape[2] != blocks[0] * blocks[1]:
        raise RuntimeError(f"Given output_size={size}, kernel_size={k}, dilation={d}, padding={p}, stride={st}, "
                           f"expected size of input's dimension 2 to match the calculated number of sliding "
                           f"blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={x.shape[2]}.")
    out = _ops.col2im(x, size, k, d, tuple((pi, pi) for pi in p), st)
    return _unbatch(out, squeeze)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, out)):
        return handle_torch_function(normalize, (input, out), input, p=p, dim=dim, eps=eps, out=out)
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((x1, x2)):
        return handle_torch_function(cosine_similarity, (x1, x2), x1, x2, dim=dim, eps=eps)
    return ((x1 / x1.norm(2, dim, keepdim=True).clamp_min(eps)) *
            (x2 / x2.norm(2, dim, keepdim=True).clamp_min(eps))).sum(dim)


# ---------------------------------------------------------------- activations
def _opmath(input: Tensor, fn) -> Tensor:
    """``fn(input)``, an activation composed of several ops; on a bfloat16 or float16 input computed
    in float32 and rounded once, as ATen's CPU kernels compute in their opmath type (``x * sigmoid(x)``
    rounded at each op differed from PyTorch's SiLU in a quarter of bfloat16 values)."""
    try:
        low = input.dtype is _dt.bfloat16 or input.dtype is _dt.float16
    except AttributeError:
        refuse_non_tensors("activation", input)
        raise
    if low:
        return fn(input.float()).to(input.dtype)
    return fn(input)


def _inplace(input: Tensor, fn, inplace: bool, opmath: bool = True) -> Tensor:
    """``fn(input)`` (through ``_opmath``, unless ``fn`` is one op computing in float32 itself); with
    ``inplace`` the result is written into ``input``. When the write is differentiated, ``fn`` reads a
    copy of the original values (as PyTorch's in-place activations save what their backward needs), so
    backward never trips the version check on ``input``."""
    run = (lambda x: _opmath(x, fn)) if opmath else fn
    if not inplace:
        return run(input)
    try:
        src = input.clone() if input.requires_grad and is_grad_enabled() else input
    except AttributeError:
        refuse_non_tensors("activation", input)
        raise
    return input.copy_(run(src))


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(relu, (input,), input, inplace=inplace)
    return input.relu_() if inplace else input.relu()


def relu_(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(relu_, (input,), input)
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(relu6, (input,), input, inplace=inplace)
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(leaky_relu, (input,), input, negative_slope=negative_slope, inplace=inplace)
    return _inplace(input, lambda x: x.where(x > 0, x * negative_slope), inplace)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(leaky_relu_, (input,), input, negative_slope=negative_slope)
    return leaky_relu(input, negative_slope, True)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(elu, (input,), input, alpha=alpha, inplace=inplace)
    return _inplace(input, lambda x: _fused.elu(x, alpha), inplace)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(elu_, (input,), input, alpha=alpha)
    return elu(input, alpha, True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x Phi(x)`` (or its tanh approximation) as one fused op."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(gelu, (input,), input, approximate=approximate)
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _fused.gelu(input, approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(silu, (input,), input, inplace=inplace)
    return _inplace(input, _fused.silu, inplace, opmath=False)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold`` as in PyTorch."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(softplus, (input,), input, beta=beta, threshold=threshold)
    return _opmath(input, lambda x: _fused.softplus(x, beta, threshold))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(mish, (input,), input, inplace=inplace)
    return _inplace(input, _fused.mish, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(hardswish, (input,), input, inplace=inplace)
    return _inplace(input, _fused.hardswish, inplace, opmath=False)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(hardsigmoid, (input,), input, inplace=inplace)
    return _inplace(input, _fused.hardsigmoid, inplace, opmath=False)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """Clamped; the gradient is 0 at the bounds themselves, as PyTorch's (so relu6 too)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(hardtanh, (input,), input, min_val=min_val, max_val=max_val, inplace=inplace)
    if inplace:
        refuse_non_tensors("hardtanh_", input)
        return _fused.hardtanh_(input, min_val, max_val)
    return _fused.hardtanh(input, min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(hardtanh_, (input,), input, min_val=min_val, max_val=max_val)
    return hardtanh(input, min_val, max_val, True)


def tanh(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(tanh, (input,), input)
    return input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(sigmoid, (input,), input)
    return input.sigmoid()


def logsigmoid(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(logsigmoid, (input,), input)
    return _fused.log_sigmoid(input)


def softsign(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(softsign, (input,), input)
    return input / (input.abs() + 1.0)


def _softmax_dim(ndim: int, name: str) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                  "dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _cast(input: Tensor, dtype) -> Tensor:
    return input if dtype is None else input.to(dtype)


def _softmax_input(input: Tensor, dim, dtype, name: str) -> tuple[Tensor, int]:
    """The cast input and its wrapped dim; integer input is refused, as PyTorch's kernels do."""
    try:
        x = _cast(input, dtype)
        if dim is None:
            dim = _softmax_dim(x.ndim, name)
        floating = x.is_floating_point()
    except AttributeError:
        refuse_non_tensors(name, input)
        raise
    if not floating:
        got = x.dtype.scalar_type
        raise RuntimeError(f'"{name}_lastdim_kernel_impl" not implemented for \'{got}\'')
    return x, _wrap_dim(dim, x.ndim, name)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``exp(x - max) / sum``, one fused op: the max shift keeps it finite for any input."""
    if _DISPATCH.functions is not None and has_tensor_like((input, dim)):
        return handle_torch_function(softmax, (input, dim), input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
    x, dim = _softmax_input(input, dim, dtype, "softmax")
    return _fused.softmax(x, dim)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, dim)):
        return handle_torch_function(softmin, (input, dim), input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
    if dim is None:
        dim = _softmax_dim(input.ndim, "softmin")
    return softmax(-_cast(input, dtype), dim)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """One fused op, shifted by the max first as PyTorch: a +inf logit makes its whole row nan."""
    if _DISPATCH.functions is not None and has_tensor_like((input, dim)):
        return handle_torch_function(log_softmax, (input, dim), input, dim=dim, _stacklevel=_stacklevel,
                                     dtype=dtype)
    x, dim = _softmax_input(input, dim, dtype, "log_softmax")
    return _fused.log_softmax(x, dim)


# ---------------------------------------------------------------- losses
def _reduction(size_average, reduce, reduction: str) -> str:
    """Map the deprecated ``size_average``/``reduce`` pair to a reduction string, with PyTorch's
    deprecation warning (programs passing ``size_average=False``, as yunjey's VAE, print it)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    legacy = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{legacy}' instead.",
                  stacklevel=3)
    return legacy


def _check_reduction(reduction: str) -> None:
    """A loss's ``reduction`` argument, refused with PyTorch's words unless ``none``, ``mean`` or ``sum``."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    _check_reduction(reduction)
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


def _not_differentiable(function: str, **weights) -> None:
    """PyTorch refuses a loss's weight that requires grad while grad mode is on (it has no gradient)."""
    if is_grad_enabled():
        for name, w in weights.items():
            if w is not None and w.requires_grad:
                raise RuntimeError(f"The function '{function}' is not differentiable with respect to argument "
                                   f"'{name}'. This input cannot have requires_grad True.")


def _check_same_size(input: Tensor, target: Tensor) -> None:
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce, weight)):
        return handle_torch_function(mse_loss, (input, target, size_average, reduce, weight), input, target,
                                     size_average=size_average, reduce=reduce, reduction=reduction, weight=weight)
    _check_same_size(input, target)
    reduction = _reduction(size_average, reduce, reduction)
    if weight is None:
        _check_reduction(reduction)
        return _ops.mse_loss(input, target, reduction)
    d = input - target
    return _reduce(d * d * weight, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce, weight)):
        return handle_torch_function(l1_loss, (input, target, size_average, reduce, weight), input, target,
                                     size_average=size_average, reduce=reduce, reduction=reduction, weight=weight)
    _check_same_size(input, target)
    loss = (input - target).abs()
    return _reduce(loss if weight is None else loss * weight, _reduction(size_average, reduce, reduction))


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce)):
        return handle_torch_function(smooth_l1_loss, (input, target, size_average, reduce), input, target,
                                     size_average=size_average, reduce=reduce, reduction=reduction, beta=beta)
    _check_same_size(input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    reduction = _reduction(size_average, reduce, reduction)
    if beta == 0:   # PyTorch's smooth_l1_loss is l1_loss there
        return l1_loss(input, target, reduction=reduction)
    _check_reduction(reduction)
    return _robust_losses.smooth_l1_loss(input, target, reduction, beta)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight)):
        return handle_torch_function(huber_loss, (input, target, weight), input, target, reduction=reduction,
                                     delta=delta, weight=weight)
    _check_same_size(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _check_reduction(reduction)
    if weight is None:
        return _robust_losses.huber_loss(input, target, reduction, delta)
    return _reduce(_robust_losses.huber_loss(input, target, "none", delta) * weight, reduction)


def _check_class_targets(input: Tensor, target: Tensor, reduction: str) -> bool:
    """PyTorch's argument checks of class-index losses; says whether the forward may read target
    values to raise on one out of range (not while capturing, where a host check would freeze into
    a replay guard, nor on meta, which has no values: there a bad target's loss is nan)."""
    _check_reduction(reduction)
    shape, got = input._data.shape, target._data.shape   # the arrays' shapes: a loss is called every step
    if not shape:
        raise ValueError(f"Expected 1 or more dimensions (got {len(shape)})")
    if len(shape) >= 2 and shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    if target.dtype not in (_dt.int64, _dt.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {target.dtype.scalar_type}")
    want = shape[:1] + shape[2:] if len(shape) >= 2 else ()
    if got != want:
        raise RuntimeError(f"Expected target size {list(want)}, got {list(got)} (input {list(shape)})")
    return not _DISPATCH.capturing and target._device.type != "meta"


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """``-input[n, target[n]] * weight[target[n]]``; mean divides by the summed weights. One op."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight, size_average, reduce)):
        return handle_torch_function(nll_loss, (input, target, weight, size_average, reduce), input, target,
                                     weight=weight, size_average=size_average, ignore_index=ignore_index,
                                     reduce=reduce, reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    check = _check_class_targets(input, target, reduction)
    return _fused.nll_loss(input, target, weight, ignore_index, reduction, check)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax + nll_loss (with label smoothing) as one op for class indices; soft targets
    (class probabilities) over log_softmax."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight, size_average, reduce)):
        return handle_torch_function(cross_entropy, (input, target, weight, size_average, reduce), input, target,
                                     weight=weight, size_average=size_average, ignore_index=ignore_index,
                                     reduce=reduce, reduction=reduction, label_smoothing=label_smoothing)
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if not target.is_floating_point():
        check = _check_class_targets(input, target, reduction)
        return _fused.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing, check)
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected target size {list(input.shape)}, got {list(target.shape)}")
    logp = log_softmax(input, class_dim)
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    if weight is not None:
        wshape = [1] * input.ndim
        wshape[class_dim] = n_classes
        target = target * weight.reshape(wshape)
    loss = -(logp * target).sum(class_dim)
    if reduction == "mean":
        return loss.sum() / (input.numel() // n_classes) if input.numel() else loss.sum() * float("nan")
    return _reduce(loss, reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """Logs are clamped at -100, as PyTorch does, so 0 and 1 probabilities stay finite (and their
    gradients too: the op ``binary_cross_entropy`` in ``_ops`` carries PyTorch's gradient formula)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight, size_average, reduce)):
        return handle_torch_function(binary_cross_entropy, (input, target, weight, size_average, reduce), input,
                                     target, weight=weight, size_average=size_average, reduce=reduce,
                                     reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    _check_reduction(reduction)
    _not_differentiable("binary_cross_entropy", weight=weight)
    return _ops.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """``(1 - t) x - l log_sigmoid(x)`` (``l = (pos_weight - 1) t + 1``), finite for any x: one op."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight, size_average, reduce, pos_weight)):
        return handle_torch_function(binary_cross_entropy_with_logits, (input, target, weight, size_average, reduce,
                                     pos_weight), input, target, weight=weight, size_average=size_average,
                                     reduce=reduce, reduction=reduction, pos_weight=pos_weight)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    _check_reduction(reduction)
    _not_differentiable("binary_cross_entropy_with_logits", weight=weight, pos_weight=pos_weight)
    return _ops.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Pointwise ``target * (log target - input)`` (0 where target is 0); ``batchmean`` divides by N."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce)):
        return handle_torch_function(kl_div, (input, target, size_average, reduce), input, target,
                                     size_average=size_average, reduce=reduce, reduction=reduction,
                                     log_target=log_target)
    if size_average is None and reduce is None and reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    return _kl_div(input, target, _reduction(size_average, reduce, reduction), log_target)


def _kl_div(input: Tensor, target: Tensor, reduction: str, log_target: bool) -> Tensor:
    """``kl_div`` without its warnings (``torch.kl_div``, ATen's op, gives none)."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``1 - cos`` for target 1, ``max(0, cos - margin)`` for target -1."""
    if _DISPATCH.functions is not None and has_tensor_like((input1, input2, target, size_average, reduce)):
        return handle_torch_function(cosine_embedding_loss, (input1, input2, target, size_average, reduce), input1,
                                     input2, target, margin=margin, size_average=size_average, reduce=reduce,
                                     reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    dim = 1 if input1.ndim == 2 else 0
    eps = 1e-12
    prod = (input1 * input2).sum(dim)
    mag = ((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)
    cos = prod / mag.sqrt()
    zeros = cos * 0
    loss = (1 - cos).where(target == 1, zeros) + (cos - margin).clamp_min(0).where(target == -1, zeros)
    return _reduce(loss, reduction)
