"""QConfig: which observer (or fake quantizer) factories watch a module's activations and its weight."""
from __future__ import annotations

from collections import namedtuple

from ...base import dtype as _dt
from ...nn.modules.linear import Identity
from ...nn.modules.module import Module
from .fake_quantize import (FakeQuantize, FusedMovingAvgObsFakeQuantize, default_fake_quant, default_fused_act_fake_quant,
                            default_fused_per_channel_wt_fake_quant, default_fused_wt_fake_quant,
                            default_per_channel_weight_fake_quant, default_weight_fake_quant)
from .observer import (HistogramObserver, MovingAverageMinMaxObserver, PlaceholderObserver,
                       default_debug_observer, default_dynamic_quant_observer, default_float_qparams_observer,
                       default_observer, default_per_channel_weight_observer, default_placeholder_observer,
                       default_weight_observer)

__all__ = ["QConfig", "QConfigAny", "default_qconfig", "default_debug_qconfig", "default_per_channel_qconfig",
           "default_dynamic_qconfig", "per_channel_dynamic_qconfig", "float16_dynamic_qconfig",
           "float16_static_qconfig", "float_qparams_weight_only_qconfig", "default_qat_qconfig",
           "default_weight_only_qconfig", "default_activation_only_qconfig", "default_qat_qconfig_v2",
           "get_default_qconfig", "get_default_qat_qconfig", "qconfig_equals"]

_BACKENDS = ["fbgemm", "x86", "qnnpack", "onednn"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """The observer factories for a module's output (``activation``) and its weight: classes or
    ``with_args`` factories, never instances (each module gets its own observers)."""

    __slots__ = ()

    def __new__(cls, activation, weight):
        if isinstance(activation, Module) or isinstance(weight, Module):
            raise ValueError("QConfig received observer instance, please pass observer class instead. Use "
                             "MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


QConfigAny = QConfig | None

default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_debug_qconfig = QConfig(weight=default_weight_observer, activation=default_debug_observer)
default_per_channel_qconfig = QConfig(activation=default_observer, weight=default_per_channel_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer, weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float16_dynamic_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=_dt.float16, is_dynamic=True),
                                  weight=PlaceholderObserver.with_args(dtype=_dt.float16))
float16_static_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=_dt.float16),
                                 weight=PlaceholderObserver.with_args(dtype=_dt.float16))
float_qparams_weight_only_qconfig = QConfig(activation=default_placeholder_observer,
                                            weight=default_float_qparams_observer)
default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)
default_weight_only_qconfig = QConfig(activation=Identity, weight=default_weight_fake_quant)
default_activation_only_qconfig = QConfig(activation=default_fake_quant, weight=Identity)
default_qat_qconfig_v2 = QConfig(activation=default_fused_act_fake_quant, weight=default_fused_wt_fake_quant)


def _check_backend(backend: str) -> None:
    if backend not in _BACKENDS:
        raise AssertionError(f"backend: {backend} not supported. backend must be one of {_BACKENDS}")


def get_default_qconfig(backend: str = "x86", version: int = 0) -> QConfig:
    """The post-training (static) qconfig of ``backend``: histogram-observed activations (range halved on
    x86/fbgemm), per-channel symmetric int8 weights (per-tensor on qnnpack)."""
    _check_backend(backend)
    if version != 0:
        raise AssertionError(f"Version number: {version} in get_default_qconfig is not supported. Version number "
                             f"must be 0")
    reduce = backend in ("x86", "fbgemm")
    weight = default_weight_observer if backend == "qnnpack" else default_per_channel_weight_observer
    return QConfig(activation=HistogramObserver.with_args(reduce_range=reduce), weight=weight)


def get_default_qat_qconfig(backend: str = "x86", version: int = 1) -> QConfig:
    """The quantization-aware-training qconfig of ``backend``: moving-average fake quantizers (fused ones in
    version 1), activations' range halved on x86/fbgemm, weights per channel except on qnnpack."""
    _check_backend(backend)
    if version not in (0, 1):
        raise AssertionError(f"Version number: {version}in get_default_qat_qconfig is not supported. Version "
                             f"number must be 0 or 1")
    keywords = {"observer": MovingAverageMinMaxObserver, "quant_min": 0, "quant_max": 255}
    if backend != "onednn":
        keywords["reduce_range"] = backend != "qnnpack"
    if version == 0:
        weight = default_weight_fake_quant if backend == "qnnpack" else default_per_channel_weight_fake_quant
        return QConfig(activation=FakeQuantize.with_args(**keywords), weight=weight)
    weight = default_fused_wt_fake_quant if backend == "qnnpack" else default_fused_per_channel_wt_fake_quant
    return QConfig(activation=FusedMovingAvgObsFakeQuantize.with_args(**keywords), weight=weight)


def _factory_key(factory):
    """What a ``with_args`` factory makes, and with which arguments (for comparing qconfigs)."""
    p = getattr(factory, "p", None)
    return (p.func, p.args, tuple(sorted(p.keywords.items(), key=lambda kv: kv[0]))) if p is not None else factory


def qconfig_equals(q1: QConfigAny, q2: QConfigAny) -> bool:
    """Whether two qconfigs make the same observers."""
    if q1 is None or q2 is None:
        return q1 == q2
    return all(_factory_key(a) == _factory_key(b) for a, b in zip(q1, q2))
