"""``torch._higher_order_ops.map``: ``f`` over the leading dim of ``xs`` (a pytree), results stacked."""
from __future__ import annotations

from typing import Callable

from ..ops.movement import stack
from ..utils._pytree import tree_flatten, tree_unflatten

__all__ = ["map"]


def map(f: Callable, xs, *args):
    """``stack([f(x, *args) for x in xs])``, over each leaf of ``xs`` (their leading dims equal) and each leaf
    of the results."""
    leaves, spec = tree_flatten(xs)
    if not leaves or len({t.shape[0] for t in leaves}) != 1:
        raise RuntimeError("Leading dimensions of mapped xs must be consistent")
    results = [f(tree_unflatten([t[i] for t in leaves], spec), *args) for i in range(leaves[0].shape[0])]
    flat = [tree_flatten(r)[0] for r in results]
    return tree_unflatten([stack([r[k] for r in flat]) for k in range(len(flat[0]))], tree_flatten(results[0])[1])
