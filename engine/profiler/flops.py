"""FLOP estimates from shapes (``with_flops``).

An op may declare ``cost=fn(input_shapes, output_shape) -> int`` in the registry; that
wins. Otherwise this table covers the ops that dominate a step, counting a multiply-add
as 2 FLOPs as PyTorch does. Anything else counts 0 (shown as ``--`` in the table).
"""
from __future__ import annotations

from math import prod

from ..ops.registry import REGISTRY

__all__ = ["estimate_flops", "FLOP_TABLE"]


def _matmul(shapes, out):
    a = shapes[0]
    k = a[-1] if a else 1
    return 2 * prod(out) * k


def _conv(shapes, out):
    # x (N, C, *), w (O, C/groups, *kernel): every output element is a C/g*K dot product
    return 2 * prod(out) * prod(shapes[1][1:])


def _conv_transpose(shapes, out):
    # the adjoint of a conv in its input: same multiply-adds as the conv producing shapes[0]
    return 2 * prod(shapes[0]) * prod(shapes[1][1:])


def _conv_weight(shapes, out):
    # the adjoint in the weight: each output-gradient element meets one C/g*K window
    return 2 * prod(shapes[1]) * prod(out[1:])


def _elementwise(shapes, out):
    return prod(out)


FLOP_TABLE = {
    "matmul": _matmul,
    "convolution": _conv,
    "convolution_transpose": _conv_transpose,
    "convolution_weight": _conv_weight,
    "add": _elementwise, "sub": _elementwise, "mul": _elementwise, "div": _elementwise,
}


_RULES: dict = {}   # op name -> its cost function or None, looked up once per name


def estimate_flops(name: str, input_shapes: tuple, output_shape: tuple) -> int:
    try:
        fn = _RULES[name]
    except KeyError:
        op = REGISTRY.get(name)
        fn = _RULES[name] = op.cost if op is not None and op.cost is not None else FLOP_TABLE.get(name)
    if fn is None:
        return 0
    try:
        return int(fn(input_shapes, output_shape))
    except (IndexError, TypeError, ValueError):
        return 0
