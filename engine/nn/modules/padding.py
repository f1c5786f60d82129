"""PyTorch's import path ``nn.modules.padding`` for the padding layers, which are defined in
``extra_layers.py``; the classes are the same objects as ``tapelab.nn``'s."""
from __future__ import annotations

from .extra_layers import (ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,  # noqa: F401
                           ReflectionPad2d, ReplicationPad1d, ReplicationPad2d, ZeroPad1d, ZeroPad2d)

__all__ = ["ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d"]
