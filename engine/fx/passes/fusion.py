"""Fusion grouping: find maximal chains of elementwise ops that one kernel could compute.

A node is elementwise when the op it calls (``tapelab.relu``, ``x.exp()``, ``x + y``,
``prims.mul``) is registered with ``elementwise=True`` (or passes the ``fusible`` predicate a
caller gives: ``tapelab.compiler`` also admits ops whose forward it can read as a scalar map,
such as ``gelu``). Groups grow in graph order: a
node joins the group of an elementwise input unless one of its other inputs depends on
that group through a node outside it (joining would make a cycle between the fused
kernel and that node). Only groups of two or more nodes are returned; each member gets
``node.meta['fusion_group']``. After ``ShapeProp``, nodes whose value is not a tensor
(shape arithmetic such as ``size + 1``) are left out.

>>> groups = elementwise_groups(gm)
>>> [[n.name for n in g] for g in groups]
[['add', 'relu', 'mul']]
"""
from __future__ import annotations

import functools
import itertools
import operator
from typing import Callable

from ...core.registry import REGISTRY
from ...core.tensor import Tensor
from ..node import Node

__all__ = ["elementwise_groups", "op_name"]


@functools.cache
def _operators() -> dict:
    """``operator.add`` -> ``"add"``: from each op's declared ``operator`` (built on first use,
    when every op family has registered)."""
    return {getattr(operator, op.operator): op.name for op in REGISTRY.values() if op.operator}


def op_name(node: Node) -> str | None:
    """The registry name of the op a node calls, or None."""
    if node.op == "call_method":
        return node.target
    if node.op == "call_function":
        return _operators().get(node.target) or getattr(node.target, "__name__", None)
    return None


def _elementwise(node: Node) -> bool:
    op = REGISTRY.get(op_name(node) or "")
    if op is None or not op.elementwise:
        return False
    t = node.meta.get("type")
    return t is None or issubclass(t, Tensor)


def elementwise_groups(gm, fusible: Callable[[Node], bool] | None = None, min_size: int = 2,
                       merge_siblings: bool = False) -> list[list[Node]]:
    """Maximal convex groups of elementwise nodes in ``gm.graph``, in graph order.

    Args:
        gm: the GraphModule (after ``ShapeProp``, non-tensor values are left out).
        fusible: which nodes may join a group; default: ops declared ``elementwise=True``.
        min_size: the fewest nodes a returned group has (1: a lone op whose forward is itself a
            chain, such as ``gelu``, is worth one kernel too).
        merge_siblings: a node whose inputs lie in two independent groups (``0.5 * h`` and
            ``1 + tanh(...)``, both from ``h``) joins them into one, when neither group depends
            on the other.
    """
    fusible = fusible or _elementwise
    group: dict[Node, int] = {}
    depends: dict[Node, set[int]] = {}       # groups a node depends on, itself excluded
    members: dict[int, list[Node]] = {}
    ids = itertools.count()
    order = {n: k for k, n in enumerate(gm.graph.nodes)} if merge_siblings else {}
    for node in gm.graph.nodes:
        inputs = node.all_input_nodes
        deps = set()
        for i in inputs:
            deps |= depends.get(i, set())
            if i in group:
                deps.add(group[i])
        chosen = None
        if fusible(node):
            for i in inputs:
                g = group.get(i)
                if g is not None and all(group.get(j) == g or g not in depends.get(j, set())
                                         for j in inputs):
                    chosen = g
                    break
            if chosen is None:
                chosen = next(ids)
                members[chosen] = []
            elif merge_siblings:
                for i in inputs:
                    other = group.get(i)
                    if other is None or other == chosen or other not in members:
                        continue
                    both = {chosen, other}
                    if (all(group.get(j) in both or not both & depends.get(j, set()) for j in inputs)
                            and all(other not in depends[m] for m in members[chosen])
                            and all(chosen not in depends[m] for m in members[other])):
                        for m in members.pop(other):
                            group[m] = chosen
                            members[chosen].append(m)
                        for d in depends.values():
                            if other in d:
                                d.discard(other)
                                d.add(chosen)
                        deps.discard(other)
                        members[chosen].sort(key=order.__getitem__)
            group[node] = chosen
            members[chosen].append(node)
            deps.discard(chosen)
        depends[node] = deps
    result = [m for m in members.values() if len(m) >= min_size]
    for k, nodes in enumerate(result):
        for n in nodes:
            n.meta["fusion_group"] = k
    return result
