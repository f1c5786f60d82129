"""``torch.cuda.graphs``: CUDA-graph capture and replay, ``tapelab.graphs`` bound to device "cuda"."""
from __future__ import annotations

from ..graphs import Graph
from ._runtime import require_cuda

__all__ = ["is_current_stream_capturing", "graph_pool_handle", "CUDAGraph", "graph", "make_graphed_callables"]


# ---------------------------------------------------------------- graphs: tapelab.graphs bound to "cuda" (issue 6)
class CUDAGraph(Graph):
    """``torch.cuda.CUDAGraph``: a ``tapelab.graphs.Graph`` on device "cuda" (a class, as libraries
    annotate with it and test ``isinstance``)."""
    __module__ = "tapelab.cuda"   # where programs name it

    def __init__(self, keep_graph: bool = False):
        require_cuda()
        super().__init__("cuda", keep_graph=keep_graph)


def graph(cuda_graph, pool=None, stream=None, capture_error_mode: str = "global"):
    """``torch.cuda.graph``: capture the ``with`` block into ``cuda_graph``."""
    from .. import graphs
    return graphs.graph(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode)


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool=None):
    """``torch.cuda.make_graphed_callables``: ``tapelab.graphs.make_graphed_callables`` on "cuda"."""
    require_cuda()
    from .. import graphs
    return graphs.make_graphed_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool,
                                         device="cuda")


def graph_pool_handle():
    """``torch.cuda.graph_pool_handle``: a pool to share between captures."""
    from .. import graphs
    return graphs.graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """True while a graph capture is in progress."""
    from .. import graphs
    return graphs.is_current_stream_capturing()
