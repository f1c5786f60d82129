"""``torch.signal``: signal-processing helpers; today PyTorch's module holds only ``windows``."""
from __future__ import annotations

from . import windows

__all__ = ["windows"]
