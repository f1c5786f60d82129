"""``torch.cuda.graphs``: CUDA-graph capture and replay, ``tapelab.graphs`` bound to device "cuda";
the objects are ``tapelab.cuda``'s."""
from __future__ import annotations

from . import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables  # noqa: F401

__all__ = ["is_current_stream_capturing", "graph_pool_handle", "CUDAGraph", "graph", "make_graphed_callables"]
