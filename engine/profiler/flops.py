"""FLOP estimates from shapes (``with_flops``).

Each op declares its count with it (``Op(..., cost=fn)``, ``fn(input_shapes, output_shape)
-> int``, a multiply-add counting 2 FLOPs as in PyTorch): matmul, the convolutions and
elementwise arithmetic do. Anything else counts 0 (shown as ``--`` in the table).
"""
from __future__ import annotations

from collections.abc import Mapping

from ..core.registry import REGISTRY

__all__ = ["estimate_flops", "FLOP_TABLE"]


class _DeclaredCosts(Mapping):
    """op name -> its declared cost function, read live from the registry (nothing is stored here)."""

    def __getitem__(self, name):
        op = REGISTRY.get(name)
        if op is None or op.cost is None:
            raise KeyError(name)
        return op.cost

    def __iter__(self):
        return (name for name, op in REGISTRY.items() if op.cost is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


FLOP_TABLE = _DeclaredCosts()


def estimate_flops(name: str, input_shapes: tuple, output_shape: tuple) -> int:
    op = REGISTRY.get(name)
    if op is None or op.cost is None:
        return 0
    try:
        return int(op.cost(input_shapes, output_shape))
    except (IndexError, TypeError, ValueError):
        return 0
