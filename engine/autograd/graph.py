"""The autograd graph's node types, by their public path (``torch.autograd.graph``): ``Node``,
``OpNode`` and ``AccumulateGrad`` live in ``core/node.py`` (the dispatcher records them),
``CopySlices`` in ``autograd/views.py``."""
from __future__ import annotations

from ..core.node import AccumulateGrad, Node, OpNode
from .views import CopySlices

__all__ = ["Node", "OpNode", "AccumulateGrad", "CopySlices"]
