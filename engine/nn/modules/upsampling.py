"""PyTorch's import path ``nn.modules.upsampling`` for the upsampling layers, which are defined in
``extra_layers.py``; the classes are the same objects as ``tapelab.nn``'s."""
from __future__ import annotations

from .extra_layers import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d  # noqa: F401

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]
