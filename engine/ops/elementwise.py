"""Elementwise ops: arithmetic, math, activations, comparisons, logical ops.

Each op is one declaration: forward on backend arrays, vjp in Tensor ops. Gradients of
broadcasting binary ops are summed back to each input's shape by ``unbroadcast``.
"""
from __future__ import annotations

from ..dispatch import apply, apply_
from .registry import NONE, OTHERS, Op
from ._util import Tensor, unbroadcast as ub

__all__ = ["add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "sigmoid", "relu", "pow",
           "sqrt", "abs", "true_divide", "multiply", "subtract", "negative", "rsub"]

# ---------------------------------------------------------------- arithmetic
_add = Op("add", lambda xp, a, b: a + b, lambda g, out, a, b: (ub(g, a), ub(g, b)),
          promote="common", saves=NONE, elementwise=True)
_sub = Op("sub", lambda xp, a, b: a - b, lambda g, out, a, b: (ub(g, a), ub(-g, b)),
          promote="common", saves=NONE, elementwise=True)
_mul = Op("mul", lambda xp, a, b: a * b, lambda g, out, a, b: (ub(g * b, a), ub(g * a, b)),
          promote="common", saves=OTHERS, elementwise=True)
_div = Op("div", lambda xp, a, b: a / b, lambda g, out, a, b: (ub(g / b, a), ub(-g * out / b, b)),
          promote="float", save_output=True, elementwise=True)
_neg = Op("neg", lambda xp, a: -a, lambda g, out, a: (-g,), saves=NONE, elementwise=True)
_pow = Op("pow", lambda xp, a, b: a ** b,
          lambda g, out, a, b: (ub(g * b * a ** (b - 1), a),
                                ub(g * out * a.log(), b) if isinstance(b, Tensor) else None),
          promote="common", save_output=True, elementwise=True)

# ---------------------------------------------------------------- math
_exp = Op("exp", lambda xp, a: xp.exp(a), lambda g, out, a: (g * out,),
          promote="float", saves=NONE, save_output=True, elementwise=True)
_log = Op("log", lambda xp, a: xp.log(a), lambda g, out, a: (g / a,), promote="float", elementwise=True)
_sqrt = Op("sqrt", lambda xp, a: xp.sqrt(a), lambda g, out, a: (g / (2 * out),),
           promote="float", saves=NONE, save_output=True, elementwise=True)
_abs = Op("abs", lambda xp, a: xp.abs(a), lambda g, out, a: (g * a.sign(),), elementwise=True)
_sign = Op("sign", lambda xp, a: xp.sign(a), lambda g, out, a: (g * 0,), saves=NONE, elementwise=True)
_tanh = Op("tanh", lambda xp, a: xp.tanh(a), lambda g, out, a: (g * (1 - out * out),),
           promote="float", saves=NONE, save_output=True, elementwise=True)
# exp(-a) overflowing to inf gives exactly 0, as PyTorch does
_sigmoid = Op("sigmoid", lambda xp, a: 1 / (1 + xp.exp(-a)), lambda g, out, a: (g * out * (1 - out),),
              promote="float", saves=NONE, save_output=True, elementwise=True)
# NOTE: relu's gradient is 0 at 0, as in PyTorch; a mask of the output keeps it one op
_relu = Op("relu", lambda xp, a: xp.maximum(a, 0, dtype=a.dtype),
           lambda g, out, a: (g * (out > 0),), saves=NONE, save_output=True, elementwise=True)


def add(input, other, *, alpha=1):
    return apply(_add, input, other if alpha == 1 else other * alpha)


def sub(input, other, *, alpha=1):
    return apply(_sub, input, other if alpha == 1 else other * alpha)


def rsub(input, other, *, alpha=1):
    return apply(_sub, other, input if alpha == 1 else input * alpha)


def mul(input, other):
    return apply(_mul, input, other)


def div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return apply(_div, input, other)
    from .elementwise_more import _div_rounding
    return _div_rounding(input, other, rounding_mode)


def neg(input):
    return apply(_neg, input)


def pow(input, exponent):
    if not isinstance(input, Tensor):
        return apply(_pow, input, exponent)
    return apply(_pow, input, exponent)


def exp(input):
    return apply(_exp, input)


def log(input):
    return apply(_log, input)


def sqrt(input):
    return apply(_sqrt, input)


def abs(input):
    return apply(_abs, input)


def sign(input):
    return apply(_sign, input)


def tanh(input):
    return apply(_tanh, input)


def sigmoid(input):
    return apply(_sigmoid, input)


def relu(input):
    return apply(_relu, input)


true_divide = divide = div
multiply, subtract, negative, absolute = mul, sub, neg, abs

METHODS = ("add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "abs", "sign", "tanh",
           "sigmoid", "relu", "true_divide", "divide", "multiply", "subtract", "negative", "absolute")
INPLACE = {"add_": _add, "sub_": _sub, "mul_": _mul, "div_": _div, "neg_": _neg, "pow_": _pow,
           "exp_": _exp, "log_": _log, "sqrt_": _sqrt, "abs_": _abs, "tanh_": _tanh,
           "sigmoid_": _sigmoid, "relu_": _relu}


def _add_(self, other, *, alpha=1):
    return apply_(_add, self, other if alpha == 1 else other * alpha)


def _sub_(self, other, *, alpha=1):
    return apply_(_sub, self, other if alpha == 1 else other * alpha)


OPERATORS = {
    "__add__": lambda s, o: apply(_add, s, o), "__radd__": lambda s, o: apply(_add, o, s),
    "__sub__": lambda s, o: apply(_sub, s, o), "__rsub__": lambda s, o: apply(_sub, o, s),
    "__mul__": lambda s, o: apply(_mul, s, o), "__rmul__": lambda s, o: apply(_mul, o, s),
    "__truediv__": lambda s, o: apply(_div, s, o), "__rtruediv__": lambda s, o: apply(_div, o, s),
    "__neg__": lambda s: apply(_neg, s), "__pos__": lambda s: s, "__abs__": lambda s: apply(_abs, s),
    "__pow__": lambda s, o: apply(_pow, s, o), "__rpow__": lambda s, o: apply(_pow, o, s),
    "__iadd__": lambda s, o: apply_(_add, s, o), "__isub__": lambda s, o: apply_(_sub, s, o),
    "__imul__": lambda s, o: apply_(_mul, s, o), "__itruediv__": lambda s, o: apply_(_div, s, o),
    "add_": _add_, "sub_": _sub_,
}
