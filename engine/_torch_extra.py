"""The rest of the ``torch.*`` namespace that programs touch: the in-place function forms
(``torch.exp_(x)``), the ATen-style layer functions (``torch.conv_tbc``, ``torch.celu``, reductions
given as ints), window factories, ``*_copy`` forms of views, predicates on tensors and dtypes,
process-wide switches, and eager ``compile``/``cond``/``while_loop``/``fork`` (``vmap`` is ``func.vmap``).

Each is a thin function over public tapelab names (the engine's ops, ``nn.functional``); none
declares an op.
"""
from __future__ import annotations

import builtins
import math
import sys
import warnings
from typing import Generic, TypeVar

import numpy as np

from .base.dispatch_state import STATE as _DISPATCH
from .core.overrides import handle_torch_function, has_tensor_like
from .autograd import anomaly as _anomaly
from .base import dtype as _dtype
from .base import runtime as _runtime
from .core import creation
from .core.arguments import refuse_non_tensors
from .core.storage import UntypedStorage
from .core.tensor import Tensor
from . import compiler as _compiler
from . import kernels
from .nn import functional as F
from .nn.functional_core import _kl_div
from .ops.conjugation import view_as_complex, view_as_real

__all__ = []   # filled below: every public function defined or generated here
_range = builtins.range   # ``range`` below is torch.range


def _public(fn):
    __all__.append(fn.__name__)
    return fn


# ---------------------------------------------------------------- in-place function forms
# ``torch.exp_(x)`` is ``x.exp_()``: the Tensor method, called as a function
_INPLACE = ("abs_", "addmv_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
            "as_strided_", "asin_",
            "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "conj_physical_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
            "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_",
            "gcd_", "i0_", "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_",
            "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_",
            "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_")


def _method_as_function(name: str):
    def fn(input, *args, **kwargs):
        if _DISPATCH.functions is not None and has_tensor_like((input, *args, *kwargs.values())):
            return handle_torch_function(fn, (input, *args, *kwargs.values()), input, *args, **kwargs)
        try:
            method = getattr(input, name)
        except AttributeError:
            refuse_non_tensors(name, input)
            raise
        return method(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input.{name}(...)`` as a function, as ``torch.{name}``."
    return fn


for _name in _INPLACE:
    globals()[_name] = _public(_method_as_function(_name))

for _name in ("detach", "is_complex", "is_conj", "is_neg", "is_signed", "is_inference", "is_nonzero", "is_same_size",
              "get_device"):
    globals()[_name] = _public(_method_as_function(_name))


@_public
def is_distributed(input: Tensor) -> bool:
    """False: a tapelab tensor lives in one process."""
    return False


# ---------------------------------------------------------------- torch._check: asserts libraries write
@_public
def _check_with(error_type, cond, message=None) -> None:
    """Raise ``error_type(message())`` when the Python bool ``cond`` is False (``message`` is a callable,
    evaluated only on failure)."""
    if not isinstance(cond, builtins.bool):
        if isinstance(cond, Tensor):
            raise TypeError("cond must be a bool, but got a Tensor. For tensor conditions, use "
                            "torch._check_tensor_all() to assert that all elements are true.")
        raise TypeError(f"cond must be a bool, but got {type(cond)}")
    if cond:
        return
    if not issubclass(error_type, Exception) or issubclass(error_type, Warning):
        raise AssertionError(f"error_type must be a subclass of Exception but not Warning, got {error_type}")
    if message is None:
        raise error_type("Expected cond to be True, but got False. (Could this error message be improved? "
                         "If so, please report an enhancement request to PyTorch.)")
    if not callable(message):
        raise TypeError("message must be a callable")
    raise error_type(str(message()))


def _check_as(error_type, name: str):
    def fn(cond, message=None) -> None:
        _check_with(error_type, cond, message)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``_check_with({error_type.__name__}, cond, message)``, as ``torch.{name}``."
    return fn


for _name, _error in (("_check", RuntimeError), ("_check_index", IndexError), ("_check_value", ValueError),
                      ("_check_type", TypeError), ("_check_not_implemented", NotImplementedError)):
    globals()[_name] = _public(_check_as(_error, _name))


@_public
def _check_tensor_all_with(error_type, cond: Tensor, message=None) -> None:
    """``_check_with`` over every element of the bool tensor ``cond``."""
    if not isinstance(cond, Tensor) or cond.dtype is not _dtype.bool:
        raise TypeError(f"cond must be a tensor with dtype torch.bool, but got {getattr(cond, 'dtype', type(cond))}")
    _check_with(error_type, builtins.bool(cond.all().item()), message)


@_public
def _check_tensor_all(cond: Tensor, message=None) -> None:
    _check_tensor_all_with(RuntimeError, cond, message)


@_public
def _assert(condition, message) -> None:
    """Python's ``assert`` as a function, so fx can trace it (e3nn checks input shapes with it): a
    Proxy condition is recorded, anything else raises ``AssertionError(message)`` when false."""
    if type(condition) is not Tensor and _DISPATCH.functions is not None and has_tensor_like((condition,)):
        return handle_torch_function(_assert, (condition,), condition, message)
    if not condition:
        raise AssertionError(message)


@_public
def _assert_async(tensor: Tensor, assert_msg: str | None = None) -> None:
    """``assert tensor`` on a one-element tensor (kornia's value checks): every tapelab device runs in
    order with the host, so a zero raises here and now, as on PyTorch's CPU."""
    if not tensor.is_nonzero():
        raise RuntimeError(assert_msg or "Expected Tensor with single nonzero value, but got zero")


# ---------------------------------------------------------------- *_copy: a view's values as a new tensor
def _copy_of(view: str):
    def fn(input, *args, **kwargs):
        if _DISPATCH.functions is not None and has_tensor_like((input, *args, *kwargs.values())):
            return handle_torch_function(fn, (input, *args, *kwargs.values()), input, *args, **kwargs)
        try:
            out = getattr(input, view)(*args, **kwargs)
            return tuple(t.clone() for t in out) if isinstance(out, (tuple, list)) else out.clone()
        except (AttributeError, TypeError, ValueError):   # numpy's and str's methods of the same names
            refuse_non_tensors(fn.__name__, input)
            raise
    fn.__name__ = fn.__qualname__ = f"{view}_copy"
    fn.__doc__ = f"``input.{view}(...)`` copied out (no memory shared), as ``torch.{view}_copy``."
    return fn


for _view in ("as_strided", "detach", "diagonal", "expand", "permute", "select", "split", "split_with_sizes", "squeeze", "t",
              "transpose", "unbind", "unfold", "unsqueeze", "view"):
    globals()[f"{_view}_copy"] = _public(_copy_of(_view))
del _view


@_public
def view_as_real_copy(input: Tensor) -> Tensor:
    """``view_as_real(input)`` copied out, as ``torch.view_as_real_copy``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(view_as_real_copy, (input,), input)
    return view_as_real(input).clone()


@_public
def view_as_complex_copy(input: Tensor) -> Tensor:
    """``view_as_complex(input)`` copied out, as ``torch.view_as_complex_copy``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(view_as_complex_copy, (input,), input)
    return view_as_complex(input).clone()


@_public
def alias_copy(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(alias_copy, (input,), input)
    return input.clone()


@_public
def slice_copy(input: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(slice_copy, (input,), input, dim=dim, start=start, end=end, step=step)
    key = (slice(None),) * (dim % input.ndim) + (slice(start, end, step),)
    return input[key].clone()


# ---------------------------------------------------------------- ATen-style layer functions
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(r) -> str:
    return _REDUCTIONS[r] if isinstance(r, int) else r


@_public
def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_avg_pool1d, (input, output_size), input, output_size)
    return F.adaptive_avg_pool1d(input, output_size)


@_public
def adaptive_max_pool1d(input: Tensor, output_size) -> tuple:
    """``(values, indices)``: the ATen form always returns both."""
    if _DISPATCH.functions is not None and has_tensor_like((input, output_size)):
        return handle_torch_function(adaptive_max_pool1d, (input, output_size), input, output_size)
    return F.adaptive_max_pool1d(input, output_size, True)


@_public
def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, dilation, ceil_mode)):
        return handle_torch_function(max_pool1d_with_indices, (input, kernel_size, stride, padding, dilation,
                                     ceil_mode), input, kernel_size, stride=stride, padding=padding,
                                     dilation=dilation, ceil_mode=ceil_mode)
    return F.max_pool1d_with_indices(input, kernel_size, stride or None, padding, dilation, ceil_mode)


@_public
def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    if _DISPATCH.functions is not None and has_tensor_like((input, kernel_size, stride, padding, dilation, ceil_mode)):
        return handle_torch_function(max_pool3d, (input, kernel_size, stride, padding, dilation, ceil_mode), input,
                                     kernel_size, stride=stride, padding=padding, dilation=dilation,
                                     ceil_mode=ceil_mode)
    return F.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


@_public
def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(alpha_dropout, (input,), input, p, train)
    return F.alpha_dropout(input, p, train)


@_public
def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(alpha_dropout_, (input,), input, p, train)
    return F.alpha_dropout(input, p, train, inplace=True)


@_public
def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(feature_alpha_dropout, (input,), input, p, train)
    return F.feature_alpha_dropout(input, p, train)


@_public
def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(feature_alpha_dropout_, (input,), input, p, train)
    return F.feature_alpha_dropout(input, p, train, inplace=True)


@_public
def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Channel dropout (``dropout2d``'s rule for any rank >= 2)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(feature_dropout, (input,), input, p, train)
    return F.dropout2d(input, p, train) if input.ndim in (3, 4) else F.dropout1d(input, p, train) \
        if input.ndim == 2 else F.dropout3d(input, p, train)


@_public
def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(feature_dropout_, (input,), input, p, train)
    return input.copy_(feature_dropout(input, p, train))


@_public
def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(dropout_, (input,), input, p, train)
    return F.dropout(input, p, train, inplace=True)


for _name in ("bilinear", "celu", "celu_", "selu", "selu_", "channel_shuffle", "native_channel_shuffle", "conv3d",
              "conv_tbc", "conv_transpose1d", "conv_transpose3d", "hardshrink", "pairwise_distance", "pdist",
              "pixel_shuffle", "pixel_unshuffle", "prelu", "rrelu", "rrelu_", "threshold", "threshold_"):
    globals()[_name] = getattr(F, _name)
    __all__.append(_name)


@_public
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, weight, pos_weight, reduction)):
        return handle_torch_function(binary_cross_entropy_with_logits, (input, target, weight, pos_weight, reduction),
                                     input, target, weight=weight, pos_weight=pos_weight, reduction=reduction)
    return F.binary_cross_entropy_with_logits(input, target, weight, pos_weight=pos_weight,
                                              reduction=_reduction(reduction))


@_public
def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, reduction=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input1, input2, target, reduction)):
        return handle_torch_function(cosine_embedding_loss, (input1, input2, target, reduction), input1, input2,
                                     target, margin=margin, reduction=reduction)
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


@_public
def hinge_embedding_loss(input, target, margin: float = 1.0, reduction=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, reduction)):
        return handle_torch_function(hinge_embedding_loss, (input, target, reduction), input, target, margin=margin,
                                     reduction=reduction)
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


@_public
def kl_div(input, target, reduction=1, *, log_target: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, reduction)):
        return handle_torch_function(kl_div, (input, target, reduction), input, target, reduction=reduction,
                                     log_target=log_target)
    return _kl_div(input, target, _reduction(reduction), log_target)    # ATen's op: no reduction warning


@_public
def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input1, input2, target, reduction)):
        return handle_torch_function(margin_ranking_loss, (input1, input2, target, reduction), input1, input2, target,
                                     margin=margin, reduction=reduction)
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


@_public
def poisson_nll_loss(input, target, log_input: bool, full: bool, eps: float, reduction) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, target, reduction)):
        return handle_torch_function(poisson_nll_loss, (input, target, reduction), input, target, log_input, full,
                                     eps, reduction)
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


@_public
def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, reduction=1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((anchor, positive, negative, reduction)):
        return handle_torch_function(triplet_margin_loss, (anchor, positive, negative, reduction), anchor, positive,
                                     negative, margin=margin, p=p, eps=eps, swap=swap, reduction=reduction)
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


@_public
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction=1,
             zero_infinity: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((log_probs, targets, input_lengths, target_lengths, reduction)):
        return handle_torch_function(ctc_loss, (log_probs, targets, input_lengths, target_lengths, reduction),
                                     log_probs, targets, input_lengths, target_lengths, blank=blank,
                                     reduction=reduction, zero_infinity=zero_infinity)
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


@_public
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, running_mean, running_var)):
        return handle_torch_function(instance_norm, (input, weight, bias, running_mean, running_var), input, weight,
                                     bias, running_mean, running_var, use_input_stats, momentum, eps,
                                     cudnn_enabled=cudnn_enabled)
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


@_public
def rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, normalized_shape, weight, eps)):
        return handle_torch_function(rms_norm, (input, normalized_shape, weight, eps), input, normalized_shape,
                                     weight=weight, eps=eps)
    return F.rms_norm(input, normalized_shape, weight, eps)


@_public
def convolution(input, weight, bias, stride, padding, dilation, transposed: bool, output_padding, groups: int):
    """The one convolution entry point: the layer form picked by rank and ``transposed``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, weight, bias, stride, padding, dilation, output_padding)):
        return handle_torch_function(convolution, (input, weight, bias, stride, padding, dilation, output_padding),
                                     input, weight, bias, stride, padding, dilation, transposed, output_padding,
                                     groups)
    nd = weight.ndim - 2
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return (F.conv1d, F.conv2d, F.conv3d)[nd - 1](input, weight, bias, stride, padding, dilation, groups)


@_public
def affine_grid_generator(theta, size, align_corners: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((theta, size)):
        return handle_torch_function(affine_grid_generator, (theta, size), theta, size, align_corners)
    return F.affine_grid(theta, list(size), align_corners)


_GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@_public
def grid_sampler(input, grid, interpolation_mode: int, padding_mode: int, align_corners: bool) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, grid)):
        return handle_torch_function(grid_sampler, (input, grid), input, grid, interpolation_mode, padding_mode,
                                     align_corners)
    return F.grid_sample(input, grid, _GRID_MODES[interpolation_mode], _GRID_PADDING[padding_mode], align_corners)


@_public
def native_layer_norm(input, normalized_shape, weight, bias, eps: float) -> tuple:
    """``(output, mean, rstd)`` with the statistics kept over the normalised dims."""
    if _DISPATCH.functions is not None and has_tensor_like((input, normalized_shape, weight, bias)):
        return handle_torch_function(native_layer_norm, (input, normalized_shape, weight, bias), input,
                                     normalized_shape, weight, bias, eps)
    dims = tuple(_range(input.ndim - len(normalized_shape), input.ndim))
    x = input.detach()   # the statistics are not differentiable outputs (PyTorch's output_differentiability)
    cols = math.prod(x.shape[input.ndim - len(normalized_shape):])
    if x.dtype is _dtype.float32 and x.device.type == "cpu" and x.numel() and kernels.enabled() and not _DISPATCH.slow:
        rows = np.ascontiguousarray(x.numpy()).reshape(-1, cols)
        mean, rstd = np.empty(rows.shape[0], np.float32), np.empty(rows.shape[0], np.float32)
        kernels.loops("rowwise").layer_norm_stats(rows, np.float32(eps), mean, rstd)   # the forward's own numbers
        shape = tuple(x.shape[:input.ndim - len(normalized_shape)]) + (1,) * len(normalized_shape)
        mean, rstd = creation.tensor(mean).reshape(shape), creation.tensor(rstd).reshape(shape)
    else:
        mean = x.mean(dims, keepdim=True)
        rstd = (x.var(dims, unbiased=False, keepdim=True) + eps).rsqrt()
    return F.layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd


@_public
def native_dropout(input, p: float, train) -> tuple:
    """``(output, mask)``: the kept positions as a bool mask (all kept outside training)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, train)):
        return handle_torch_function(native_dropout, (input, train), input, p, train)
    if not train or p == 0:
        return input.clone(), creation.ones(tuple(input.shape), dtype=_dtype.bool, device=input.device)
    mask = creation.bernoulli(creation.full(tuple(input.shape), 1 - p, dtype=input.dtype, device=input.device)) > 0
    return input * mask.to(input.dtype) / (1 - p), mask


@_public
def frobenius_norm(input, dim=(), keepdim: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, dim)):
        return handle_torch_function(frobenius_norm, (input, dim), input, dim=dim, keepdim=keepdim)
    return input.norm("fro", dim if dim != () else None, keepdim)


@_public
def norm_except_dim(v, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm over every dim but ``dim`` (weight normalisation's helper); -1 means all dims."""
    if _DISPATCH.functions is not None and has_tensor_like((v,)):
        return handle_torch_function(norm_except_dim, (v,), v, pow=pow, dim=dim)
    if dim == -1:
        return v.norm(pow)
    others = tuple(i for i in _range(v.ndim) if i != dim)
    return v.norm(pow, others, keepdim=True)


def _gates(input, hx, w_ih, w_hh, b_ih, b_hh):
    out = F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh)
    return out


@_public
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, hx, w_ih, w_hh, b_ih, b_hh)):
        return handle_torch_function(rnn_tanh_cell, (input, hx, w_ih, w_hh, b_ih, b_hh), input, hx, w_ih, w_hh,
                                     b_ih=b_ih, b_hh=b_hh)
    return _gates(input, hx, w_ih, w_hh, b_ih, b_hh).tanh()


@_public
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input, hx, w_ih, w_hh, b_ih, b_hh)):
        return handle_torch_function(rnn_relu_cell, (input, hx, w_ih, w_hh, b_ih, b_hh), input, hx, w_ih, w_hh,
                                     b_ih=b_ih, b_hh=b_hh)
    return _gates(input, hx, w_ih, w_hh, b_ih, b_hh).relu()


@_public
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> tuple:
    """One LSTM step: gates in PyTorch's order (input, forget, cell, output)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, hx, w_ih, w_hh, b_ih, b_hh)):
        return handle_torch_function(lstm_cell, (input, hx, w_ih, w_hh, b_ih, b_hh), input, hx, w_ih, w_hh, b_ih=b_ih,
                                     b_hh=b_hh)
    h, c = hx
    i, f, g, o = _gates(input, h, w_ih, w_hh, b_ih, b_hh).chunk(4, -1)
    c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c2.tanh(), c2


@_public
def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor:
    """One GRU step: gates in PyTorch's order (reset, update, new)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, hx, w_ih, w_hh, b_ih, b_hh)):
        return handle_torch_function(gru_cell, (input, hx, w_ih, w_hh, b_ih, b_hh), input, hx, w_ih, w_hh, b_ih=b_ih,
                                     b_hh=b_hh)
    r_i, z_i, n_i = F.linear(input, w_ih, b_ih).chunk(3, -1)
    r_h, z_h, n_h = F.linear(hx, w_hh, b_hh).chunk(3, -1)
    r, z = (r_i + r_h).sigmoid(), (z_i + z_h).sigmoid()
    n = (n_i + r * n_h).tanh()
    return (1 - z) * n + z * hx


# ---------------------------------------------------------------- factories
def _window(name: str, length: int, periodic: bool, dtype, device, requires_grad, values):
    dtype = dtype or _dtype.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={length}")
    if length <= 1:
        out = creation.ones((length,), dtype=dtype, device=device)
    else:
        n = length + 1 if periodic else length
        out = creation.tensor(values(np.arange(n, dtype=np.float64), n)[:length], dtype=dtype, device=device)
    return out.requires_grad_(requires_grad) if requires_grad else out


@_public
def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((window_length,)):
        return handle_torch_function(hann_window, (window_length,), window_length, periodic=periodic, dtype=dtype,
                                     layout=layout, device=device, requires_grad=requires_grad, pin_memory=pin_memory)
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 0.5 - 0.5 * np.cos(2 * np.pi * k / (n - 1)))


@_public
def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *, dtype=None,
                   layout=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((window_length,)):
        return handle_torch_function(hamming_window, (window_length,), window_length, periodic=periodic, alpha=alpha,
                                     beta=beta, dtype=dtype, layout=layout, device=device,
                                     requires_grad=requires_grad, pin_memory=pin_memory)
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: alpha - beta * np.cos(2 * np.pi * k / (n - 1)))


@_public
def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((window_length,)):
        return handle_torch_function(blackman_window, (window_length,), window_length, periodic=periodic, dtype=dtype,
                                     layout=layout, device=device, requires_grad=requires_grad, pin_memory=pin_memory)
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 0.42 - 0.5 * np.cos(2 * np.pi * k / (n - 1)) + 0.08 * np.cos(4 * np.pi * k / (n - 1)))


@_public
def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((window_length,)):
        return handle_torch_function(bartlett_window, (window_length,), window_length, periodic=periodic, dtype=dtype,
                                     layout=layout, device=device, requires_grad=requires_grad, pin_memory=pin_memory)
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 1 - np.abs(2 * k / (n - 1) - 1))


@_public
def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((window_length,)):
        return handle_torch_function(kaiser_window, (window_length,), window_length, periodic=periodic, beta=beta,
                                     dtype=dtype, layout=layout, device=device, requires_grad=requires_grad,
                                     pin_memory=pin_memory)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: np.i0(beta * np.sqrt(np.clip(1 - (2 * k / (n - 1) - 1) ** 2, 0, None))) / np.i0(beta))


@_public
def range(start=0, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """``[start, end]`` *inclusive* in steps (deprecated in PyTorch, which warns; default dtype float)."""
    if _DISPATCH.functions is not None and has_tensor_like((start, end, step)):
        return handle_torch_function(range, (start, end, step), start=start, end=end, step=step, dtype=dtype,
                                     layout=layout, device=device, requires_grad=requires_grad)
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    count = int(math.floor((end - start) / step)) + 1
    values = start + np.arange(max(count, 0)) * step
    out = creation.tensor(values, dtype=dtype or _dtype.get_default_dtype(), device=device)
    return out.requires_grad_(True) if requires_grad else out


@_public
def asarray(obj, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool = False) -> Tensor:
    """``obj`` as a tensor, sharing memory when it already is one (or a NumPy array or, read as ``dtype``,
    an ``UntypedStorage``: safetensors reads a file's tensors so) and no copy is asked."""
    if isinstance(obj, UntypedStorage) and dtype is not None:
        out = creation.from_numpy(obj._host_bytes()).view(dtype)   # shared even with copy=True, as PyTorch's
        if device is not None:
            out = out.to(device)
    elif isinstance(obj, Tensor):
        out = obj
        if dtype is not None or device is not None:
            out = out.to(device=device, dtype=dtype)
        if copy and out is obj:
            out = obj.clone()
    elif isinstance(obj, np.ndarray) and not copy and device in (None, "cpu") and (
            dtype is None or str(obj.dtype) == str(dtype).split(".")[-1]):
        out = creation.from_numpy(obj)
    else:
        out = creation.tensor(obj, dtype=dtype, device=device)
    return out.requires_grad_(True) if requires_grad else out


@_public
def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-d tensor over the bytes of a Python buffer (shared where the buffer is writable)."""
    array = np.frombuffer(buffer, dtype=str(dtype).split(".")[-1], count=count, offset=offset)
    if not array.flags.writeable:
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor. You "
                      "may want to copy the buffer to protect its data or make it writable before converting it to a "
                      "tensor. This type of warning will be suppressed for the rest of this program.", UserWarning,
                      stacklevel=2)
        array = array.copy()
    out = creation.from_numpy(array)
    return out.requires_grad_(True) if requires_grad else out


@_public
def fill(input: Tensor, value) -> Tensor:
    """A copy of ``input`` with every element ``value``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, value)):
        return handle_torch_function(fill, (input, value), input, value)
    return input.clone().fill_(value)


# ---------------------------------------------------------------- predicates and names
_LEGACY = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
           "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
           "uint8": "ByteTensor", "bool": "BoolTensor"}


@_public
def typename(obj) -> str:
    """``'torch.FloatTensor'`` for a float32 cpu tensor (``torch.cuda.`` on cuda); else the type's name."""
    if isinstance(obj, Tensor):
        prefix = "torch.cuda." if obj.device.type == "cuda" else "torch."
        return prefix + _LEGACY.get(str(obj.dtype).split(".")[-1], "Tensor")
    module = type(obj).__module__
    return type(obj).__qualname__ if module in ("builtins", "__builtin__", None) else \
        f"{module}.{type(obj).__qualname__}"


@_public
def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` -> ``to`` (never to a lower category:
    complex > floating > integer > bool)."""
    return _dtype.can_cast(from_, to)


@_public
def is_storage(obj) -> bool:
    """False: tapelab keeps no Storage objects apart from tensors."""
    return False


@_public
def is_vulkan_available() -> bool:
    return False


newaxis = None
has_lapack = True          # numpy/scipy's LAPACK does tapelab's linear algebra
has_mkl = False
has_openmp = False
has_spectral = True        # torch.fft
__all__ += ["newaxis", "has_lapack", "has_mkl", "has_openmp", "has_spectral"]


# ---------------------------------------------------------------- process-wide switches
@_public
def is_anomaly_enabled() -> bool:
    return _anomaly.is_anomaly_enabled()


@_public
def is_anomaly_check_nan_enabled() -> bool:
    return _anomaly.is_anomaly_check_nan_enabled()


@_public
def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    _anomaly.set_detect_anomaly(enabled, check_nan)


_SWITCHES = {"interop_threads": 1, "warn_always": False, "debug_mode": 0, "warn_only": False}


@_public
def get_num_interop_threads() -> int:
    """Inter-op threads: tapelab runs ops one after another, so 1 unless set."""
    return _SWITCHES["interop_threads"]


@_public
def set_num_interop_threads(n: int) -> None:
    if n <= 0:
        raise RuntimeError("Expected positive number of threads")
    _SWITCHES["interop_threads"] = int(n)


@_public
def init_num_threads() -> None:
    """Nothing to initialise: numpy's BLAS pool starts with the process."""


@_public
def set_flush_denormal(mode: bool) -> bool:
    """False: flushing denormals is not supported (numpy cannot set the FPU's flush-to-zero mode)."""
    return False


@_public
def set_warn_always(b: bool) -> None:
    """When True, tapelab's warnings repeat every time instead of once per place."""
    _SWITCHES["warn_always"] = bool(b)
    if b:
        warnings.filterwarnings("always", module="tapelab")
    else:
        warnings.filters[:] = [f for f in warnings.filters if not (f[0] == "always" and f[3] is not None and
                                                                  getattr(f[3], "pattern", "") == "tapelab")]


@_public
def is_warn_always_enabled() -> bool:
    return _SWITCHES["warn_always"]


@_public
def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default", 1/"warn", 2/"error": as ``use_deterministic_algorithms`` (tapelab's ops are deterministic)."""
    names = {"default": 0, "warn": 1, "error": 2}
    mode = names[debug_mode] if isinstance(debug_mode, str) else int(debug_mode)
    if mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    _SWITCHES["debug_mode"], _SWITCHES["warn_only"] = mode, mode == 1
    _runtime.use_deterministic_algorithms(mode != 0, warn_only=mode == 1)


@_public
def get_deterministic_debug_mode() -> int:
    return _SWITCHES["debug_mode"] if _runtime.are_deterministic_algorithms_enabled() else 0


@_public
def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _runtime.are_deterministic_algorithms_enabled() and _SWITCHES["warn_only"]


@_public
def set_default_tensor_type(t) -> None:
    """Deprecated in PyTorch: sets the default dtype from a tensor type (``torch.DoubleTensor`` or its name)."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    legacy = {v: k for k, v in _LEGACY.items()}
    dtype = legacy.get(name.split(".")[-1])
    if dtype is None or not getattr(_dtype, dtype).is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type (got {name})")
    _dtype.set_default_dtype(getattr(_dtype, dtype))


# ---------------------------------------------------------------- eager control flow and transforms
@_public
def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="tapelab", mode=None, options=None,
            disable: bool = False):
    """``torch.compile``: fusible groups of ``model`` become one kernel each, forward and backward
    (``tapelab.compiler.compile``). Usable as ``torch.compile(model)`` and as ``@torch.compile(...)``."""
    return _compiler.compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                             options=options, disable=disable)


@_public
def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``, run eagerly."""
    if _DISPATCH.functions is not None and has_tensor_like((pred, true_fn, false_fn, operands)):
        return handle_torch_function(cond, (pred, true_fn, false_fn, operands), pred, true_fn, false_fn,
                                     operands=operands)
    take = bool(pred.item()) if isinstance(pred, Tensor) else bool(pred)
    return (true_fn if take else false_fn)(*operands)


@_public
def while_loop(cond_fn, body_fn, carried_inputs):
    """Apply ``body_fn`` to the carried values while ``cond_fn`` holds, eagerly."""
    if _DISPATCH.functions is not None and has_tensor_like((cond_fn, body_fn, carried_inputs)):
        return handle_torch_function(while_loop, (cond_fn, body_fn, carried_inputs), cond_fn, body_fn, carried_inputs)
    carried = tuple(carried_inputs)
    while True:
        c = cond_fn(*carried)
        if not (bool(c.item()) if isinstance(c, Tensor) else bool(c)):
            return carried
        out = body_fn(*carried)
        carried = tuple(out) if isinstance(out, (tuple, list)) else (out,)


_T = TypeVar("_T")


class Future(Generic[_T]):
    """The result of ``torch.jit.fork``-style work; tapelab runs the work at once, so a Future is
    always done and ``wait()`` returns its value (or raises its error). Generic, as PyTorch's: code
    annotates with ``Future[Tensor]``."""

    def __init__(self, *, devices=None):
        self._value, self._error, self._done, self._callbacks = None, None, False, []

    def done(self) -> bool:
        return self._done

    def set_result(self, result) -> None:
        self._value, self._done = result, True
        for cb in self._callbacks:
            cb(self)

    def set_exception(self, error: BaseException) -> None:
        self._error, self._done = error, True

    def wait(self):
        if self._error is not None:
            raise self._error
        return self._value

    value = wait

    def then(self, callback) -> "Future":
        nxt = Future()
        nxt.set_result(callback(self))
        return nxt

    def add_done_callback(self, callback) -> None:
        callback(self)


__all__.append("Future")


@_public
def fork(func, *args, **kwargs) -> Future:
    """Run ``func`` now and return a finished ``Future`` holding its result."""
    fut = Future()
    try:
        fut.set_result(func(*args, **kwargs))
    except Exception as e:  # the error surfaces at wait(), as with an asynchronous fork
        fut.set_exception(e)
    return fut


@_public
def wait(future: Future):
    return future.wait()


class OutOfMemoryError(RuntimeError):
    """Raised when a device runs out of memory (``torch.OutOfMemoryError``)."""


class AcceleratorError(RuntimeError):
    """An error reported by an accelerator's runtime (``torch.AcceleratorError``)."""


class FatalError(Exception):
    """An unrecoverable internal error (``torch.FatalError``)."""


__all__ += ["OutOfMemoryError", "AcceleratorError", "FatalError"]


# ---------------------------------------------------------------- symbolic sizes
class _Symbolic:
    """A symbolic size of PyTorch's tracers. tapelab traces with concrete sizes, so nothing is ever one:
    the types exist for ``isinstance(n, (int, torch.SymInt))`` (kornia checks sizes so)."""

    def __init__(self, node) -> None:
        raise TypeError(f"{type(self).__name__}: tapelab has no symbolic sizes (its tracers record concrete ones)")


class SymInt(_Symbolic):
    """``torch.SymInt``."""


class SymFloat(_Symbolic):
    """``torch.SymFloat``."""


class SymBool(_Symbolic):
    """``torch.SymBool``."""


__all__ += ["SymInt", "SymFloat", "SymBool"]

# The sym_* helpers library code calls on sizes (PyTorch's work on symbolic ones too); on the plain
# numbers tapelab's sizes always are they are Python's own operations, with PyTorch's checks.
_NUMBER = (np.integer, np.floating, int, float)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _numbers(*values) -> bool:
    """Whether any of ``values`` is a float (the result of a max or min is then one)."""
    for v in values:
        if not isinstance(v, _NUMBER):
            raise AssertionError(f"expected {_NUMBER}, got {type(v)}")
    return any(isinstance(v, (float, np.floating)) for v in values)


@_public
def sym_int(a) -> int:
    """``int(a)``, truncating a float toward zero."""
    return math.trunc(a) if isinstance(a, (float, np.floating)) else int(a)


@_public
def sym_float(a) -> float:
    return float(a)


@_public
def sym_max(a, b):
    """``max(a, b)``, a float when either is one (PyTorch's promotion, unlike ``builtins.max``)."""
    return float(builtins.max(a, b)) if _numbers(a, b) else builtins.max(a, b)


@_public
def sym_min(a, b):
    """``min(a, b)``, a float when either is one."""
    return float(builtins.min(a, b)) if _numbers(a, b) else builtins.min(a, b)


@_public
def sym_not(a) -> bool:
    return not a


@_public
def sym_ite(b, t, f):
    """``t if b else f``: ``b`` a bool, ``t`` and ``f`` of one type."""
    if not isinstance(b, (bool, np.bool_)):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    return t if b else f


@_public
def sym_sqrt(a) -> float:
    return math.sqrt(a)


@_public
def sym_sum(args):
    return builtins.sum(args)


@_public
def sym_fresh_size(expr):
    return expr


@_public
def sym_constrain_range(size, *, min=None, max=None) -> None:
    """Refuse a concrete ``size`` outside ``[min, max]`` (an unbounded side is int64's end)."""
    lo, hi = _INT64[0] if min is None else min, _INT64[1] if max is None else max
    if not lo <= size <= hi:
        raise RuntimeError(f"Invalid value range for {size} between [{lo}, {hi}].")


@_public
def sym_constrain_range_for_size(size, *, min=None, max=None) -> None:
    """``sym_constrain_range`` for a size: ``min`` defaults to 0."""
    sym_constrain_range(size, min=0 if min is None else min, max=max)


@_public
def compiled_with_cxx11_abi() -> bool:
    """True, as PyTorch's wheels since 2.6 (build scripts and extension loaders ask)."""
    return True


# ``torch.torch`` is the package itself, as in PyTorch (kornia annotates ``List[torch.torch.Tensor]``)
torch = sys.modules[__package__]
__all__.append("torch")
