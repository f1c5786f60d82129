"""The deprecated ``torch.cpu.amp`` and ``torch.cuda.amp`` names: the ``torch.amp`` classes for one
device type, each warning as PyTorch does when made."""
from __future__ import annotations

import warnings

from ..base.dtype import bfloat16, float16
from .autocast_mode import autocast
from .grad_scaler import GradScaler

__all__ = ["deprecated_autocast", "deprecated_grad_scaler"]


def deprecated_autocast(device_type: str, default_dtype):
    """``torch.<device_type>.amp.autocast(enabled, dtype, cache_enabled)``."""

    class DeprecatedAutocast(autocast):
        def __init__(self, enabled: bool = True, dtype=default_dtype, cache_enabled: bool = True):
            warnings.warn(f"`torch.{device_type}.amp.autocast(args...)` is deprecated. Please use "
                          f"`torch.amp.autocast('{device_type}', args...)` instead.", FutureWarning, stacklevel=2)
            super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    DeprecatedAutocast.__name__ = DeprecatedAutocast.__qualname__ = "autocast"
    return DeprecatedAutocast


def deprecated_grad_scaler(device_type: str):
    """``torch.<device_type>.amp.GradScaler(init_scale, ...)``."""

    class DeprecatedGradScaler(GradScaler):
        def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True):
            warnings.warn(f"`torch.{device_type}.amp.GradScaler(args...)` is deprecated. Please use "
                          f"`torch.amp.GradScaler('{device_type}', args...)` instead.", FutureWarning, stacklevel=2)
            super().__init__(device_type, init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    DeprecatedGradScaler.__name__ = DeprecatedGradScaler.__qualname__ = "GradScaler"
    return DeprecatedGradScaler


CPU_AUTOCAST, CUDA_AUTOCAST = deprecated_autocast("cpu", bfloat16), deprecated_autocast("cuda", float16)
CPU_GRAD_SCALER, CUDA_GRAD_SCALER = deprecated_grad_scaler("cpu"), deprecated_grad_scaler("cuda")
