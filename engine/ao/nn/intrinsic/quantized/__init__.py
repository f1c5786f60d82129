"""Fused quantized modules (``torch.ao.nn.intrinsic.quantized``): a quantized layer with its ReLU applied to the
output codes (clamped at the output zero point)."""
from __future__ import annotations

from ...quantized import Conv2d, Linear

__all__ = ["LinearReLU", "ConvReLU2d"]


class LinearReLU(Linear):
    """Quantized Linear followed by ReLU."""

    _RELU = True


class ConvReLU2d(Conv2d):
    """Quantized Conv2d followed by ReLU."""

    _RELU = True
