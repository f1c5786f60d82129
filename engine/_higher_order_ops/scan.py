"""``torch._higher_order_ops.scan``: a loop carrying state along a dim, per-step outputs stacked."""
from __future__ import annotations

from typing import Callable

from ..ops.movement import stack
from ..utils._pytree import tree_flatten, tree_unflatten

__all__ = ["scan"]


def scan(combine_fn: Callable, init, xs, *, dim: int = 0, reverse: bool = False):
    """``(carry, ys)``: ``carry, y = combine_fn(carry, x)`` for each slice ``x`` of ``xs`` along ``dim`` (from the
    end when ``reverse``), starting from ``init``; ``ys`` stacks each ``y`` at its slice's position. ``init``,
    ``xs`` and the outputs may be pytrees."""
    leaves, spec = tree_flatten(xs)
    n = leaves[0].shape[dim]
    order = range(n - 1, -1, -1) if reverse else range(n)
    carry, outs = init, {}
    for i in order:
        carry, y = combine_fn(carry, tree_unflatten([t.select(dim, i) for t in leaves], spec))
        outs[i] = tree_flatten(y)
    out_spec = outs[order[0]][1]
    ys = [stack([outs[i][0][k] for i in range(n)], dim) for k in range(len(outs[order[0]][0]))]
    return carry, tree_unflatten(ys, out_spec)
