"""``tapelab.compiler``: ``torch.compiler``'s names over tapelab's fusing compiler.

``compile`` traces a module or function under guards (``frontend``), partitions the graph's
elementwise groups (``fx.passes.fusion``), and turns each group, forward and backward, into
one kernel (``fused``): a numba loop on cpu (``cpu``, with float32 ``fastmath``), a cupy
ElementwiseKernel on cuda (``cuda``). On cpu a call whose graph is all declared ops then runs as
one autograd node (``step``: a generated forward over arrays and one traced joint backward).
``explain`` reports graphs, guards, breaks, whether the call is one node, and times.
"""
from __future__ import annotations

from .frontend import (CompiledFunction, ExplainOutput, GraphCompileReason, OptimizedModule, Unsupported, compile,
                       config, disable, explain, is_compiling, reset)

__all__ = ["compile", "explain", "reset", "config", "list_backends", "is_compiling", "is_dynamo_compiling",
           "is_exporting", "allow_in_graph", "assume_constant_result",
           "disable", "CompiledFunction", "OptimizedModule", "ExplainOutput", "GraphCompileReason", "Unsupported"]


def list_backends(exclude_tags=("debug", "experimental")) -> list:
    """The backend names ``compile`` accepts."""
    return ["inductor", "tapelab"]


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    """False: tapelab has no ``torch.export`` tracing to be inside of."""
    return False


def allow_in_graph(fn):
    """``fn`` unchanged (a decorator): tapelab's tracer records the ops ``fn`` runs."""
    return fn


def assume_constant_result(fn):
    """``fn`` unchanged (a decorator telling Dynamo to fold its result; tensordict imports it): tapelab's
    tracer runs ``fn`` eagerly."""
    return fn
