"""Observers: modules that watch the tensors passing through and choose a scale and zero point for them.

Written over tapelab's Tensor ops in the order PyTorch's observers compute (float32 buffers, the same
min/max updates and qparams formulas), so ``calculate_qparams()`` gives PyTorch's numbers bit for bit.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any

from ...base import dtype as _dt
from ...core.creation import arange, linspace, ones, tensor, zeros, zeros_like
from ...core.tensor import Tensor
from ...nn.modules.module import Module
from ...ops.stats import aminmax, bincount, bucketize, histc

__all__ = ["ObserverBase", "UniformQuantizationObserverBase", "MinMaxObserver", "MovingAverageMinMaxObserver",
           "HistogramObserver", "default_histogram_observer",
           "PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver", "PlaceholderObserver", "NoopObserver",
           "default_observer", "default_weight_observer", "default_per_channel_weight_observer",
           "default_placeholder_observer", "default_dynamic_quant_observer", "default_float_qparams_observer",
           "default_debug_observer", "per_channel_weight_observer_range_neg_127_to_127",
           "weight_observer_range_neg_127_to_127", "calculate_qmin_qmax", "validate_qmin_qmax", "check_min_max_valid"]

_EPS = float(_dt.finfo(_dt.float32).eps)
_PER_TENSOR = (_dt.per_tensor_affine, _dt.per_tensor_symmetric)
_PER_CHANNEL = (_dt.per_channel_affine, _dt.per_channel_symmetric, _dt.per_channel_affine_float_qparams)
_SYMMETRIC = (_dt.per_tensor_symmetric, _dt.per_channel_symmetric)


class _PartialWrapper:
    """``Cls.with_args(**kw)``: a factory that makes ``Cls(**kw)`` on each call (QConfig holds these)."""

    def __init__(self, p: functools.partial) -> None:
        self.p = p
        self.callable_args: dict = {}

    def __call__(self, *args, **keywords):
        for name, make in self.callable_args.items():
            keywords.setdefault(name, make())
        return self.p(*args, **keywords)

    def __repr__(self) -> str:
        return self.p.__repr__() + self.callable_args.__repr__()

    def with_args(self, **kwargs) -> _PartialWrapper:
        return _with_args(self, **kwargs)

    def with_callable_args(self, **kwargs) -> _PartialWrapper:
        made = _PartialWrapper(self.p)
        made.callable_args = {**self.callable_args, **kwargs}
        return made


def _with_args(cls_or_self, **kwargs) -> _PartialWrapper:
    return _PartialWrapper(functools.partial(cls_or_self, **kwargs))


def _with_callable_args(cls_or_self, **kwargs) -> _PartialWrapper:
    return _PartialWrapper(functools.partial(cls_or_self)).with_callable_args(**kwargs)


def validate_qmin_qmax(quant_min: int, quant_max: int) -> None:
    """A user range must contain 0 and not be empty."""
    if not quant_min <= 0 <= quant_max:
        raise AssertionError("Used-specified quantization range must include 0.")
    if quant_min >= quant_max:
        raise AssertionError("qmin must be strictly less than qmax for user-specified quantization range.")


def calculate_qmin_qmax(quant_min: int | None, quant_max: int | None, has_customized_qrange: bool, dtype,
                        reduce_range: bool) -> tuple[int, int]:
    """The integer range actually used: the user's (halved by ``reduce_range``) or the dtype's."""
    if has_customized_qrange:
        length = quant_max - quant_min + 1
        if dtype in (_dt.qint8, _dt.int8) and not 0 < length <= 256:
            raise AssertionError("quantization range should be positive and not exceed the maximum bit range (=256).")
        if dtype in (_dt.qint32, _dt.int32) and not 0 < length <= 2 ** 32:
            raise AssertionError("quantization range should be positive and not exceed the maximum bit range "
                                 "(=4294967296).")
        return (quant_min // 2, quant_max // 2) if reduce_range else (quant_min, quant_max)
    if dtype in (_dt.qint8, _dt.int8):
        return (-64, 63) if reduce_range else (-128, 127)
    if dtype in (_dt.quint8, _dt.uint8):
        return (0, 127) if reduce_range else (0, 255)
    if dtype in (_dt.qint32, _dt.int32):
        return -(2 ** 31), 2 ** 31 - 1
    if dtype is _dt.uint16:
        return 0, 2 ** 16 - 1
    if dtype is _dt.int16:
        return -(2 ** 15), 2 ** 15 - 1
    return 0, 15


def check_min_max_valid(min_val: Tensor, max_val: Tensor) -> bool:
    """Whether the observer has seen data (else PyTorch warns and uses scale 1, zero point 0)."""
    unseen = min_val.numel() == 0 or max_val.numel() == 0 or (
        (min_val.dim() == 0 or max_val.dim() == 0) and bool(min_val == float("inf")) and bool(max_val == float("-inf")))
    if unseen:
        warnings.warn("must run observer before calling calculate_qparams. Returning default values.", stacklevel=3)
        return False
    if bool((min_val > max_val).any()):
        raise AssertionError(f"min {min_val} should be less than max {max_val}")
    return True


class ObserverBase(Module):
    """Base of the observers: records ``dtype`` (the quantized dtype aimed at) and ``is_dynamic``."""

    def __init__(self, dtype, is_dynamic: bool = False) -> None:
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    def forward(self, x):
        raise NotImplementedError

    def calculate_qparams(self, **kwargs):
        raise NotImplementedError

    with_args = classmethod(_with_args)
    with_callable_args = classmethod(_with_callable_args)


_ALLOWED_DTYPES = (_dt.qint8, _dt.quint8, _dt.quint4x2, _dt.qint32, _dt.int8, _dt.uint8, _dt.int16, _dt.int32,
                   _dt.float8_e5m2, _dt.float8_e4m3fn, _dt.uint16)


class UniformQuantizationObserverBase(ObserverBase):
    """Observers of a uniform (affine or symmetric) quantization: the range and the qparams formulas."""

    def __init__(self, dtype=_dt.quint8, qscheme=_dt.per_tensor_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None, factory_kwargs=None,
                 eps: float = _EPS, is_dynamic: bool = False, **kwargs) -> None:
        super().__init__(dtype=dtype, is_dynamic=is_dynamic, **kwargs)
        self.qscheme = qscheme
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for observers.                     "
                          "reduce_range will be deprecated in a future release of PyTorch.", stacklevel=2)
        self.reduce_range = reduce_range
        self.register_buffer("eps", tensor([eps], **(factory_kwargs or {})))
        if qscheme not in _PER_TENSOR + _PER_CHANNEL:
            raise AssertionError("Default Observer only works for per_tensor_affine, per_tensor_symmetric, "
                                 "per_channel_affine, per_channel_symmetric and per_channel_float_qparams "
                                 "quantization scheme")
        if dtype not in _ALLOWED_DTYPES:
            raise AssertionError(f"Default Observer only works for ({', '.join(map(repr, _ALLOWED_DTYPES))}) data "
                                 f"type")
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        if self.has_customized_qrange:
            validate_qmin_qmax(quant_min, quant_max)
        self.quant_min, self.quant_max = calculate_qmin_qmax(quant_min, quant_max, self.has_customized_qrange,
                                                             dtype, reduce_range)

    def _calculate_qparams(self, min_val: Tensor, max_val: Tensor) -> tuple[Tensor, Tensor]:
        """Scale and zero point per channel (or one each) for the range ``[min_val, max_val]`` widened to 0."""
        if not check_min_max_valid(min_val, max_val):
            return tensor([1.0]), tensor([0])
        quant_min, quant_max = self.quant_min, self.quant_max
        min_neg = min_val.minimum(zeros_like(min_val))
        max_pos = max_val.maximum(zeros_like(max_val))
        zero_point = zeros(min_neg.shape, dtype=_dt.int64)
        if self.qscheme in _SYMMETRIC:
            max_pos = (-min_neg).maximum(max_pos)
            scale = (max_pos / (float(quant_max - quant_min) / 2)).maximum(self.eps)
            if self.dtype in (_dt.quint8, _dt.uint8):
                middle = (quant_min + quant_max) // 2 if self.has_customized_qrange else 128
                zero_point = zero_point.new_full(zero_point.shape, middle)
            elif self.dtype is _dt.uint16:
                zero_point = zero_point.new_full(zero_point.shape, 2 ** 15)
        elif self.qscheme is _dt.per_channel_affine_float_qparams:
            scale = (max_val - min_val) / float(quant_max - quant_min)
            scale = scale.where(scale > self.eps, ones(scale.shape))
            zero_point = -1 * min_val / scale
        else:
            scale = ((max_pos - min_neg) / float(quant_max - quant_min)).maximum(self.eps)
            zero_point = quant_min - (min_neg / scale).round().to(_dt.int32)
            zero_point = zero_point.clamp(quant_min, quant_max)
        if scale.dim() == 0:
            scale = tensor([float(scale)], dtype=scale.dtype)
        if zero_point.dim() == 0:
            zero_point = tensor([float(zero_point) if zero_point.dtype.is_floating_point else int(zero_point)],
                                dtype=zero_point.dtype)
        return scale, zero_point

    def reset_min_max_vals(self):
        raise NotImplementedError("Cannot reset min/max values in the given observer.")


def _per_tensor_check(name: str, qscheme) -> None:
    if qscheme not in _PER_TENSOR:
        raise NotImplementedError(f"{name}'s qscheme only support torch.per_tensor_symmetric                     "
                                  f"and torch.per_tensor_affine.")


def _per_channel_check(name: str, qscheme, is_dynamic: bool) -> None:
    if qscheme not in _PER_CHANNEL:
        raise NotImplementedError(f"{name}'s qscheme only support                     torch.per_channel_symmetric, "
                                  f"torch.per_channel_affine and torch.per_channel_affine_float_qparams.")
    if is_dynamic:
        raise NotImplementedError(f"{name} doesn't support dynamic quantization")


def _unsupported_symmetric_reduce(observer: UniformQuantizationObserverBase, symmetric, gap: str) -> None:
    if observer.qscheme is symmetric and observer.reduce_range and observer.dtype is _dt.quint8:
        raise NotImplementedError(f"Cannot reduce range for symmetric{gap}quantization for quint8")


class _MinMaxBuffers(UniformQuantizationObserverBase):
    """An observer whose range is its ``min_val`` and ``max_val`` buffers (one pair, or one per channel)."""

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class MinMaxObserver(_MinMaxBuffers):
    """The running minimum and maximum of everything seen (one pair per tensor)."""

    def __init__(self, dtype=_dt.quint8, qscheme=_dt.per_tensor_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None, factory_kwargs=None,
                 eps: float = _EPS, is_dynamic: bool = False, **kwargs) -> None:
        _per_tensor_check(type(self).__name__, qscheme)
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.register_buffer("min_val", tensor(float("inf"), **(factory_kwargs or {})))
        self.register_buffer("max_val", tensor(float("-inf"), **(factory_kwargs or {})))
        _unsupported_symmetric_reduce(self, _dt.per_tensor_symmetric, " " * 40)

    def _update(self, x: Tensor) -> tuple[Tensor, Tensor]:
        lo, hi = aminmax(x)
        return lo.minimum(self.min_val), hi.maximum(self.max_val)

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._update(x_orig.detach().to(self.min_val.dtype))
        self.min_val.copy_(lo)
        self.max_val.copy_(hi)
        return x_orig

    def reset_min_max_vals(self) -> None:
        self.min_val.copy_(tensor(float("inf")))
        self.max_val.copy_(tensor(float("-inf")))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Min and max as exponential moving averages (``averaging_constant``) of each batch's."""

    def __init__(self, averaging_constant: float = 0.01, dtype=_dt.quint8, qscheme=_dt.per_tensor_affine,
                 reduce_range: bool = False, quant_min: int | None = None, quant_max: int | None = None,
                 eps: float = _EPS, is_dynamic: bool = False, **kwargs) -> None:
        if qscheme not in _PER_TENSOR:
            raise NotImplementedError(f"MovingAverageMinMaxObserver's qscheme only support                 "
                                      f"torch.per_tensor_symmetric and torch.per_tensor_affine.                 "
                                      f"but got: {qscheme}")
        self.averaging_constant = averaging_constant
        if is_dynamic and averaging_constant != 1:
            raise NotImplementedError(f"MovingAverageMinMaxObserver doesn't support dynamic quantization for "
                                      f"averaging constant of {averaging_constant}")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, eps=eps, is_dynamic=is_dynamic, **kwargs)

    def _update(self, x: Tensor) -> tuple[Tensor, Tensor]:
        lo, hi = aminmax(x)
        if bool(self.min_val == float("inf")) and bool(self.max_val == float("-inf")):
            return lo, hi
        c = self.averaging_constant
        return self.min_val + c * (lo - self.min_val), self.max_val + c * (hi - self.max_val)


class PerChannelMinMaxObserver(_MinMaxBuffers):
    """The running minimum and maximum of each slice along ``ch_axis``."""

    def __init__(self, ch_axis: int = 0, dtype=_dt.quint8, qscheme=_dt.per_channel_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None, factory_kwargs=None,
                 eps: float = _EPS, is_dynamic: bool = False, **kwargs) -> None:
        _per_channel_check("PerChannelMinMaxObserver", qscheme, is_dynamic)
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", tensor([], **(factory_kwargs or {})))
        self.register_buffer("max_val", tensor([], **(factory_kwargs or {})))
        _unsupported_symmetric_reduce(self, _dt.per_channel_symmetric, " ")

    def _rows(self, x: Tensor) -> Tensor:
        """``x`` with ``ch_axis`` swapped to the front, one row per channel."""
        order = list(range(x.dim()))
        order[self.ch_axis], order[0] = 0, self.ch_axis
        return x.permute(order).to(self.min_val.dtype).flatten(start_dim=1)

    def _combine(self, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        return lo.minimum(self.min_val), hi.maximum(self.max_val)

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = aminmax(self._rows(x_orig.detach()), dim=1)
        if self.min_val.numel() and self.max_val.numel():
            lo, hi = self._combine(lo, hi)
        self.min_val.resize_(lo.shape)
        self.max_val.resize_(hi.shape)
        self.min_val.copy_(lo)
        self.max_val.copy_(hi)
        return x_orig

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        # the buffers' length is the channel count, known only once observed: take the checkpoint's
        for name in ("min_val", "max_val"):
            if prefix + name in state_dict:
                getattr(self, name).resize_(state_dict[prefix + name].shape)
            elif strict:
                missing_keys.append(prefix + name)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, unexpected_keys,
                                      error_msgs)

    def reset_min_max_vals(self) -> None:
        self.min_val = tensor([])
        self.max_val = tensor([])


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """Per-channel min and max as exponential moving averages of each batch's."""

    def __init__(self, averaging_constant: float = 0.01, ch_axis: int = 0, dtype=_dt.quint8,
                 qscheme=_dt.per_channel_affine, reduce_range: bool = False, quant_min: int | None = None,
                 quant_max: int | None = None, eps: float = _EPS, is_dynamic: bool = False, **kwargs) -> None:
        _per_channel_check("MovingAveragePerChannelMinMaxObserver", qscheme, is_dynamic)
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def _combine(self, lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        c = self.averaging_constant
        return self.min_val + c * (lo - self.min_val), self.max_val + c * (hi - self.max_val)


class HistogramObserver(UniformQuantizationObserverBase):
    """A histogram of everything seen (``bins`` bins over the running min/max, re-binned as the range grows);
    the qparams come from the sub-range whose quantization error (L2, estimated from the histogram) is least."""

    def __init__(self, bins: int = 2048, dtype=_dt.quint8, qscheme=_dt.per_tensor_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None, factory_kwargs=None,
                 eps: float = _EPS, is_dynamic: bool = False, **kwargs) -> None:
        _per_tensor_check("HistogramObserver", qscheme)
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.bins = bins
        self.register_buffer("histogram", zeros(bins, **(factory_kwargs or {})))
        self.register_buffer("min_val", tensor(float("inf"), **(factory_kwargs or {})))
        self.register_buffer("max_val", tensor(float("-inf"), **(factory_kwargs or {})))
        self.dst_nbins = 2 ** _dt.iinfo(dtype).bits
        self.upsample_rate = 16   # each old bin spread over 16 points when the range grows

    @staticmethod
    def _get_norm(delta_begin: Tensor, delta_end: Tensor, density: Tensor) -> Tensor:
        """The integral of the squared error over [delta_begin, delta_end], times the density."""
        return density * ((delta_end * delta_end * delta_end - delta_begin * delta_begin * delta_begin) / 3)

    def _compute_quantization_error(self, next_start_bin: int, next_end_bin: int) -> float:
        """The L2 error of quantizing the histogram with ``dst_nbins`` levels over bins start..end."""
        bin_width = (self.max_val.item() - self.min_val.item()) / self.bins
        dst_width = bin_width * (next_end_bin - next_start_bin + 1) / self.dst_nbins
        if dst_width == 0.0:
            return 0.0
        begin = (arange(self.bins) - next_start_bin) * bin_width
        end = begin + bin_width
        dst_of_begin = begin.div(dst_width, rounding_mode="floor").clamp(0, self.dst_nbins - 1)
        dst_of_end = end.div(dst_width, rounding_mode="floor").clamp(0, self.dst_nbins - 1)
        density = self.histogram / bin_width
        norm = zeros(self.bins)
        norm += self._get_norm(begin - (dst_of_begin + 0.5) * dst_width, ones(self.bins) * (dst_width / 2), density)
        norm += (dst_of_end - dst_of_begin - 1) * self._get_norm(tensor(-dst_width / 2), tensor(dst_width / 2),
                                                                  density)
        norm += self._get_norm(tensor(-dst_width / 2), end - (dst_of_end * dst_width + dst_width / 2), density)
        return norm.sum().item()

    def _non_linear_param_search(self) -> tuple[Tensor, Tensor]:
        """Shrink [start_bin, end_bin] from whichever side holds less mass (1e-5 of the total at a time) while
        the quantization error keeps falling."""
        if self.histogram.shape[0] != self.bins:
            raise AssertionError("bins mismatch")
        bin_width = (self.max_val - self.min_val) / self.bins
        total = self.histogram.sum().item()
        csum = self.histogram.cumsum(dim=0)
        alpha, beta, step = 0.0, 1.0, 1e-5
        start_bin, end_bin = 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + step, beta - step
            left, right = start_bin, end_bin
            while left < end_bin and csum[left] < next_alpha * total:
                left += 1
            while right > start_bin and csum[right] > next_beta * total:
                right -= 1
            next_start, next_end = start_bin, end_bin
            if left - start_bin > end_bin - right:
                next_start, alpha = left, next_alpha
            else:
                next_end, beta = right, next_beta
            if next_start == start_bin and next_end == end_bin:
                continue
            norm = self._compute_quantization_error(next_start, next_end)
            if norm > norm_min:
                break
            norm_min, start_bin, end_bin = norm, next_start, next_end
        return self.min_val + bin_width * start_bin, self.min_val + bin_width * (end_bin + 1)

    def _upscale_histogram(self, histogram: Tensor, orig_min: Tensor, orig_max: Tensor, update_min: Tensor,
                           update_max: Tensor) -> Tensor:
        """``histogram`` over [orig_min, orig_max] re-binned onto [update_min, update_max]: each bin split into
        ``upsample_rate`` points at their midpoints, each point's mass added to the new bin it falls in."""
        rate = self.upsample_rate
        histogram = histogram.repeat_interleave(rate) / rate
        bin_size = (orig_max - orig_min) / (self.bins * rate)
        mids = linspace(orig_min, orig_max, self.bins * rate + 1)[:-1] + 0.5 * bin_size
        bounds = linspace(update_min, update_max, self.bins + 1)
        buckets = (bucketize(mids, bounds, right=True) - 1).clamp(0, self.bins - 1)
        return bincount(buckets, weights=histogram, minlength=self.bins)

    def _combine_histograms(self, orig_hist: Tensor, orig_min: Tensor, orig_max: Tensor, update_hist: Tensor,
                            update_min: Tensor, update_max: Tensor) -> Tensor:
        if bool(update_min == orig_min) and bool(update_max == orig_max):
            return orig_hist + update_hist
        if bool(orig_min == orig_max):
            moved = histc(orig_min, bins=self.bins, min=update_min, max=update_max) * orig_hist.sum()
            return moved + update_hist
        if bool(update_min > orig_min):
            raise AssertionError("update_min must be <= orig_min")
        if bool(update_max < orig_max):
            raise AssertionError("update_max must be >= orig_max")
        return update_hist + self._upscale_histogram(orig_hist, orig_min, orig_max, update_min, update_max)

    def _store(self, name: str, value: Tensor) -> None:
        buffer = getattr(self, name)
        buffer.detach_().resize_(value.shape)
        buffer.copy_(value)

    def reset_histogram(self, x: Tensor, min_val: Tensor, max_val: Tensor) -> None:
        self._store("min_val", min_val)
        self._store("max_val", max_val)
        if min_val.numel() != 1 or max_val.numel() != 1:
            raise AssertionError("histogram min/max values must be scalar.")
        self._store("histogram", histc(x, self.bins, min=min_val, max=max_val))

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach()
        x_min, x_max = aminmax(x)
        if bool(x_min == float("-inf")) or bool(x_max == float("inf")):
            warnings.warn("torch.inf detected in input tensor, ignoring input", stacklevel=2)
            x = x[x.abs() != float("inf")]
            if x.numel() == 0:
                return x_orig
            x_min, x_max = aminmax(x)
        current_min, current_max = self.min_val, self.max_val
        if bool(current_min == float("inf")) or bool(current_max == float("-inf")):
            self.reset_histogram(x, x_min, x_max)
            return x_orig
        new_min, new_max = current_min.minimum(x_min).detach(), current_max.maximum(x_max).detach()
        update = histc(x, self.bins, min=new_min, max=new_max)
        if bool(new_min == current_min) and bool(new_max == current_max):
            self._store("histogram", self.histogram + update)
        else:
            self._store("histogram", self._combine_histograms(self.histogram, current_min, current_max, update,
                                                              new_min, new_max))
            self._store("min_val", new_min)
            self._store("max_val", new_max)
        return x_orig

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        if bool(self.min_val == float("inf")) and bool(self.max_val == float("-inf")):
            warnings.warn("must run observer before calling calculate_qparams.                                    "
                          "Returning default scale and zero point ", stacklevel=2)
            return tensor([1.0]), tensor([0])
        if self.bins != len(self.histogram):
            raise AssertionError("The number of bins in histogram should be equal to the number of bins supplied "
                                 "while making this observer")
        return self._calculate_qparams(*self._non_linear_param_search())

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class PlaceholderObserver(ObserverBase):
    """Observes nothing: marks where a dtype (``float16``, a dynamic quantization) applies."""

    def __init__(self, dtype=_dt.float32, custom_op_name: str = "", compute_dtype=None, quant_min=None,
                 quant_max=None, qscheme=None, eps=None, is_dynamic: bool = False) -> None:
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        if qscheme is None:
            qscheme = _dt.per_tensor_affine
        if eps is None:
            eps = _EPS
        self.quant_min, self.quant_max, self.qscheme, self.eps = quant_min, quant_max, qscheme, eps
        self.custom_op = custom_op_name
        if compute_dtype:
            self.is_dynamic = True
            warnings.warn("Please use `is_dynamic` instead of `compute_dtype`. `compute_dtype` will be deprecated "
                          "in a future release of PyTorch.", stacklevel=2)

    def forward(self, x: Tensor) -> Tensor:
        return x

    def extra_repr(self) -> str:
        return f"dtype={self.dtype}, is_dynamic={self.is_dynamic}"

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")  # noqa: TRY002


class NoopObserver(ObserverBase):
    """Observes nothing (the weight of a float16 dynamic quantization)."""

    def __init__(self, dtype=_dt.float16, custom_op_name: str = "") -> None:
        super().__init__(dtype=dtype)
        self.dtype = dtype
        self.custom_op = custom_op_name

    def forward(self, x: Tensor) -> Tensor:
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for NoopObserver")  # noqa: TRY002


class RecordingObserver(ObserverBase):
    """Keeps every tensor seen (debugging)."""

    def __init__(self, dtype=_dt.quint8) -> None:
        super().__init__(dtype=dtype)
        self.tensor_val: list[Any] = []

    def forward(self, x: Tensor) -> Tensor:
        self.tensor_val.append(x.clone())
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for RecordingObserver")  # noqa: TRY002

    def get_tensor_value(self) -> list:
        return self.tensor_val


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_placeholder_observer = PlaceholderObserver
default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
default_debug_observer = RecordingObserver
default_weight_observer = MinMaxObserver.with_args(dtype=_dt.qint8, qscheme=_dt.per_tensor_symmetric)
weight_observer_range_neg_127_to_127 = MinMaxObserver.with_args(
    dtype=_dt.qint8, qscheme=_dt.per_tensor_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(dtype=_dt.qint8,
                                                                         qscheme=_dt.per_channel_symmetric)
per_channel_weight_observer_range_neg_127_to_127 = PerChannelMinMaxObserver.with_args(
    dtype=_dt.qint8, qscheme=_dt.per_channel_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_dynamic_quant_observer = PlaceholderObserver.with_args(dtype=_dt.quint8, quant_min=0, quant_max=255,
                                                               is_dynamic=True)
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=_dt.quint8, qscheme=_dt.per_channel_affine_float_qparams, ch_axis=0)
