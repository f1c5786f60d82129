"""``torch._higher_order_ops.associative_scan``: an inclusive prefix combination along a dim."""
from __future__ import annotations

from typing import Callable

from ..ops.movement import stack
from ..utils._pytree import tree_flatten, tree_unflatten

__all__ = ["associative_scan"]


def associative_scan(combine_fn: Callable, xs, dim: int, reverse: bool = False, combine_mode: str = "pointwise"):
    """``out[i] = combine_fn(out[i - 1], xs[i])`` along ``dim`` (from the end when ``reverse``), computed in order.
    ``combine_mode="pointwise"`` needs CUDA or XPU tensors, as PyTorch's."""
    if combine_mode not in ("pointwise", "generic"):
        raise ValueError(f"Combine_mode must either 'pointwise' or 'generic', but got {combine_mode}")
    leaves, spec = tree_flatten(xs)
    if combine_mode == "pointwise" and not all(t.device.type in ("cuda", "xpu") for t in leaves):
        raise ValueError("For combine_mode='pointwise', all input tensors need to be on CUDA or XPU")
    n = leaves[0].shape[dim]
    order = list(range(n - 1, -1, -1) if reverse else range(n))
    outs = {order[0]: [t.select(dim, order[0]) for t in leaves]}
    for prev, i in zip(order, order[1:]):
        combined = combine_fn(tree_unflatten(outs[prev], spec), tree_unflatten([t.select(dim, i) for t in leaves], spec))
        outs[i] = tree_flatten(combined)[0]
    return tree_unflatten([stack([outs[i][k] for i in range(n)], dim) for k in range(len(leaves))], spec)
