"""The rest of ``torch.nn.functional`` that programs reach for: 3-d pooling and the ``*_with_indices``
forms, power-average and fractional max pooling, unpooling, channel shuffle, local response norm,
bags of embeddings, sampling grids, and the margin and triplet losses (the CTC loss is an op, ``_ctc``).

Composites over Tensor ops built on ``functional_core`` and ``functional_extra`` (``functional``
re-exports everything here), so autograd comes from the ops they use.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..core import creation
from ..core.tensor import Tensor
from ..ops.movement import stack
from .functional_core import (_adaptive_avg_pool, _avg_pool, _batched, _conv_transpose, _cubic_weights, _max_pool, _ntuple,
                              _check_reduction, _reduce, _reduction, _unbatch, conv1d, cross_entropy, interpolate,
                              leaky_relu, linear, pad, softmax)
from .functional_extra import _adaptive_max_along, _adaptive_max_empty, adaptive_max_pool1d, adaptive_max_pool2d
from .functional_extra import pairwise_distance
from ._ctc import ctc_loss
from . import _ops, _pool_checks

__all__ = [
    "GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES", "assert_int_or_pair",
    "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d_with_indices",
    "conv_transpose3d", "conv_tbc", "channel_shuffle", "native_channel_shuffle", "local_response_norm",
    "rrelu", "rrelu_", "gumbel_softmax", "embedding_bag", "pdist", "upsample_nearest", "upsample_bilinear",
    "affine_grid", "grid_sample",
    "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss", "linear_cross_entropy",
    "ctc_loss",
]

GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def assert_int_or_pair(arg, arg_name: str, message: str) -> None:
    """Raise ``message`` (formatted with ``arg_name``) unless ``arg`` is an int or a pair."""
    if _DISPATCH.functions is not None and has_tensor_like((arg,)):
        return handle_torch_function(assert_int_or_pair, (arg,), arg, arg_name, message)
    assert isinstance(arg, int) or len(arg) == 2, message.format(arg_name)


# ---------------------------------------------------------------- 3-d pooling, *_with_indices
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)):
        return handle_torch_function(max_pool3d, (input, kernel_size, stride, padding, dilation, ceil_mode,
                                     return_indices), input, kernel_size, stride=stride, padding=padding,
                                     dilation=dilation, ceil_mode=ceil_mode, return_indices=return_indices)
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d")


def _with_indices(nd: int):
    def fn(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=True):
        if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)):
            return handle_torch_function(fn, (input, kernel_size, stride, padding, dilation, ceil_mode,
                                         return_indices), input, kernel_size, stride=stride, padding=padding,
                                         dilation=dilation, ceil_mode=ceil_mode, return_indices=return_indices)
        return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, True, nd, f"max_pool{nd}d")
    fn.__name__ = fn.__qualname__ = f"max_pool{nd}d_with_indices"
    fn.__doc__ = f"``max_pool{nd}d`` returning ``(values, indices)``."
    return fn


max_pool1d_with_indices, max_pool2d_with_indices, max_pool3d_with_indices = (_with_indices(n) for n in (1, 2, 3))


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)):
        return handle_torch_function(avg_pool3d, (input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                     divisor_override), input, kernel_size, stride=stride, padding=padding,
                                     ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                                     divisor_override=divisor_override)
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3,
                     "avg_pool3d")


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_avg_pool3d, (input, output_size), input, output_size)
    return _adaptive_avg_pool(input, output_size, 3, "adaptive_avg_pool3d")


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Separable like the 2-d form: along W, then H, then D; the first maximum in (d, h, w) order wins,
    and indices are flat ``(d * H + h) * W + w`` into each input volume, as PyTorch returns them."""
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_max_pool3d, (input, output_size), input, output_size,
                                     return_indices=return_indices)
    od, oh, ow = _pool_checks.adaptive_max_output(input.shape, output_size, 3)
    x, squeeze = _batched(input, 3, "adaptive_max_pool3d")
    if 0 in (od, oh, ow):
        return _adaptive_max_empty(x, (od, oh, ow), squeeze, return_indices)
    n, c, d, h, w = x.shape
    v_w, i_w = _adaptive_max_along(x, ow, -1)          # (N, C, D, H, ow)
    v_h, i_h = _adaptive_max_along(v_w, oh, -2)        # (N, C, D, oh, ow)
    values, i_d = _adaptive_max_along(v_h, od, -3)     # (N, C, od, oh, ow)
    values = _unbatch(values, squeeze)
    if not return_indices:
        return values
    rows = i_h.gather(2, i_d)                          # h of each maximum
    cols = i_w.reshape(n, c, d * h, ow).gather(2, (i_d * h + rows).reshape(n, c, od * oh, ow))
    idx = (i_d * h + rows) * w + cols.reshape(n, c, od, oh, ow)
    return values, _unbatch(idx, squeeze)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_max_pool1d_with_indices, (input, output_size), input, output_size,
                                     return_indices=return_indices)
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_max_pool2d_with_indices, (input, output_size), input, output_size,
                                     return_indices=return_indices)
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_max_pool3d_with_indices, (input, output_size), input, output_size,
                                     return_indices=return_indices)
    return adaptive_max_pool3d(input, output_size, True)


# ---------------------------------------------------------------- power-average pooling
def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, nd):
    k = _ntuple(kernel_size, nd, "kernel_size")
    pooled = _avg_pool(input.pow(norm_type), k, stride, 0, ceil_mode, True, None, nd, f"avg_pool{nd}d")
    # sign * relu(abs) keeps an odd power's negative averages at zero, as PyTorch does
    return (pooled.sign() * pooled.abs().relu()).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """``(sum over the window of x^p)^(1/p)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride)):
        return handle_torch_function(lp_pool1d, (input, kernel_size, stride), input, norm_type, kernel_size,
                                     stride=stride, ceil_mode=ceil_mode)
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride)):
        return handle_torch_function(lp_pool2d, (input, kernel_size, stride), input, norm_type, kernel_size,
                                     stride=stride, ceil_mode=ceil_mode)
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride)):
        return handle_torch_function(lp_pool3d, (input, kernel_size, stride), input, norm_type, kernel_size,
                                     stride=stride, ceil_mode=ceil_mode)
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


# ---------------------------------------------------------------- unpooling
def _max_unpool(input, indices, kernel_size, stride, padding, output_size, nd):
    x, squeeze = _batched(input, nd, f"max_unpool{nd}d")
    idx = indices.unsqueeze(0) if squeeze else indices
    k = _ntuple(kernel_size, nd, "kernel_size")
    s = k if stride is None else _ntuple(stride, nd, "stride")
    p = _ntuple(padding, nd, "padding")
    default = tuple((n - 1) * si - 2 * pi + ki for n, si, pi, ki in zip(x.shape[2:], s, p, k))
    if output_size is None:
        size = default
    else:
        size = tuple(int(v) for v in output_size)[-nd:]
        for o, dflt, si in zip(size, default, s):
            if not dflt - si < o < dflt + si:
                raise ValueError(f"invalid output_size \"{list(size)}\" (dim 0 must be between "
                                 f"{dflt - si} and {dflt + si})")
    n, c = x.shape[:2]
    flat = creation.zeros((n, c, math.prod(size)), dtype=x.dtype, device=x.device)
    out = flat.scatter(2, idx.reshape(n, c, -1), x.reshape(n, c, -1)).reshape((n, c) + size)
    return _unbatch(out, squeeze)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Put each value back at its max-pooling index; everything else is zero."""
    if _DISPATCH.functions is not None and has_tensor_like((input, indices, kernel_size, stride, padding, output_size)):
        return handle_torch_function(max_unpool1d, (input, indices, kernel_size, stride, padding, output_size), input,
                                     indices, kernel_size, stride=stride, padding=padding, output_size=output_size)
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, indices, kernel_size, stride, padding, output_size)):
        return handle_torch_function(max_unpool2d, (input, indices, kernel_size, stride, padding, output_size), input,
                                     indices, kernel_size, stride=stride, padding=padding, output_size=output_size)
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, indices, kernel_size, stride, padding, output_size)):
        return handle_torch_function(max_unpool3d, (input, indices, kernel_size, stride, padding, output_size), input,
                                     indices, kernel_size, stride=stride, padding=padding, output_size=output_size)
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)


# ---------------------------------------------------------------- fractional max pooling
# Each (sample, channel) plane draws one u in [0, 1) per spatial dim; window i of that dim starts at
# int((i + u) * a) - int(u * a), a = (in - k) / (out - 1), and the last window ends at the input's end.
_SAMPLE_DIM = {2: (1, 0), 3: (0, 1, 2)}   # which column of _random_samples drives each spatial dim


def _fractional_starts(u: np.ndarray, n_in: int, k: int, n_out: int) -> np.ndarray:
    if n_out == 1:
        return np.full(u.shape + (1,), n_in - k, dtype=np.int64)
    alpha = (n_in - k) / (n_out - 1)
    i = np.arange(n_out - 1)
    starts = ((i + u[..., None]) * alpha).astype(np.int64) - (u[..., None] * alpha).astype(np.int64)
    return np.concatenate([starts, np.full(u.shape + (1,), n_in - k, dtype=np.int64)], -1)


def _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, samples, nd):
    name = f"fractional_max_pool{nd}d"
    x, squeeze = _batched(input, nd, name)
    k = _ntuple(kernel_size, nd, "kernel_size")
    size = tuple(x.shape[2:])
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
        ratio = _ntuple_float(output_ratio, nd)
        output_size = tuple(int(n * r) for n, r in zip(size, ratio))
    out = _ntuple(output_size, nd, "output_size")
    # ATen's checks: in 2-d the last window may end at the input's end, in 3-d it must end before it
    # (fractional_max_pool3d_out_cpu_template's '<'), checked time, width, height in that order
    words = ("height", "width") if nd == 2 else ("time", "height", "width")
    for dim in ((0, 1) if nd == 2 else (0, 2, 1)):
        end = out[dim] + k[dim] - 1
        if end > size[dim] or (nd == 3 and end == size[dim]):
            raise RuntimeError(f"{name}{'_out' if nd == 3 else ''}(): pool {words[dim]} {k[dim]} too large relative "
                               f"to input {words[dim]} {size[dim]}")
    n, c = x.shape[:2]
    if samples is None:
        samples = creation.rand((n, c, nd), dtype=x.dtype, device=x.device)
    u = samples.detach().cpu().numpy().astype(np.float64)
    if squeeze and u.ndim == 2:
        u = u[None]
    # flat input position of every window element: (N, C, *out, *k)
    flat = np.zeros((n, c) + out + k, dtype=np.int64)
    for dim in range(nd):
        starts = _fractional_starts(u[..., _SAMPLE_DIM[nd][dim]], size[dim], k[dim], out[dim])   # (N, C, out_d)
        pos = starts[..., :, None] + np.arange(k[dim])                                          # (N, C, out_d, k_d)
        shape = [n, c] + [1] * (2 * nd)
        shape[2 + dim], shape[2 + nd + dim] = out[dim], k[dim]
        flat = flat * size[dim] + pos.reshape(shape)
    index = creation.tensor(flat.reshape(n, c, -1), device=x.device)
    windows = x.reshape(n, c, -1).gather(2, index).reshape((n, c) + out + (math.prod(k),))
    values, arg = windows.max(-1)
    values = _unbatch(values, squeeze)
    if not return_indices:
        return values
    idx = index.reshape((n, c) + out + (math.prod(k),)).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    return values, _unbatch(idx, squeeze)


def _ntuple_float(v, n: int) -> tuple:
    return tuple(float(x) for x in v) if isinstance(v, (tuple, list)) else (float(v),) * n


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Max over pseudo-random overlapping windows (Graham, 2014); ``_random_samples`` fixes them."""
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, output_size, output_ratio, _random_samples)):
        return handle_torch_function(fractional_max_pool2d, (input, kernel_size, output_size, output_ratio,
                                     _random_samples), input, kernel_size, output_size=output_size,
                                     output_ratio=output_ratio, return_indices=return_indices,
                                     _random_samples=_random_samples)
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2)


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, output_size, output_ratio, _random_samples)):
        return handle_torch_function(fractional_max_pool3d, (input, kernel_size, output_size, output_ratio,
                                     _random_samples), input, kernel_size, output_size=output_size,
                                     output_ratio=output_ratio, return_indices=return_indices,
                                     _random_samples=_random_samples)
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = True, _random_samples=None):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, output_size, output_ratio, _random_samples)):
        return handle_torch_function(fractional_max_pool2d_with_indices, (input, kernel_size, output_size,
                                     output_ratio, _random_samples), input, kernel_size, output_size=output_size,
                                     output_ratio=output_ratio, return_indices=return_indices,
                                     _random_samples=_random_samples)
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, True, _random_samples, 2)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = True, _random_samples=None):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, output_size, output_ratio, _random_samples)):
        return handle_torch_function(fractional_max_pool3d_with_indices, (input, kernel_size, output_size,
                                     output_ratio, _random_samples), input, kernel_size, output_size=output_size,
                                     output_ratio=output_ratio, return_indices=return_indices,
                                     _random_samples=_random_samples)
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, True, _random_samples, 3)


# ---------------------------------------------------------------- convolution forms
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, stride, padding, output_padding, groups, dilation)):
        return handle_torch_function(conv_transpose3d, (input, weight, bias, stride, padding, output_padding, groups,
                                     dilation), input, weight, bias=bias, stride=stride, padding=padding,
                                     output_padding=output_padding, groups=groups, dilation=dilation)
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                           "conv_transpose3d")


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-d convolution of a ``(time, batch, channels)`` sequence with a ``(k, in, out)`` weight."""
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias)):
        return handle_torch_function(conv_tbc, (input, weight, bias), input, weight, bias, pad=pad)
    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise RuntimeError(f"conv_tbc: expected a 3-D input and weight and a 1-D bias, got input "
                           f"{list(input.shape)}, weight {list(weight.shape)}, bias {list(bias.shape)}")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


# ---------------------------------------------------------------- channels
def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave ``groups`` channel groups: ``(N, g, C/g, *) -> (N, C/g, g, *)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(channel_shuffle, (input,), input, groups)
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c, rest = input.shape[0], input.shape[1], tuple(input.shape[2:])
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape((n, c) + rest)


native_channel_shuffle = channel_shuffle


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Divide by ``(k + alpha * mean of x² over ``size`` neighbouring channels)^beta``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(local_response_norm, (input,), input, size, alpha=alpha, beta=beta, k=k)
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = pad(input * input, (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2))
    window = sq.narrow(1, 0, c)
    for i in range(1, size):
        window = window + sq.narrow(1, i, c)
    return input / (window * (alpha / size) + k).pow(beta)


# ---------------------------------------------------------------- activations
def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element in training and is
    their mean in evaluation."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(rrelu, (input,), input, lower=lower, upper=upper, training=training,
                                     inplace=inplace)
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    # one double U(lower, upper) per element at or below zero, in order, as PyTorch draws them: its
    # bounds first rounded to the input's math type (float32 but for float64 input), ``u * (upper -
    # lower) + lower`` unfused (``uniform_`` fuses it)
    if input.dtype != _dtype.float64:
        lower, upper = float(np.float32(lower)), float(np.float32(upper))
    negative = input.detach() <= 0
    slope = creation.ones(tuple(input.shape), dtype=input.dtype, device=input.device)
    u = creation.empty(int(negative.sum()), dtype=_dtype.float64, device=input.device).uniform_()
    slope[negative] = (u * (upper - lower) + lower).to(input.dtype)
    out = input * slope
    return input.copy_(out) if inplace else out


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(rrelu_, (input,), input, lower=lower, upper=upper, training=training)
    return rrelu(input, lower, upper, training, True)


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """Softmax of ``(logits + Gumbel noise) / tau``; ``hard`` returns one-hot samples whose gradient is
    the soft sample's (straight-through)."""
    if _DISPATCH.functions is not None and has_tensor_like((logits,)):
        return handle_torch_function(gumbel_softmax, (logits,), logits, tau=tau, hard=hard, eps=eps, dim=dim)
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -creation.empty_like(logits).exponential_().log()
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = creation.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


# ---------------------------------------------------------------- embeddings, distances, resampling
def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sum, mean or max of the embeddings of each bag (rows of a 2-d ``input``, or ``offsets`` into a
    1-d one); ``padding_idx`` entries are left out of a bag, and an empty bag gives zeros."""
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, offsets, per_sample_weights)):
        return handle_torch_function(embedding_bag, (input, weight, offsets, per_sample_weights), input, weight,
                                     offsets=offsets, max_norm=max_norm, norm_type=norm_type,
                                     scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                                     per_sample_weights=per_sample_weights, include_last_offset=include_last_offset,
                                     padding_idx=padding_idx)
    from .functional_core import _renorm_rows
    if weight.dtype == _dtype.int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, "
                      "input, ...)` is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
                      stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                  "on GitHub.")
    for t in (input, offsets):   # ATen's check names argument #1 whichever of the two is not integral
        if t is not None and t.dtype.is_floating_point or t is not None and t.is_complex():
            raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                               f"Long, Int; but got {t.type()} instead (while checking arguments for embedding_bag)")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch "
                             "of fixed length sequences. However, found offsets of type Tensor")
        b, length = input.shape
        starts = list(range(0, b * length, length)) + [b * length]
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = [int(v) for v in offsets.tolist()]
        if starts and starts[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {starts[0]}")
        if starts and starts[-1] > input.shape[0]:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {input.shape[0]} but got "
                               f"offsets[-1] of {starts[-1]}")
        if not include_last_offset:
            starts.append(input.shape[0])
        else:
            starts[-1] = min(starts[-1], input.shape[0])
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    ids = input.tolist()
    bad = next((k for k, v in enumerate(ids) if not 0 <= v < weight.shape[0]), None)
    if bad is not None:   # PyTorch checks the bag's indices itself (a RuntimeError, not embedding's IndexError)
        raise RuntimeError(f"Index {bad} of input takes value {ids[bad]} which is not in the valid range "
                           f"[0, {weight.shape[0]})")
    if sparse and mode == "max":
        raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    sizes = np.diff(np.asarray(starts, dtype=np.int64))
    if (sizes < 0).any():   # ATen's offset2bag then indexes past its end
        raise RuntimeError("Expected i < index_size to be true, but got false.  (Could this error message be improved?  "
                           "If so, please report an enhancement request to PyTorch.)")
    bag = creation.tensor(np.repeat(np.arange(len(sizes), dtype=np.int64), sizes), device=input.device,
                          dtype=input.dtype)
    return _ops.embedding_bag(weight, input, bag, len(sizes), mode, padding_idx, per_sample_weights,
                              scale_grad_by_freq, sparse)


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distance of every pair of rows ``i < j``, in row-major order."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(pdist, (input,), input, p=p)
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    i, j = np.triu_indices(input.shape[0], 1)
    if len(i) == 0:
        return creation.zeros((0,), dtype=input.dtype, device=input.device)
    a = input.index_select(0, creation.tensor(i, device=input.device))
    b = input.index_select(0, creation.tensor(j, device=input.device))
    return (a - b).norm(p, 1)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, size, scale_factor)):
        return handle_torch_function(upsample_nearest, (input, size, scale_factor), input, size=size,
                                     scale_factor=scale_factor)
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, size, scale_factor)):
        return handle_torch_function(upsample_bilinear, (input, size, scale_factor), input, size=size,
                                     scale_factor=scale_factor)
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- sampling grids
def _align_warning(align_corners):
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", stacklevel=3)
        return False
    return align_corners


def _base_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
    """ATen's ``linspace_from_neg_one``: a single point sits at the centre, 0 (not linspace's -1), and
    without ``align_corners`` the steps are scaled as ``range * (n - 1) / n``, two roundings."""
    if n <= 1:
        return creation.zeros(1, dtype=like.dtype, device=like.device)
    steps = creation.linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return steps if align_corners else steps * (n - 1) / n


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid ``(N, *spatial, nd)`` of the affine maps ``theta (N, nd, nd + 1)``, in
    ``grid_sample``'s normalised (x, y[, z]) coordinates."""
    if _DISPATCH.functions is not None and has_tensor_like((theta, size)):
        return handle_torch_function(affine_grid, (theta, size), theta, size, align_corners=align_corners)
    align_corners = _align_warning(align_corners)
    size = [int(s) for s in size]
    nd = len(size) - 2
    if nd not in (2, 3) or tuple(theta.shape[1:]) != (nd, nd + 1):
        raise ValueError(f"Expected a batch of {nd}D affine matrices of shape Nx{nd}x{nd + 1} for size "
                         f"{size}. Got {list(theta.shape)}.")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    spatial = size[2:]
    # columns x, y[, z], 1, with x running along the last spatial dim
    axes = [_base_coords(n, align_corners, theta) for n in reversed(spatial)]
    mesh = []
    for i, a in enumerate(axes):
        shape = [1] * nd
        shape[nd - 1 - i] = spatial[nd - 1 - i]
        mesh.append(a.reshape(shape).expand(*spatial))
    mesh.append(creation.ones(tuple(spatial), dtype=theta.dtype, device=theta.device))
    base = stack(mesh, -1).reshape(1, -1, nd + 1)
    return base.matmul(theta.transpose(1, 2)).reshape([size[0]] + spatial + [nd])


def _unnormalize(coord: Tensor, n: int, align_corners: bool) -> Tensor:
    return (coord + 1) / 2 * (n - 1) if align_corners else ((coord + 1) * n - 1) / 2


def _reflect(coord: Tensor, lo2: int, hi2: int) -> Tensor:
    """Reflect coordinates into ``[lo2/2, hi2/2]`` (twice the bounds, as PyTorch keeps them integral)."""
    if lo2 == hi2:
        return creation.zeros_like(coord)
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    c = (coord - lo).abs()
    flips = (c / span).floor()
    extra = c - flips * span
    even = (flips.remainder(2) == 0)
    return (extra + lo).where(even, span - extra + lo)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Sample ``input (N, C, *spatial)`` at the normalised points of ``grid (N, *out, nd)``: bilinear
    (trilinear for 5-d input), bicubic (4-d) or nearest interpolation, zeros/border/reflection padding."""
    if _DISPATCH.functions is not None and has_tensor_like((input, grid)):
        return handle_torch_function(grid_sample, (input, grid), input, grid, mode=mode, padding_mode=padding_mode,
                                     align_corners=align_corners)
    align_corners = _align_warning(align_corners)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in GRID_SAMPLE_PADDING_MODES:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    nd = input.ndim - 2
    if nd not in (2, 3) or grid.ndim != input.ndim or grid.shape[-1] != nd or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd} in last dimension and the same "
                           f"batch size as input, but got input with sizes {list(input.shape)} and grid with "
                           f"sizes {list(grid.shape)}")
    if mode == "bicubic" and nd != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    n, c = input.shape[:2]
    spatial = tuple(input.shape[2:])
    out_shape = tuple(grid.shape[1:-1])
    def padded(x, size):
        if padding_mode == "border":
            return x.clamp(0, size - 1)
        if padding_mode == "reflection":
            x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
            return x.clamp(0, size - 1)
        return x

    # per spatial dim (D, H, W order), (N, *out); bicubic pads each of its integer taps instead
    coords = [_unnormalize(grid[..., nd - 1 - d], spatial[d], align_corners) for d in range(nd)]
    if mode != "bicubic":
        coords = [padded(x, size) for x, size in zip(coords, spatial)]
    flat_in = input.reshape(n, c, -1)

    def gather(points):
        """Values at integer points (a list of (N, *out) index tensors), zero outside the input."""
        inside, flat = None, None
        for p, size in zip(points, spatial):
            ok = (p >= 0) & (p <= size - 1)
            inside = ok if inside is None else inside & ok
            q = p.clamp(0, size - 1)
            flat = q if flat is None else flat * size + q
        idx = flat.long().reshape(n, 1, -1).expand(n, c, flat[0].numel())
        vals = flat_in.gather(2, idx).reshape((n, c) + out_shape)
        return vals * inside.unsqueeze(1).to(input.dtype)

    if mode == "nearest":
        return gather([x.round() for x in coords])
    lows = [x.floor().detach() for x in coords]
    if mode == "bicubic":   # 4 x 4 taps, cubic convolution (a = -0.75) along each dim, as PyTorch's
        (y, x), (y0, x0) = coords, lows
        wy, wx = _cubic_weights(y - y0, -0.75), _cubic_weights(x - x0, -0.75)
        out = None
        for i, j in itertools.product(range(4), range(4)):
            term = gather([padded(y0 + (i - 1), spatial[0]), padded(x0 + (j - 1), spatial[1])]) \
                * (wy[i] * wx[j]).unsqueeze(1)
            out = term if out is None else out + term
        return out
    out = None
    for corner in itertools.product((0, 1), repeat=nd):
        points, weight = [], None
        for x, lo, up in zip(coords, lows, corner):
            w = (x - lo) if up else (lo + 1 - x)
            weight = w if weight is None else weight * w
            points.append(lo + up)
        term = gather(points) * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out


# ---------------------------------------------------------------- losses
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge: ``sum_{j != y} max(0, margin - x[y] + x[j])^p / C`` per sample."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight, size_average, reduce)):
        return handle_torch_function(multi_margin_loss, (input, target, weight, size_average, reduce), input, target,
                                     p=p, margin=margin, weight=weight, size_average=size_average, reduce=reduce,
                                     reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input.unsqueeze(0) if input.ndim <= 1 else input
    if x.ndim != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    t = target.reshape(-1, 1)
    c = x.shape[1]
    picked = x.gather(1, t)
    hinge = (x - picked + margin).clamp_min(0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight.index_select(0, t.reshape(-1)).unsqueeze(1)
    not_target = creation.ones_like(x).scatter(1, t, 0.0)
    loss = (hinge * not_target).sum(1) / c
    if input.ndim <= 1:
        loss = loss.reshape(target.shape) if target.ndim else loss.squeeze(0)
    return _reduce(loss, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """``sum over target j, non-target i of max(0, 1 - (x[j] - x[i])) / C``; ``target`` lists class
    indices and ends at the first -1."""
    if _DISPATCH.functions is not None and has_tensor_like((input, target, size_average, reduce)):
        return handle_torch_function(multilabel_margin_loss, (input, target, size_average, reduce), input, target,
                                     size_average=size_average, reduce=reduce, reduction=reduction)
    reduction = _reduction(size_average, reduce, reduction)
    x = input.unsqueeze(0) if input.ndim <= 1 else input
    t = target.reshape(x.shape).tolist()
    c = x.shape[1]
    is_target = np.zeros(x.shape, dtype=bool)
    for row, labels in enumerate(t):
        for lab in labels:
            if lab < 0:
                break
            is_target[row, lab] = True
    tgt = creation.tensor(is_target, device=x.device).to(x.dtype)
    pair = (1 - (x.unsqueeze(2) - x.unsqueeze(1))).clamp_min(0)       # [n, j, i]: 1 - (x_j - x_i)
    loss = (pair * tgt.unsqueeze(2) * (1 - tgt).unsqueeze(1)).sum((1, 2)) / c
    if input.ndim <= 1:
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with any distance (``pairwise_distance`` by default)."""
    if _DISPATCH.functions is not None and has_tensor_like((anchor, positive, negative, distance_function)):
        return handle_torch_function(triplet_margin_with_distance_loss, (anchor, positive, negative,
                                     distance_function), anchor, positive, negative,
                                     distance_function=distance_function, margin=margin, swap=swap,
                                     reduction=reduction)
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead")
    _check_reduction(reduction)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *, linear_bias: Tensor | None = None,
                         weight: Tensor | None = None, reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target)`` (PyTorch may chunk it to save
    memory; the values are the same)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, linear_weight, target, linear_bias, weight, options)):
        return handle_torch_function(linear_cross_entropy, (input, linear_weight, target, linear_bias, weight,
                                     options), input, linear_weight, target, linear_bias=linear_bias, weight=weight,
                                     reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing,
                                     options=options)
    logits = linear(input, linear_weight, linear_bias)
    return cross_entropy(logits, target, weight, ignore_index=-100 if ignore_index is None else ignore_index,
                         reduction=reduction, label_smoothing=label_smoothing)
