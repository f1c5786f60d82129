"""``ShapeProp``: run a graph on example inputs and record each value's shape and dtype.

After ``ShapeProp(gm).propagate(x)``, every node whose value is a Tensor has
``node.meta['tensor_meta']`` (a ``TensorMetadata``; a tuple of them for tuple values) and
every node has ``node.meta['type']``.

>>> ShapeProp(gm).propagate(tapelab.randn(2, 4))
>>> [(n.name, n.meta['tensor_meta'].shape) for n in gm.graph.nodes if 'tensor_meta' in n.meta]
[('x', tapelab.Size([2, 4])), ('linear', tapelab.Size([2, 8])), ...]
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ...core.tensor import Tensor
from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["ShapeProp", "TensorMetadata"]


class TensorMetadata(NamedTuple):
    """What a pass may know about a tensor value without holding it."""
    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


def _extract(t: Tensor) -> TensorMetadata:
    return TensorMetadata(t.shape, t.dtype, t.requires_grad, tuple(t.stride()), None, False, {})


class ShapeProp(Interpreter):
    """An Interpreter that stores ``tensor_meta`` and ``type`` in each node's ``meta``.

    Args:
        gm: the GraphModule to annotate (it is run once per ``propagate``).
    """

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        found = []

        def extract(a):
            if isinstance(a, Tensor):
                found.append(True)
                return _extract(a)
            return a
        meta = map_aggregate(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args) -> Any:
        """Run the graph on ``args`` (filling the metadata) and return its output."""
        return self.run(*args)
