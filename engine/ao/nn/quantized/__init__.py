"""Quantized modules (``torch.ao.nn.quantized``): here the dynamic family (``dynamic``), whose weights are int8
codes and whose inputs are quantized on each call."""
from __future__ import annotations

from . import dynamic  # noqa: F401
