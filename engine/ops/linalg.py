"""Matrix products."""
from __future__ import annotations

from ..dispatch import apply
from .registry import OTHERS, Op
from ._util import sum_to

__all__ = ["matmul"]


def _matmul_vjp(g, out, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return (g * b if a.requires_grad else None, g * a if b.requires_grad else None)
    # 1-d operands are promoted to matrices for the product, then squeezed back
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)
    ga = sum_to(g2 @ b2.mT, a2.shape).reshape(a.shape) if a.requires_grad else None
    gb = sum_to(a2.mT @ g2, b2.shape).reshape(b.shape) if b.requires_grad else None
    return ga, gb


_matmul = Op("matmul", lambda xp, a, b: xp.matmul(a, b), _matmul_vjp, promote="common", saves=OTHERS)


def matmul(input, other):
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{input.ndim}D and {other.ndim}D")
    ka = input.shape[-1]
    kb = other.shape[-2] if other.ndim > 1 else other.shape[0]
    if ka != kb:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({'x'.join(map(str, input.shape))} and {'x'.join(map(str, other.shape))})")
    return apply(_matmul, input, other)


METHODS = ("matmul",)
OPERATORS = {"__matmul__": matmul, "__rmatmul__": lambda s, o: matmul(o, s)}
