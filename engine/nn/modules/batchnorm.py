"""PyTorch's import path ``nn.modules.batchnorm`` for the batch normalisation, which are defined in
``normalization.py``; the classes are the same objects as ``tapelab.nn``'s."""
from __future__ import annotations

from .normalization import _BatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
