"""Comparisons, selection by comparison (where, clamp, maximum) and logical/bitwise ops.

Comparison, logical and bitwise results are bool or integer, so they never require grad and
declare no vjp. The selection ops route gradients with one masking primitive, ``_mask_grad``,
whose own vjp is itself: a masked gradient is linear in the gradient, so double backward works.
Gradients at ties and boundaries follow PyTorch's derivatives.yaml.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import DisableTorchFunction, handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..core.creation import tensor as _tensor
from ..core.arguments import refuse_non_tensors
from ..core.dispatch import apply, array_operand, binary, refused_operand
from ..autograd.views import apply_
from ..core.registry import NONE, OTHERS, Op, kernel_refusal
from ._util import Tensor, unbroadcast as ub
from ..base.dtype import FLOATING_KINDS
from .. import kernels

__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
           "not_equal", "isclose", "allclose", "equal", "isnan", "isinf", "isposinf", "isneginf",
           "isfinite", "signbit", "logical_and", "logical_or", "logical_xor", "logical_not",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "maximum", "minimum", "fmax",
           "fmin", "clamp", "clip", "clamp_min", "clamp_max", "where"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_nan_ignoring(op_type: str):
    """fmax/fmin: the other operand where one is NaN."""
    return lambda g, a, b: g.op("Where", g.op("IsNaN", a), b, g.op("Where", g.op("IsNaN", b), a, g.op(op_type, a, b)))


def _onnx_bitwise(logical: str, bitwise: str):
    """Bools take the logical op, integers ``Bitwise*`` (ONNX has them from opset 18)."""
    def lower(g, *xs):
        if all(g.dtype(x) == bool for x in xs if isinstance(x, str)):
            return g.op(logical, *xs)
        if g.opset < 18:
            raise NotImplementedError(f"integer {bitwise} needs opset_version >= 18 (export with opset_version=18)")
        return g.op(bitwise, *xs)
    return lower


def _onnx_isfinite(g, a):
    return g.op("Not", g.op("Or", g.op("IsNaN", a), g.op("IsInf", a)))


def _onnx_logical(op_type: str):
    return lambda g, a, b: g.op(op_type, g.cast(a, "bool"), g.cast(b, "bool"))


def _onnx_ne(g, a, b):
    return g.op("Not", g.op("Equal", a, b))


def _onnx_clamp(g, x, lo=None, hi=None):
    if lo is not None:
        x = g.op("Max", x, lo)
    return x if hi is None else g.op("Min", x, hi)


# ---------------------------------------------------------------- gradient masking
def _mask_grad_fwd(xp, mask, g, *, keep):
    return xp.where(mask, g, 0) if keep else xp.where(mask, 0, g)


_mask_grad = Op("mask_grad", _mask_grad_fwd,
                lambda gg, out, mask, g, *, keep: (None, ub(apply(_mask_grad, mask, gg, keep=keep), g)),
                saves=OTHERS, elementwise=True, complex=True)


def keep_where(mask: Tensor, g: Tensor) -> Tensor:
    """``g`` where ``mask`` holds, else 0 (never ``inf * 0 = nan``); differentiable in ``g``."""
    return apply(_mask_grad, mask, g, keep=True)


def zero_where(mask: Tensor, g: Tensor) -> Tensor:
    """0 where ``mask`` holds, else ``g``."""
    return apply(_mask_grad, mask, g, keep=False)


# ---------------------------------------------------------------- comparisons
def _cmp(name, fwd, ufunc, alias=None, onnx=None, ordered=False):
    """A comparison: Python's operator of the same name, and in place (``gt_``, ``greater_``);
    ``ordered`` ones (lt, le, gt, ge) refuse complex operands, as PyTorch's kernels do."""
    aliases = (alias,) if alias else ()
    return Op(name, fwd, None, promote="common", saves=NONE, elementwise=True, out_form=ufunc, operator=name,
              aliases=aliases, inplace=tuple(f"{n}_" for n in (name, *aliases)), onnx=onnx,
              complex_error=kernel_refusal(name) if ordered else None)


_eq = _cmp("eq", lambda xp, a, b: a == b, "equal", onnx="Equal")
_ne = _cmp("ne", lambda xp, a, b: a != b, "not_equal", "not_equal", onnx=_onnx_ne)
_lt = _cmp("lt", lambda xp, a, b: a < b, "less", "less", onnx="Less", ordered=True)
_le = _cmp("le", lambda xp, a, b: a <= b, "less_equal", "less_equal", onnx="LessOrEqual", ordered=True)
_gt = _cmp("gt", lambda xp, a, b: a > b, "greater", "greater", onnx="Greater", ordered=True)
_ge = _cmp("ge", lambda xp, a, b: a >= b, "greater_equal", "greater_equal", onnx="GreaterOrEqual", ordered=True)


def eq(input, other) -> Tensor:
    return apply(_eq, input, other)


def ne(input, other) -> Tensor:
    return apply(_ne, input, other)


def lt(input, other) -> Tensor:
    return apply(_lt, input, other)


def le(input, other) -> Tensor:
    return apply(_le, input, other)


def gt(input, other) -> Tensor:
    return apply(_gt, input, other)


def ge(input, other) -> Tensor:
    return apply(_ge, input, other)


greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

_isclose = Op("isclose", lambda xp, a, b, *, rtol, atol, equal_nan:
              xp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan), None, saves=NONE)


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """``|input - other| <= atol + rtol * |other|``; both inputs must share a dtype, as in PyTorch."""
    if _DISPATCH.functions is not None and has_tensor_like((input, other)):
        return handle_torch_function(isclose, (input, other), input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)
    try:
        same = input._data.dtype == other._data.dtype
    except AttributeError:
        refuse_non_tensors("isclose", input, other)
        raise
    if not same:
        raise RuntimeError(f"{input.dtype.scalar_type} did not match {other.dtype.scalar_type} "
                           f"(isclose needs inputs of one dtype)")
    return apply(_isclose, input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    if _DISPATCH.functions is not None and has_tensor_like((input, other)):
        return handle_torch_function(allclose, (input, other), input, other, rtol=rtol, atol=atol,
                                     equal_nan=equal_nan)
    return bool(isclose(input, other, rtol, atol, equal_nan).all())   # meta: item()'s error


def equal(input: Tensor, other: Tensor) -> bool:
    """Same shape and same values (after type promotion)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, other)):
        return handle_torch_function(equal, (input, other), input, other)
    if input.device.type == "meta" or other.device.type == "meta":
        raise NotImplementedError("equal: attempted to run this operator with Meta tensors, which have no values")
    return input.shape == other.shape and bool(eq(input, other)._data.all())


def _signbit_fwd(xp, a):
    return xp.signbit(a) if a.dtype.kind != "b" else xp.zeros_like(a)


_isnan = Op("isnan", lambda xp, a: xp.isnan(a), None, saves=NONE, elementwise=True, out_form="isnan", onnx="IsNaN")
_isinf = Op("isinf", lambda xp, a: xp.isinf(a), None, saves=NONE, elementwise=True, out_form="isinf", onnx="IsInf")
_isposinf = Op("isposinf", lambda xp, a: xp.isposinf(a), None, saves=NONE, elementwise=True,
               onnx=lambda g, a: g.op("IsInf", a, detect_negative=0))
_isneginf = Op("isneginf", lambda xp, a: xp.isneginf(a), None, saves=NONE, elementwise=True,
               onnx=lambda g, a: g.op("IsInf", a, detect_positive=0))
_isfinite = Op("isfinite", lambda xp, a: xp.isfinite(a), None, saves=NONE, elementwise=True, out_form="isfinite",
               onnx=_onnx_isfinite)
_signbit = Op("signbit", _signbit_fwd, None, saves=NONE, elementwise=True,
               complex_error=(NotImplementedError, "signbit is not implemented for complex tensors."))


def isnan(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(isnan, (input,), input)
    return apply(_isnan, input)


def isinf(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(isinf, (input,), input)
    return apply(_isinf, input)


def isposinf(input: Tensor) -> Tensor:
    return apply(_isposinf, input)


def isneginf(input: Tensor) -> Tensor:
    return apply(_isneginf, input)


def isfinite(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(isfinite, (input,), input)
    return apply(_isfinite, input)


def signbit(input: Tensor) -> Tensor:
    return apply(_signbit, input)


# ---------------------------------------------------------------- logical and bitwise
def _logical(name, fwd, out_form=None, **meta):
    """A logical or bitwise op (its namespace ufunc has its name), in place too (``logical_and_``)."""
    return Op(name, fwd, None, saves=NONE, elementwise=True, out_form=out_form or name, inplace=(f"{name}_",),
              **meta)


_logical_and = _logical("logical_and", lambda xp, a, b: xp.logical_and(a, b), onnx=_onnx_logical("And"))
_logical_or = _logical("logical_or", lambda xp, a, b: xp.logical_or(a, b), onnx=_onnx_logical("Or"))
_logical_xor = _logical("logical_xor", lambda xp, a, b: xp.logical_xor(a, b), onnx=_onnx_logical("Xor"))
_logical_not = _logical("logical_not", lambda xp, a: xp.logical_not(a),
                        onnx=lambda g, a: g.op("Not", g.cast(a, "bool")))
_bitwise_and = _logical("bitwise_and", lambda xp, a, b: a & b, promote="common", operator="and_",
                        onnx=_onnx_bitwise("And", "BitwiseAnd"))
_bitwise_or = _logical("bitwise_or", lambda xp, a, b: a | b, promote="common", operator="or_",
                       onnx=_onnx_bitwise("Or", "BitwiseOr"))
_bitwise_xor = _logical("bitwise_xor", lambda xp, a, b: a ^ b, promote="common", operator="xor",
                        onnx=_onnx_bitwise("Xor", "BitwiseXor"))
_bitwise_not = _logical("bitwise_not", lambda xp, a: ~a, "invert", operator="invert",
                        onnx=_onnx_bitwise("Not", "BitwiseNot"))


def logical_and(input: Tensor, other: Tensor) -> Tensor:
    return apply(_logical_and, input, other)


def logical_or(input: Tensor, other: Tensor) -> Tensor:
    return apply(_logical_or, input, other)


def logical_xor(input: Tensor, other: Tensor) -> Tensor:
    return apply(_logical_xor, input, other)


def logical_not(input: Tensor) -> Tensor:
    return apply(_logical_not, input)


def bitwise_and(input, other) -> Tensor:
    return apply(_bitwise_and, input, other)


def bitwise_or(input, other) -> Tensor:
    return apply(_bitwise_or, input, other)


def bitwise_xor(input, other) -> Tensor:
    return apply(_bitwise_xor, input, other)


def bitwise_not(input: Tensor) -> Tensor:
    return apply(_bitwise_not, input)


def _invert(self: Tensor) -> Tensor:
    if self._data.dtype.kind in FLOATING_KINDS:
        raise TypeError(f"~ (operator.invert) is only implemented on integer and Boolean-type tensors "
                        f"(got {self.dtype})")
    return apply(_bitwise_not, self)


# ---------------------------------------------------------------- maximum, minimum
def _maximum_vjp(g, out, a, b):
    g = where(a == b, g / 2, g)  # ties split the gradient evenly; NaN compares unequal and flows to both
    return ub(zero_where(a < b, g), a), ub(zero_where(a > b, g), b)


def _minimum_vjp(g, out, a, b):
    g = where(a == b, g / 2, g)
    return ub(zero_where(a > b, g), a), ub(zero_where(a < b, g), b)


def _fmax_vjp(g, out, a, b):
    pick_a = (a >= b) | (b != b)  # fmax ignores a NaN operand; ties go to ``a``
    return ub(keep_where(pick_a, g), a), ub(zero_where(pick_a, g), b)


def _fmin_vjp(g, out, a, b):
    pick_a = (a <= b) | (b != b)
    return ub(keep_where(pick_a, g), a), ub(zero_where(pick_a, g), b)


def _no_complex(name: str) -> tuple:
    return RuntimeError, f"{name} not implemented for complex tensors."


_maximum = Op("maximum", lambda xp, a, b: xp.maximum(a, b), _maximum_vjp, promote="common", elementwise=True,
              ufunc="maximum", onnx="Max", complex_error=_no_complex("maximum"))
_minimum = Op("minimum", lambda xp, a, b: xp.minimum(a, b), _minimum_vjp, promote="common", elementwise=True,
              ufunc="minimum", onnx="Min", complex_error=_no_complex("minimum"))
_fmax = Op("fmax", lambda xp, a, b: xp.fmax(a, b), _fmax_vjp, promote="common", elementwise=True, out_form="fmax",
           onnx=_onnx_nan_ignoring("Max"), complex_error=_no_complex("fmax"))
_fmin = Op("fmin", lambda xp, a, b: xp.fmin(a, b), _fmin_vjp, promote="common", elementwise=True, out_form="fmin",
           onnx=_onnx_nan_ignoring("Min"), complex_error=_no_complex("fmin"))


def maximum(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum, propagating NaN."""
    return apply(_maximum, input, other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    return apply(_minimum, input, other)


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum that ignores a NaN operand."""
    return apply(_fmax, input, other)


def fmin(input: Tensor, other: Tensor) -> Tensor:
    return apply(_fmin, input, other)


# ---------------------------------------------------------------- clamp
def _clamp_vjp(g, out, x, lo, hi):
    # the boundary passes the gradient to ``x``; with min > max everything goes to ``max``
    gx = ub(keep_where((x >= lo) & (x <= hi), g), x)
    glo = ub(keep_where((x < lo) & (lo < hi), g), lo) if isinstance(lo, Tensor) else None
    ghi = ub(keep_where((x > hi) | (hi < lo), g), hi) if isinstance(hi, Tensor) else None
    return gx, glo, ghi


def _clamp_min_vjp(g, out, x, lo):
    return (ub(keep_where(x >= lo, g), x),
            ub(keep_where(x < lo, g), lo) if isinstance(lo, Tensor) else None)


def _clamp_max_vjp(g, out, x, hi):
    return (ub(keep_where(x <= hi, g), x),
            ub(keep_where(x > hi, g), hi) if isinstance(hi, Tensor) else None)


def _bool_bounds(out, *bounds):
    """PyTorch clamps a bool tensor by bool tensors, but not by Python bools."""
    if out.dtype.kind == "b" and any(b.__class__ is bool for b in bounds):
        raise TypeError('"clamp" not implemented for \'Bool\' with Python bool bounds')
    return out


# relu shares it: PyTorch's relu is a clamp
CLAMP_COMPLEX = (NotImplementedError, "clamp is not supported for complex types")
_clamp = Op("clamp", lambda xp, x, lo, hi: _bool_bounds(xp.minimum(xp.maximum(x, lo), hi), lo, hi),
            _clamp_vjp, promote="common", elementwise=True, aliases=("clip",), onnx=_onnx_clamp,
            complex_error=CLAMP_COMPLEX)
def _clamp_number(xp, x, bound, out=None, upper=False):
    """``maximum(x, bound)`` (``minimum``: ``upper``) into ``out`` (a new array: None) in one numba pass, for a
    float32 contiguous ``x`` and a number ``bound`` float32 holds; None where it does not take them. PyTorch's
    floats, signed zeros too (numpy's maximum gives ``bound`` for ``-0.0`` against ``0.0``, ATen ``x``)."""
    if type(bound) not in (float, int) or not -3.4e38 < bound < 3.4e38 or not x.size or not kernels.use(xp, x):
        return None
    if out is None:
        out = np.empty_like(x)
    elif out is not x and (not kernels.use(xp, out) or out.shape != x.shape):
        return None
    kernels.parallel(kernels.loops("pointwise").clamp, 2, x.ravel(), out.ravel(), np.float32(bound), upper)
    return out


def _clamp_min_fwd(xp, x, lo):
    out = _clamp_number(xp, x, lo)
    return out if out is not None else _bool_bounds(xp.maximum(x, lo), lo)


def _clamp_max_fwd(xp, x, hi):
    out = _clamp_number(xp, x, hi, upper=True)
    return out if out is not None else _bool_bounds(xp.minimum(x, hi), hi)


def _clamp_min_out(xp, x, lo, *, out):
    if _clamp_number(xp, x, lo, out[0]) is None:
        if x.dtype.kind == "b":
            out[0][...] = _clamp_min_fwd(xp, x, lo)
        else:   # a tensor bound, a small or strided x: numpy's maximum into the target
            xp.maximum(x, lo, out=out[0])


def _clamp_max_out(xp, x, hi, *, out):
    if _clamp_number(xp, x, hi, out[0], upper=True) is None:
        if x.dtype.kind == "b":
            out[0][...] = _clamp_max_fwd(xp, x, hi)
        else:
            xp.minimum(x, hi, out=out[0])


_clamp_min = Op("clamp_min", _clamp_min_fwd, _clamp_min_vjp, promote="common", elementwise=True,
                inplace=("clamp_min_",), onnx=lambda g, x, lo: g.op("Max", x, lo), out_form="maximum",
                fwd_out=_clamp_min_out, complex_error=CLAMP_COMPLEX)
_clamp_max = Op("clamp_max", _clamp_max_fwd, _clamp_max_vjp, promote="common", elementwise=True,
                inplace=("clamp_max_",), onnx=lambda g, x, hi: g.op("Min", x, hi), out_form="minimum",
                fwd_out=_clamp_max_out, complex_error=CLAMP_COMPLEX)


def _clamp_args(min, max):
    if min is None:
        if max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        return _clamp_max, (max,)
    return (_clamp_min, (min,)) if max is None else (_clamp, (min, max))


def clamp(input: Tensor, min=None, max=None) -> Tensor:
    """Limit ``input`` to [min, max]; the bounds are numbers or tensors (promoted with ``input``)."""
    op, bounds = _clamp_args(min, max)
    return apply(op, input, *bounds)


def clamp_(self: Tensor, min=None, max=None) -> Tensor:
    op, bounds = _clamp_args(min, max)
    return apply_(op, self, *bounds)


def clamp_min(input: Tensor, min) -> Tensor:
    return apply(_clamp_min, input, min)


def clamp_max(input: Tensor, max) -> Tensor:
    return apply(_clamp_max, input, max)


clip = clamp


# ---------------------------------------------------------------- where
def _where_vjp(g, out, cond, a, b):
    return (None,
            ub(keep_where(cond, g), a) if isinstance(a, Tensor) else None,
            ub(zero_where(cond, g), b) if isinstance(b, Tensor) else None)


# cond is never differentiable, so OTHERS saves exactly the condition
_where = Op("where", lambda xp, cond, a, b: xp.where(cond, a, b), _where_vjp, saves=OTHERS, elementwise=True,
            complex=True, onnx="Where")


def where(condition: Tensor, input=None, other=None):
    """``input`` where ``condition`` holds, else ``other``; numbers and tensors promote as in PyTorch.

    With only a condition, the indices of its nonzero elements (``condition.nonzero(as_tuple=True)``).
    """
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    if condition._data.dtype.kind != "b":
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with "
                           f"dtype {condition.dtype.scalar_type}")
    if isinstance(input, Tensor) and isinstance(other, Tensor) and input._data.dtype == other._data.dtype:
        return apply(_where, condition, input, other)
    input, other = (x.item() if isinstance(x, np.generic) else x for x in (input, other))   # as Python numbers
    rt = _dtype.result_type(input, other)
    return apply(_where, condition, _as(input, rt, condition), _as(other, rt, condition))


def _as(x, dt, like: Tensor) -> Tensor:
    if _DISPATCH.functions is not None:
        with DisableTorchFunction():   # where's own operand casts: no call a TorchFunctionMode sees, as PyTorch's
            return _as_unseen(x, dt, like)
    return _as_unseen(x, dt, like)


def _as_unseen(x, dt, like: Tensor) -> Tensor:
    if isinstance(x, Tensor):
        return x.to(dt)
    if not isinstance(x, numbers.Number):
        raise TypeError(f"where(): expected a Tensor or a number, got {type(x).__name__}")
    return _tensor(x, dtype=dt, device=like.device)


def _where_method(self: Tensor, condition: Tensor, other) -> Tensor:
    return where(condition, self, other)


# ---------------------------------------------------------------- Tensor surface
_OPERAND = (Tensor, int, float, numbers.Number)


def _inplace_bitwise(op):
    """``&=``, ``|=``, ``^=``: in place on self; NotImplemented for a ``refused_operand``."""
    def method(self, other):
        if refused_operand(other):
            return NotImplemented
        try:
            return apply_(op, self, other)
        except TypeError:   # a numpy array, which the operators take (array_operand)
            return apply_(op, self, array_operand(other))
    return method


def _comparison_operator(op, arrays: bool = False):
    """``==`` and friends: elementwise against tensors and numbers, NotImplemented otherwise;
    ``==`` (``arrays``) also against numpy arrays, as PyTorch's (``t == a``, ``a == t``), where its
    ``<`` refuses one and its ``!=`` falls back to identity; a tensor-like (its type defines
    ``__torch_function__``) gets the call."""
    def operator(self, other):
        if isinstance(other, _OPERAND):
            return apply(op, self, other)
        if arrays and isinstance(other, np.ndarray):
            return apply(op, self, _tensor(other, device=self.device))
        if hasattr(type(other), "__torch_function__"):   # a tensor-like: the dispatcher hands it the call
            return apply(op, self, other)
        return NotImplemented
    return operator


METHODS = ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
           "not_equal", "isclose", "allclose", "equal", "isnan", "isinf", "isposinf", "isneginf",
           "isfinite", "signbit", "logical_and", "logical_or", "logical_xor", "logical_not",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "maximum", "minimum", "fmax",
           "fmin", "clamp", "clip", "clamp_min", "clamp_max")
OPERATORS = {
    "__eq__": _comparison_operator(_eq, arrays=True), "__ne__": _comparison_operator(_ne),
    "__lt__": _comparison_operator(_lt), "__le__": _comparison_operator(_le),
    "__gt__": _comparison_operator(_gt), "__ge__": _comparison_operator(_ge),
    "__and__": binary(_bitwise_and), "__rand__": binary(_bitwise_and, reflected=True),
    "__or__": binary(_bitwise_or), "__ror__": binary(_bitwise_or, reflected=True),
    "__xor__": binary(_bitwise_xor), "__rxor__": binary(_bitwise_xor, reflected=True),
    "__iand__": _inplace_bitwise(_bitwise_and),
    "__ior__": _inplace_bitwise(_bitwise_or),
    "__ixor__": _inplace_bitwise(_bitwise_xor),
    "__invert__": _invert,
    "where": _where_method, "clamp_": clamp_, "clip_": clamp_,
}
