"""Common-subexpression elimination: compute each pure expression once.

Two nodes are the same expression when opcode, target and arguments (after earlier
merges) are equal. Placeholders, impure nodes (``Node.is_impure``), module calls (a
module may hold state) and random ops are never merged.
"""
from __future__ import annotations

from ..node import Node

__all__ = ["eliminate_common_subexpressions"]

_RANDOM = ("rand", "dropout", "normal", "bernoulli", "multinomial", "uniform", "poisson")


def _is_random(node: Node) -> bool:
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return any(r in name for r in _RANDOM)


def _key(a):
    if isinstance(a, Node):
        return ("node", id(a))
    if isinstance(a, (tuple, list)):
        return (type(a).__name__, tuple(_key(x) for x in a))
    if isinstance(a, dict):
        return ("dict", tuple((k, _key(v)) for k, v in a.items()))
    if isinstance(a, slice):
        return ("slice", _key(a.start), _key(a.stop), _key(a.step))
    hash(a)
    return (type(a).__name__, a)


def eliminate_common_subexpressions(gm) -> int:
    """Merge duplicate expressions in ``gm.graph`` and recompile; returns how many went."""
    seen: dict = {}
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op not in ("call_function", "call_method", "get_attr") or node.is_impure() or _is_random(node):
            continue
        try:
            key = (node.op, node.target if isinstance(node.target, str) else id(node.target),
                   _key(node.args), _key(node.kwargs))
        except TypeError:   # an unhashable constant argument: leave the node alone
            continue
        first = seen.setdefault(key, node)
        if first is not node:
            node.replace_all_uses_with(first)
            gm.graph.erase_node(node)
            removed += 1
    gm.recompile()
    return removed
