"""``torch.ao``: quantization (observers, fake quantization, QAT, the eager-mode workflow) and its module
families (``ao.nn``)."""
from __future__ import annotations

from . import nn, quantization  # noqa: F401
