"""Fake-quantize modules: an observer that picks the qparams, then the fake quantization ops on the way through
(quantization-aware training's simulated rounding, with the straight-through gradient)."""
from __future__ import annotations

from ...base import dtype as _dt
from ...core.creation import tensor
from ...core.tensor import Tensor
from ...nn.modules.module import Module
from ...ops.quantize import (fake_quantize_per_channel_affine, fake_quantize_per_tensor_affine,
                             fused_moving_avg_obs_fake_quant)
from .observer import (_PER_CHANNEL, _PER_TENSOR, _SYMMETRIC, MovingAverageMinMaxObserver,
                       MovingAveragePerChannelMinMaxObserver, _with_args, _with_callable_args)

__all__ = ["FakeQuantizeBase", "FakeQuantize", "FusedMovingAvgObsFakeQuantize", "disable_fake_quant",
           "disable_observer", "enable_fake_quant", "enable_observer", "default_fake_quant",
           "default_weight_fake_quant", "default_dynamic_fake_quant", "default_per_channel_weight_fake_quant",
           "default_embedding_fake_quant", "default_fused_act_fake_quant", "default_fused_wt_fake_quant",
           "default_fused_per_channel_wt_fake_quant", "fused_wt_fake_quant_range_neg_127_to_127",
           "fused_per_channel_wt_fake_quant_range_neg_127_to_127"]


class FakeQuantizeBase(Module):
    """A fake quantizer with switches for its observer and its fake quantization (uint8 buffers)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("fake_quant_enabled", tensor([1], dtype=_dt.uint8))
        self.register_buffer("observer_enabled", tensor([1], dtype=_dt.uint8))

    def forward(self, x):
        raise NotImplementedError

    def calculate_qparams(self, **kwargs):
        raise NotImplementedError

    def enable_fake_quant(self, enabled: bool = True) -> None:
        self.fake_quant_enabled[0] = 1 if enabled else 0

    def disable_fake_quant(self) -> None:
        self.enable_fake_quant(False)

    def enable_observer(self, enabled: bool = True) -> None:
        self.observer_enabled[0] = 1 if enabled else 0

    def disable_observer(self) -> None:
        self.enable_observer(False)

    with_args = classmethod(_with_args)
    with_callable_args = classmethod(_with_callable_args)


class FakeQuantize(FakeQuantizeBase):
    """Observe (when enabled), copy the observer's qparams into ``scale``/``zero_point``, fake-quantize."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min: int | None = None,
                 quant_max: int | None = None, is_dynamic: bool = False, **observer_kwargs) -> None:
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise AssertionError("quant_min must be less than or equal to quant_max")
            dtype = observer_kwargs.get("dtype", _dt.quint8)
            if hasattr(observer, "p"):   # a with_args factory: its dtype
                dtype = getattr(getattr(observer, "p", {}), "keywords", {}).get("dtype", dtype)
            info = _dt.iinfo(dtype)
            if info.min > quant_min:
                raise AssertionError("quant_min out of bound")
            if quant_max > info.max:
                raise AssertionError("quant_max out of bound")
            observer_kwargs.update({"quant_min": quant_min, "quant_max": quant_max})
        observer_kwargs["is_dynamic"] = is_dynamic
        self.activation_post_process = observer(**observer_kwargs)
        self.quant_min = self.activation_post_process.quant_min
        self.quant_max = self.activation_post_process.quant_max
        self.is_dynamic = self.activation_post_process.is_dynamic
        float_qparams = self.activation_post_process.qscheme is _dt.per_channel_affine_float_qparams
        self.register_buffer("scale", tensor([1.0], dtype=_dt.float32))
        self.register_buffer("zero_point", tensor([0], dtype=_dt.float32 if float_qparams else _dt.int32))
        self.dtype = self.activation_post_process.dtype
        self.qscheme = self.activation_post_process.qscheme
        self.ch_axis = getattr(self.activation_post_process, "ch_axis", -1)
        if self.qscheme not in _PER_CHANNEL + _PER_TENSOR:
            raise AssertionError(f"Only per channel and per tensor quantization are supported in fake quantize "
                                 f"got qscheme: {self.qscheme}")
        self.is_per_channel = self.qscheme in _PER_CHANNEL

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, X: Tensor) -> Tensor:
        if int(self.observer_enabled[0]) == 1:
            self.activation_post_process(X.detach())
            scale, zero_point = self.calculate_qparams()
            if self.scale.shape != scale.shape:
                self.scale.resize_(scale.shape)
                self.zero_point.resize_(zero_point.shape)
            self.scale.copy_(scale)
            self.zero_point.copy_(zero_point)
        if int(self.fake_quant_enabled[0]) == 1:
            qmin, qmax = self.activation_post_process.quant_min, self.activation_post_process.quant_max
            if self.is_per_channel:
                return fake_quantize_per_channel_affine(X, self.scale, self.zero_point, self.ch_axis, qmin, qmax)
            return fake_quantize_per_tensor_affine(X, self.scale, self.zero_point, qmin, qmax)
        return X

    def extra_repr(self) -> str:
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"quant_min={self.activation_post_process.quant_min}, "
                f"quant_max={self.activation_post_process.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
                f"ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        # per-channel qparams have the checkpoint's length, not the initial one
        for name in ("scale", "zero_point"):
            if prefix + name in state_dict:
                getattr(self, name).resize_(state_dict[prefix + name].shape)
            elif strict:
                missing_keys.append(prefix + name)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """FakeQuantize over a moving-average min/max observer as one op (``fused_moving_avg_obs_fake_quant``):
    the default QAT fake quant of ``get_default_qat_qconfig``. Its qparams follow ATen's rule, not the
    observer's ``calculate_qparams``."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min: int = 0, quant_max: int = 255,
                 **observer_kwargs) -> None:
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)
        if not isinstance(self.activation_post_process,
                          (MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver)):
            raise AssertionError("Fused observer+fake_quant module only works with MovingAverageMinMaxObserver")
        self.register_buffer("fake_quant_enabled", tensor([1], dtype=_dt.int64))
        self.register_buffer("observer_enabled", tensor([1], dtype=_dt.int64))
        self.is_symmetric_quant = self.activation_post_process.qscheme in _SYMMETRIC

    def extra_repr(self) -> str:
        observer = self.activation_post_process
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}, "
                f"quant_min={observer.quant_min}, quant_max={observer.quant_max}, qscheme={self.qscheme}, "
                f"reduce_range={observer.reduce_range}")

    def forward(self, X: Tensor) -> Tensor:
        observer = self.activation_post_process
        return fused_moving_avg_obs_fake_quant(X, self.observer_enabled, self.fake_quant_enabled, observer.min_val,
                                               observer.max_val, self.scale, self.zero_point,
                                               observer.averaging_constant, observer.quant_min, observer.quant_max,
                                               self.ch_axis, self.is_per_channel, self.is_symmetric_quant)


def _switch(mod: Module, method: str) -> None:
    if isinstance(mod, FakeQuantizeBase) or type(mod).__name__ == "_LearnableFakeQuantize":
        getattr(mod, method)()


def disable_fake_quant(mod: Module) -> None:
    """For ``model.apply``: turn off a fake quantizer's rounding (its observer keeps observing)."""
    _switch(mod, "disable_fake_quant")


def enable_fake_quant(mod: Module) -> None:
    """For ``model.apply``: turn a fake quantizer's rounding back on."""
    _switch(mod, "enable_fake_quant")


def disable_observer(mod: Module) -> None:
    """For ``model.apply``: freeze a fake quantizer's qparams."""
    _switch(mod, "disable_observer")


def enable_observer(mod: Module) -> None:
    """For ``model.apply``: let a fake quantizer's observer update again."""
    _switch(mod, "enable_observer")


default_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                            dtype=_dt.quint8, qscheme=_dt.per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=-128,
                                                   quant_max=127, dtype=_dt.qint8, qscheme=_dt.per_tensor_symmetric,
                                                   reduce_range=False)
default_dynamic_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                                    is_dynamic=True, dtype=_dt.quint8, averaging_constant=1)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=_dt.qint8,
    qscheme=_dt.per_channel_symmetric, reduce_range=False, ch_axis=0)
default_embedding_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=_dt.per_channel_affine_float_qparams, dtype=_dt.quint8,
    quant_min=0, quant_max=255, ch_axis=0, averaging_constant=1)
default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=_dt.quint8)
default_fused_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=_dt.qint8,
    qscheme=_dt.per_tensor_symmetric)
default_fused_per_channel_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=_dt.qint8,
    qscheme=_dt.per_channel_symmetric)
fused_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-127, quant_max=127, dtype=_dt.qint8,
    qscheme=_dt.per_tensor_symmetric, eps=2 ** -12)
fused_per_channel_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-127, quant_max=127, dtype=_dt.qint8,
    qscheme=_dt.per_channel_symmetric, eps=2 ** -12)
