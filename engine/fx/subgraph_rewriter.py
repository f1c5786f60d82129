"""``replace_pattern``: find every copy of a small graph in a bigger one and swap it out.

The pattern and the replacement are plain functions (or modules) with the same
arguments; both are traced. A match is found by walking back from the pattern's output
through arguments: opcodes and targets must agree, literal arguments must be equal, and
a pattern placeholder binds to any node (the same node wherever it appears). Interior
nodes of a match may not be used outside it. Matches do not overlap.

>>> def pattern(x, y):
...     return tapelab.relu(x + y)
>>> def replacement(x, y):
...     return tapelab.nn.functional.gelu(x * y)
>>> matches = replace_pattern(gm, pattern, replacement)
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from .graph import Graph
from .graph_module import GraphModule
from .node import Node

__all__ = ["replace_pattern", "Match"]


class Match(NamedTuple):
    """One replaced occurrence: ``anchor`` is the node that produced the pattern's output;
    ``nodes_map`` maps pattern nodes to the matched nodes."""
    anchor: Node
    nodes_map: dict


def _trace(f) -> Graph:
    from ._symbolic_trace import symbolic_trace
    return f.graph if isinstance(f, GraphModule) else symbolic_trace(f).graph


def _match_arg(pa, ga, nodes_map: dict) -> bool:
    if isinstance(pa, Node):
        return isinstance(ga, Node) and _match_node(pa, ga, nodes_map)
    if isinstance(pa, (tuple, list)):
        return type(pa) is type(ga) and len(pa) == len(ga) and all(
            _match_arg(p, g, nodes_map) for p, g in zip(pa, ga))
    if isinstance(pa, dict):
        return isinstance(ga, dict) and pa.keys() == ga.keys() and all(
            _match_arg(pa[k], ga[k], nodes_map) for k in pa)
    return not isinstance(ga, Node) and type(pa) is type(ga) and pa == ga


def _match_node(pn: Node, gn: Node, nodes_map: dict) -> bool:
    if pn in nodes_map:
        return nodes_map[pn] is gn
    if pn.op == "placeholder":
        nodes_map[pn] = gn
        return True
    if pn.op != gn.op or pn.target != gn.target:
        return False
    nodes_map[pn] = gn
    return _match_arg(pn.args, gn.args, nodes_map) and _match_arg(pn.kwargs, gn.kwargs, nodes_map)


def _find_matches(graph: Graph, pattern: Graph) -> list[Match]:
    out = pattern.output_node().args[0]
    if not isinstance(out, Node):
        raise ValueError("replace_pattern: the pattern must return a single value")
    matches, taken = [], set()
    for gn in graph.nodes:
        nodes_map: dict = {}
        if gn.op in ("placeholder", "output") or not _match_node(out, gn, nodes_map):
            continue
        interior = {g for p, g in nodes_map.items() if p.op != "placeholder"}
        if interior & taken:
            continue
        if any(u not in interior for g in interior if g is not gn for u in g.users):
            continue
        matches.append(Match(gn, nodes_map))
        taken |= interior
    return matches


def replace_pattern(gm: GraphModule, pattern: Callable, replacement: Callable) -> list[Match]:
    """Replace every match of ``pattern`` in ``gm.graph`` with ``replacement``, then recompile.

    Args:
        gm: the GraphModule to edit in place.
        pattern, replacement: functions (or modules, or GraphModules) taking the same
            arguments; ``pattern`` returns one value.
    Returns:
        One ``Match`` per replaced occurrence.
    """
    pattern_graph, replacement_graph = _trace(pattern), _trace(replacement)
    p_inputs = [n for n in pattern_graph.nodes if n.op == "placeholder"]
    r_inputs = [n for n in replacement_graph.nodes if n.op == "placeholder"]
    if len(p_inputs) != len(r_inputs):
        raise ValueError(f"replace_pattern: pattern takes {len(p_inputs)} arguments but replacement takes "
                         f"{len(r_inputs)}; they must take the same")
    matches = _find_matches(gm.graph, pattern_graph)
    replaced: dict[Node, Node] = {}   # anchors already swapped out, to their new values
    for match in matches:
        val_map = {r: replaced.get(match.nodes_map[p], match.nodes_map[p])
                   for p, r in zip(p_inputs, r_inputs) if p in match.nodes_map}
        unbound = [r.name for r in r_inputs if r not in val_map and r.users]
        if unbound:
            raise ValueError(f"replace_pattern: replacement uses {unbound}, which the pattern never uses")
        val_map.update({r: None for r in r_inputs if r not in val_map})
        with gm.graph.inserting_before(match.anchor):
            new_out = gm.graph.graph_copy(replacement_graph, val_map)
        match.anchor.replace_all_uses_with(new_out)
        replaced[match.anchor] = new_out
        interior = [g for p, g in match.nodes_map.items() if p.op != "placeholder"]
        for node in reversed(list(gm.graph.nodes)):
            if node in interior:
                gm.graph.erase_node(node)
    gm.recompile()
    return matches
