"""``tapelab.graphs``: capture and replay with CUDA Graph semantics, on every device.

``Graph``, ``graph``, ``make_graphed_callables`` and ``is_current_stream_capturing`` mirror
``torch.cuda``'s names; ``tapelab.cuda`` binds the same objects to device "cuda".
"""
from ._capture import CaptureError
from .graph import BUFFER_KINDS, Graph, MemPool, graph, graph_pool_handle, is_current_stream_capturing
from .graphed import make_graphed_callables

__all__ = ["Graph", "graph", "make_graphed_callables", "is_current_stream_capturing", "graph_pool_handle",
           "MemPool", "CaptureError", "BUFFER_KINDS"]
