"""PyTorch's import path ``nn.modules.distance`` for the distance layers, which are defined in
``extra_layers.py``; the classes are the same objects as ``tapelab.nn``'s."""
from __future__ import annotations

from .extra_layers import PairwiseDistance, CosineSimilarity  # noqa: F401

__all__ = ["PairwiseDistance", "CosineSimilarity"]
