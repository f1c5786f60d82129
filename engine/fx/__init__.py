"""tapelab.fx: capture a program as a graph, edit it, and run it again (``torch.fx``).

Three parts, as in PyTorch:

- a **tracer** (``symbolic_trace``, ``Tracer``, ``Proxy``, ``wrap``) that runs a module
  on symbolic values and records what it does;
- an **IR** (``Graph`` of ``Node``s with six opcodes) that passes read and rewrite;
- **code generation** (``GraphModule``) that turns a graph back into an ``nn.Module``
  with a Python ``forward``, plus ``Interpreter``/``Transformer`` to run or rebuild a
  graph node by node.

Beyond PyTorch: ``trace_from_tape(fn, *example_args)`` records a graph from an eager run
through the dispatcher, so Python control flow is specialised to the example (with guards
on input shapes and dtypes) instead of failing.

>>> gm = tapelab.fx.symbolic_trace(model)
>>> print(gm.graph)
>>> gm.graph.print_tabular()
"""
from __future__ import annotations

from ._symbolic_trace import Tracer, symbolic_trace, wrap
from .graph import Graph
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, has_side_effect, map_arg
from .proxy import Proxy, TraceError
from .subgraph_rewriter import replace_pattern
from .trace_from_tape import GuardError, trace_from_tape
from . import passes  # noqa: F401

__all__ = ["symbolic_trace", "Tracer", "wrap", "Graph", "GraphModule", "Interpreter", "Transformer", "Node",
           "Proxy", "replace_pattern", "has_side_effect", "map_arg", "TraceError", "trace_from_tape",
           "GuardError"]
