"""The autograd graph's node types, by their public path (``torch.autograd.graph``): ``Node``,
``OpNode`` and ``AccumulateGrad`` live in ``core/node.py`` (the dispatcher records them),
``CopySlices`` in ``autograd/views.py``."""
from __future__ import annotations

import contextlib

from ..core.node import AccumulateGrad, Node, OpNode
from .views import CopySlices

__all__ = ["Node", "OpNode", "AccumulateGrad", "CopySlices", "save_on_cpu"]


class save_on_cpu(contextlib.nullcontext):
    """``torch.autograd.graph.save_on_cpu``: in PyTorch, tensors saved for backward inside the block are
    kept in host memory and copied back for backward, a memory saving that leaves every value the same.
    tapelab keeps saved tensors where they are (it has no saved-tensor hooks), so gradients are the same
    and only the device-memory saving is missing."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        super().__init__()
