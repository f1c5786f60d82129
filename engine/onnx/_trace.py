"""The traced program an export is built from: one ``trace_from_tape`` graph plus every value.

The model runs once on the example (eval mode, no grad) and once more per dynamic axis with
that axis grown by one; the graphs must match node for node (else the axis steers Python control
flow and the export says where). Comparing them turns each size that followed an axis into a
``Dim``, in op params and in value shapes, and keeps each node's tapelab value for ``verify``.
"""
from __future__ import annotations

from ..base.grad_mode import no_grad
from ..core.tensor import Tensor
from ..fx import GraphModule, trace_from_tape
from ..fx.node import Node, map_aggregate
from ..fx.trace_from_tape import guard_inputs
from ..nn.modules.module import Module
from ..ops.movement import cat
from ._dims import ExportError, infer

__all__ = ["Traced", "trace"]


class Traced:
    """A graph, each node's value on the example, and the ``Dim``-aware params and shapes."""

    def __init__(self, gm: GraphModule, values: dict, params: dict, shapes: dict, args_of: dict):
        self.gm, self.values, self.params, self.shapes, self.args_of = gm, values, params, shapes, args_of

    @property
    def nodes(self) -> list[Node]:
        return list(self.gm.graph.nodes)


def _fetch(gm, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def run(gm: GraphModule, args: tuple) -> dict:
    """Every node's value (tensors, tuples) when ``gm`` runs on ``args``."""
    env: dict = {}
    feed = iter(args)
    load = lambda a: map_aggregate(a, lambda x: env[x] if isinstance(x, Node) else x)  # noqa: E731
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(feed)
        elif node.op == "get_attr":
            env[node] = _fetch(gm, node.target)
        elif node.op == "call_function":
            env[node] = None if node.target is guard_inputs else node.target(*load(node.args), **load(node.kwargs))
        elif node.op == "call_method":
            a = load(node.args)
            env[node] = getattr(a[0], node.target)(*a[1:], **load(node.kwargs))
        elif node.op == "output":
            env[node] = load(node.args[0])
    return env


def _grow(args: tuple, names: list[str], axes: dict, sym: str) -> tuple:
    """``args`` with every axis named ``sym`` one longer (its first slice repeated, so values stay valid)."""
    out = []
    for name, a in zip(names, args):
        for axis, s in axes.get(name, {}).items():
            if s == sym and isinstance(a, Tensor):
                a = cat([a, a.narrow(axis, 0, 1)], axis)
        out.append(a)
    return tuple(out)


def _shape(v):
    return tuple(int(s) for s in v.shape) if isinstance(v, Tensor) else None


def trace(model, args: tuple, names: list[str], axes: dict, sizes: dict) -> Traced:
    """Trace ``model`` on ``args`` and on one grown copy per dynamic symbol; see the module doc."""
    was = model.training if isinstance(model, Module) else None
    if was:
        model.eval()
    try:
        with no_grad():
            gm = trace_from_tape(model, *args)
            values = run(gm, args)
            others = []
            for s in sizes:
                grown = _grow(args, names, axes, s)
                other = trace_from_tape(model, *grown)
                others.append((_match(gm, other), run(other, grown)))
    finally:
        if was:
            model.train()
    return _with_dims(gm, values, others, sizes)


def _match(gm: GraphModule, other: GraphModule) -> dict:
    """``gm``'s nodes -> ``other``'s, which must be the same program (same ops in the same order)."""
    nodes, nodes2 = list(gm.graph.nodes), list(other.graph.nodes)
    for i, n in enumerate(nodes + [None] * (len(nodes2) - len(nodes))):
        n2 = nodes2[i] if i < len(nodes2) else None
        if n is None or n2 is None or n2.target != n.target or n2.op != n.op:
            at = n or n2
            raise ExportError(
                f"tapelab.onnx.export: the traced graph changes with a dynamic axis's size at node "
                f"{at.name} ({getattr(at.target, '__name__', at.target)}, {at.meta.get('source', '')}): "
                "Python control flow depends on that size; export without that dynamic axis")
    return dict(zip(nodes, nodes2))


def _with_dims(gm: GraphModule, values: dict, others: list, sizes: dict) -> Traced:
    """Each node's params and value shapes with the sizes that moved across traces as ``Dim``s."""
    grown = list(sizes)
    strip = lambda a: map_aggregate(a, lambda x: None if isinstance(x, Node) else x)  # noqa: E731
    params, shapes, args_of = {}, {}, {}
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method") and n.target is not guard_inputs:
            params[n] = infer(strip(dict(n.kwargs)), [strip(dict(m[n].kwargs)) for m, _ in others], sizes, grown)
            args_of[n] = infer(strip(tuple(n.args)), [strip(tuple(m[n].args)) for m, _ in others], sizes, grown)
        v = values[n]
        if isinstance(v, Tensor):
            shapes[n] = infer(_shape(v), [_shape(env[m[n]]) for m, env in others], sizes, grown)
        elif isinstance(v, tuple) and n.op != "output":
            shapes[n] = tuple(infer(_shape(x), [_shape(env[m[n]][i]) for m, env in others], sizes, grown)
                              if isinstance(x, Tensor) else None for i, x in enumerate(v))
    return Traced(gm, values, params, shapes, args_of)
