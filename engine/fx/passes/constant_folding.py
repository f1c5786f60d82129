"""Constant folding: evaluate once what does not depend on the inputs.

A node is constant when it reads a tensor attribute that does not require grad (a
buffer, a ``_tensor_constant``) or is a pure function/method call whose inputs are all
constant. Parameters are never folded, so a folded module still trains. Each maximal
constant value used by the rest of the graph is computed, stored on the module as
``_folded_constant<i>`` and read by one ``get_attr``; the constant nodes that fed it go.
"""
from __future__ import annotations

from ...core.tensor import Tensor
from ..interpreter import Interpreter
from ..node import Node
from .cse import _is_random

__all__ = ["fold_constants"]


def _constant_nodes(gm) -> list[Node]:
    interp = Interpreter(gm)
    const: list[Node] = []
    is_const: set[Node] = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = interp.fetch_attr(node.target)
            ok = not (isinstance(value, Tensor) and value.requires_grad)
        elif node.op in ("call_function", "call_method"):
            inputs = node.all_input_nodes
            ok = bool(inputs) and all(i in is_const for i in inputs) and not node.is_impure() \
                and not _is_random(node)
        else:
            ok = False
        if ok:
            const.append(node)
            is_const.add(node)
    return const


def fold_constants(gm) -> int:
    """Fold constant subexpressions of ``gm`` (in place) and recompile; returns how many
    values were folded."""
    const = _constant_nodes(gm)
    is_const = set(const)
    interp = Interpreter(gm, garbage_collect_values=False)
    for node in const:
        interp.env[node] = interp.run_node(node)
    folded = index = 0
    for node in const:
        if node.op == "get_attr" or all(u in is_const for u in node.users):
            continue
        while hasattr(gm, f"_folded_constant{index}"):
            index += 1
        name = f"_folded_constant{index}"
        gm.register_buffer(name, interp.env[node])
        with gm.graph.inserting_before(node):
            attr = gm.graph.get_attr(name)
        node.replace_all_uses_with(attr, lambda user: user not in is_const)
        folded += 1
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return folded
