"""PyTorch's import path ``nn.modules.instancenorm`` for the instance normalisation, which are defined in
``extra_layers.py``; the classes are the same objects as ``tapelab.nn``'s."""
from __future__ import annotations

from .extra_layers import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
