"""PyTorch's import path ``nn.modules.pixelshuffle`` for the pixel shuffle layers, which are defined in
``extra_layers.py``; the classes are the same objects as ``tapelab.nn``'s."""
from __future__ import annotations

from .extra_layers import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
