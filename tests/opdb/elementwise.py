"""OpInfos for elementwise arithmetic, math, comparisons, logical/bitwise ops and in-place forms.

Samples stay small: gradcheck perturbs one element at a time. Kink samples (values exactly at
0, at a clamp bound, at ties) skip the finite-difference checks, which are undefined there, and
compare the analytic gradient with PyTorch's choice instead.
"""
from __future__ import annotations

import numpy as np

from .core import ErrorInput, OpInfo, Sample, arr, pos, rng, unit


def ints(*shape, low=-3, high=4) -> np.ndarray:
    return rng().integers(low, high, size=shape)


def rounded(*shape) -> np.ndarray:
    """Integer-valued floats, so comparisons and maximum see ties."""
    return np.asarray(np.round(arr(*shape)))


def away_from_one(*shape) -> np.ndarray:
    """Values in (1.2, 3), for acosh."""
    return rng().uniform(1.2, 3.0, size=shape)


def binary(a=arr, b=arr, *, scalars=True, left=True) -> list:
    """Same shape, broadcasting, outer, 0-d, empty, non-contiguous and Python numbers on either side."""
    s = [Sample((a(2, 3), b(2, 3)), name="same"), Sample((a(2, 1, 3), b(3)), name="bcast"),
         Sample((a(2, 1), b(1, 3)), name="outer"), Sample((a(), b(2, 2)), name="0d"),
         Sample((a(2, 2), b()), name="0d_right"), Sample((a(), b()), name="0d_both"),
         Sample((a(0, 3), b(3)), name="empty"), Sample((a(3, 2), b(3, 2)), noncontig=True, name="noncontig")]
    if scalars:
        s.append(Sample((a(2, 3), float(b())), name="scalar_right"))
        if left:
            s.append(Sample((float(a()), b(2, 3)), name="scalar_left"))
    return s


def unary(a=arr, *, ints_too=True) -> list:
    s = [Sample((a(2, 3),), name="2d"), Sample((a(),), name="0d"), Sample((a(0, 2),), name="empty"),
         Sample((a(3, 2),), noncontig=True, name="noncontig")]
    if ints_too:
        s.append(Sample((np.array([[1, 2], [3, 1]]),), name="int"))
    return s


def promoting(a=arr, b=arr) -> list:
    """Integer and float operands mixed: the result follows PyTorch's promotion."""
    return [Sample((a(2, 3), ints(2, 3, low=1)), name="float_int"),
            Sample((ints(2, 3, low=1), b(2, 3)), name="int_float"),
            Sample((ints(2, 3, low=1), 0.5), name="int_scalar_float")]


def shape_error(n_args=2):
    return lambda: [ErrorInput(Sample((arr(2, 3), arr(4, 3)) + tuple(arr(2, 3) for _ in range(n_args - 2))),
                               RuntimeError, "size|shape")]


def kink(name, fn, samples, **kw) -> OpInfo:
    """Samples exactly at a kink: compare gradients with PyTorch, skip finite differences."""
    return OpInfo(name, fn, samples, gradcheck=False, **kw)


def flat(name, fn, samples, **kw) -> OpInfo:
    """Piecewise-constant ops: their zero gradient has no graph, so there is no second derivative to check."""
    return OpInfo(name, fn, samples, gradgrad=False, **kw)


def values(name, fn, samples, **kw) -> OpInfo:
    """Ops with bool/integer results or piecewise-constant outputs: forward only."""
    return OpInfo(name, fn, samples, grad=False, **kw)


def _unary_op(name, domain=arr, **kw):
    return OpInfo(name, lambda m, a: getattr(m, name)(a), lambda: unary(domain, ints_too=name != "frac"), **kw)


SPECIAL = np.array([[np.nan, np.inf, -np.inf], [0.0, -0.0, 1.5], [-2.0, 3.0, -1e-3]])
KINK = np.array([[-1.0, 0.0, 2.0], [0.0, -0.5, 1.0]])
TIES_A = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 2.5]])
TIES_B = np.array([[1.0, 1.0, 4.0], [0.0, 2.0, 2.5]])
NAN_A = np.array([1.0, 2.0, np.nan, np.nan, 3.0])
NAN_B = np.array([1.0, np.nan, 4.0, np.nan, 2.0])
BOUNDARY = np.array([[-1.0, 0.0, 0.5], [1.0, 2.0, 0.25]])
INT_A = np.array([[7, -7, 5], [-5, 0, 9]])
INT_B = np.array([[2, 2, -3], [-3, 4, 4]])
MASK = np.array([[True, False, True], [False, False, True]])

UNARY_OPS = [("exp", arr), ("exp2", arr), ("expm1", arr), ("log", pos), ("log2", pos), ("log10", pos),
             ("log1p", pos), ("sqrt", pos), ("rsqrt", pos), ("reciprocal", pos), ("sin", arr), ("cos", arr),
             ("tan", unit), ("asin", unit), ("acos", unit), ("atan", arr), ("sinh", arr), ("cosh", arr),
             ("tanh", arr), ("asinh", arr), ("acosh", away_from_one), ("atanh", unit), ("sigmoid", arr),
             ("erf", arr), ("erfc", arr), ("erfinv", unit), ("abs", arr), ("neg", arr), ("square", arr),
             ("frac", arr)]
ALIASES = [("arcsin", unit), ("arccos", unit), ("arctan", arr), ("arcsinh", arr), ("arccosh", away_from_one),
           ("arctanh", unit), ("negative", arr), ("absolute", arr)]

OPS = [
    # ------------------------------------------------------------ arithmetic
    OpInfo("add", lambda m, a, b: m.add(a, b), lambda: binary(left=False) + promoting(), errors=shape_error()),
    OpInfo("add_alpha", lambda m, a, b: m.add(a, b, alpha=2), lambda: binary(scalars=False)[:3]),
    OpInfo("add_op", lambda m, a, b: a + b, lambda: binary()),
    OpInfo("sub", lambda m, a, b: m.sub(a, b), lambda: binary(left=False) + promoting(), errors=shape_error()),
    OpInfo("sub_alpha", lambda m, a, b: m.sub(a, b, alpha=-1.5), lambda: binary(scalars=False)[:3]),
    OpInfo("sub_op", lambda m, a, b: a - b, lambda: binary()),
    OpInfo("rsub", lambda m, a, b: m.rsub(a, b), lambda: binary(left=False)),
    OpInfo("rsub_alpha", lambda m, a, b: m.rsub(a, b, alpha=3), lambda: binary(scalars=False)[:2]),
    OpInfo("mul", lambda m, a, b: m.mul(a, b), lambda: binary(left=False) + promoting(), errors=shape_error()),
    OpInfo("mul_op", lambda m, a, b: a * b, lambda: binary()),
    OpInfo("div", lambda m, a, b, **kw: m.div(a, b, **kw), lambda: binary(arr, pos, left=False) + promoting(arr, pos),
       errors=lambda: shape_error()() + [ErrorInput(Sample((arr(2), pos(2)), {"rounding_mode": "round"}),
                                                     RuntimeError, "rounding_mode")]),
    OpInfo("div_op", lambda m, a, b: a / b, lambda: binary(pos, pos)),
    OpInfo("true_divide", lambda m, a, b: m.true_divide(a, b), lambda: binary(arr, pos, scalars=False)[:2]),
    flat("div_trunc", lambda m, a, b: m.div(a, b, rounding_mode="trunc"), lambda: binary(arr, pos, left=False)),
    flat("div_floor", lambda m, a, b: m.div(a, b, rounding_mode="floor"), lambda: binary(arr, pos, left=False)),
    values("div_modes_int", lambda m, a, b: (m.div(a, b, rounding_mode="trunc"), m.div(a, b, rounding_mode="floor"),
                                             m.div(a, b), a // b, a % b, m.fmod(a, b), m.remainder(a, 3)),
           lambda: [Sample((INT_A, INT_B)), Sample((INT_A, INT_B), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((INT_A, np.zeros((2, 3), np.int64))), RuntimeError, "ZeroDivisionError")]),
    values("div_modes_signed_zero", lambda m, a, b: (m.div(a, b, rounding_mode="floor"), a // b, a % b),
           lambda: [Sample((np.array([5.0, -5.0, 0.0, 1.0, -3.0]), np.array([0.0, 0.0, -2.0, -0.5, 1.5])))]),
    # torch.floor_divide has no derivative (backward raises); tapelab's is zero like div(rounding_mode=...)
    values("floor_divide", lambda m, a, b: m.floor_divide(a, b), lambda: binary(arr, pos, left=False)),
    values("floordiv_op", lambda m, a, b: a // b, lambda: binary(pos, pos)),
    OpInfo("remainder", lambda m, a, b: m.remainder(a, b), lambda: binary(arr, pos, left=False) + [
        Sample((arr(2, 3), -pos(2, 3)), name="negative_divisor")]),
    OpInfo("mod_op", lambda m, a, b: a % b, lambda: binary(arr, pos, left=False)),
    values("rmod_rfloordiv", lambda m, b: (5.5 % b, -5.5 % b, 3 // b), lambda: [Sample((arr(2, 3),))]),
    OpInfo("fmod", lambda m, a, b: m.fmod(a, b), lambda: binary(arr, pos, left=False) + [
        Sample((arr(2, 3), -pos(2, 3)), name="negative_divisor")]),
    OpInfo("pow", lambda m, a, b: m.pow(a, b), lambda: binary(pos, arr) + [
        Sample((arr(2, 3), 2), name="int_exponent"),
        Sample((pos(2, 3), ints(2, 3)), name="int_tensor_exponent")]),
    OpInfo("pow_op", lambda m, a, b: a ** b, lambda: binary(pos, arr)),
    values("pow_int", lambda m, a, b: (a ** b, m.pow(2, b), 2.0 ** b, a ** 0.5),
           lambda: [Sample((ints(2, 3, low=1), ints(2, 3, low=0)))],
           errors=lambda: [ErrorInput(Sample((ints(2, 2, low=1), -1)), RuntimeError, "negative")]),
    kink("pow_zero", lambda m, a, b: m.pow(a, b),
         lambda: [Sample((np.array([0.0, 0.0, 2.0, 0.0, 1.5]), np.array([0.0, 2.0, 0.0, 0.5, 3.0])), name="base0"),
                  Sample((0.0, np.array([0.0, 2.0, 1.5])), name="scalar_base0"),
                  Sample((np.array([0.0, 1.0, -2.0]), 0.0), name="exp0"), Sample((arr(2, 3), 0), name="int_exp0")],
         gradgrad=False),
    values("sign", lambda m, a: m.sign(a), lambda: unary() + [Sample((SPECIAL,), name="special"),
                                                              Sample((MASK,), name="bool")]),
    OpInfo("sign_grad", lambda m, a: m.sign(a) * a, lambda: [Sample((arr(2, 3),))]),
    values("sgn", lambda m, a: m.sgn(a), lambda: [Sample((KINK,))]),
    kink("abs_kink", lambda m, a: m.abs(a), lambda: [Sample((KINK,))]),
    kink("relu_kink", lambda m, a: m.relu(a), lambda: [Sample((KINK,))]),
    OpInfo("relu", lambda m, a: m.relu(a), lambda: unary()),
    values("neg_unsigned", lambda m, a: -a, lambda: [Sample((np.array([0, 1, 200], np.uint8),))]),
    *[_unary_op(name, domain) for name, domain in UNARY_OPS],
    *[_unary_op(name, domain, gradgrad=False) for name, domain in ALIASES],
    flat("rounding", lambda m, a: (m.floor(a), m.ceil(a), m.trunc(a), m.round(a), m.fix(a)), lambda: unary()),
    values("rounding_values", lambda m, a: (m.floor(a), m.ceil(a), m.trunc(a), m.round(a), m.frac(a)),
           lambda: [Sample((np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -2.7]),)),
                    Sample((SPECIAL,), name="special")]),
    flat("round_decimals", lambda m, a: m.round(a, decimals=2), lambda: unary(ints_too=False)),
    values("round_decimals_values", lambda m, a: (m.round(a, decimals=1), m.round(a, decimals=-1)),
           lambda: [Sample((np.array([1.25, 1.35, 123.0, -155.0, 0.05]),))]),
    # ------------------------------------------------------------ binary math
    OpInfo("atan2", lambda m, a, b: m.atan2(a, b), lambda: binary(scalars=False) + promoting()[:2],
       errors=shape_error()),
    OpInfo("arctan2", lambda m, a, b: m.arctan2(a, b), lambda: binary(scalars=False)[:1]),
    kink("atan2_origin", lambda m, a, b: m.atan2(a, b),
         lambda: [Sample((np.array([0.0, 1.0]), np.array([0.0, -2.0])))]),
    OpInfo("hypot", lambda m, a, b: m.hypot(a, b), lambda: binary(scalars=False), errors=shape_error()),
    OpInfo("logaddexp", lambda m, a, b: m.logaddexp(a, b), lambda: binary(scalars=False) + [
        Sample((np.array([-1000.0, 1000.0, 3.0]), np.array([-1000.0, 999.0, -500.0])), name="extreme")],
       errors=shape_error()),
    OpInfo("xlogy", lambda m, a, b: m.xlogy(a, b), lambda: binary(arr, pos) + promoting(arr, pos)[:2],
       errors=shape_error()),
    kink("xlogy_zero", lambda m, a, b: m.xlogy(a, b),
         lambda: [Sample((np.array([0.0, 0.0, 1.0, 2.0]), np.array([0.0, 2.0, np.nan, 3.0])))]),
    OpInfo("maximum", lambda m, a, b: m.maximum(a, b), lambda: binary(scalars=False) + promoting()[:2],
       errors=shape_error()),
    OpInfo("minimum", lambda m, a, b: m.minimum(a, b), lambda: binary(scalars=False) + promoting()[:2],
       errors=shape_error()),
    OpInfo("fmax", lambda m, a, b: m.fmax(a, b), lambda: binary(scalars=False)),
    OpInfo("fmin", lambda m, a, b: m.fmin(a, b), lambda: binary(scalars=False)),
    kink("extrema_ties", lambda m, a, b: (m.maximum(a, b), m.minimum(a, b), m.fmax(a, b), m.fmin(a, b)),
         lambda: [Sample((TIES_A, TIES_B)), Sample((TIES_A, np.array([1.0, 2.0, 2.5])), name="bcast")]),
    kink("extrema_nan", lambda m, a, b: (m.maximum(a, b), m.minimum(a, b), m.fmax(a, b), m.fmin(a, b)),
         lambda: [Sample((NAN_A, NAN_B))]),
    OpInfo("clamp", lambda m, a, *b: m.clamp(a, *b), lambda: [
        Sample((arr(2, 3), -0.5, 0.5), name="numbers"), Sample((arr(), -0.5, 0.5), name="0d"),
        Sample((arr(0, 3), -0.5, 0.5), name="empty"), Sample((arr(3, 2), -0.5, 0.5), noncontig=True, name="noncontig"),
        Sample((arr(2, 3), arr(2, 3) - 1, arr(3) + 1), name="tensors"),
        Sample((arr(2, 3), arr(1, 3) - 1, arr(2, 1) + 1), name="tensor_bcast"),
        Sample((arr(3), arr(2, 1) - 0.5, arr(2, 3) + 0.5),
                                                                      name="bounds_broadcast_input")]),
    OpInfo("clamp_min_only", lambda m, a, lo: m.clamp(a, min=lo), lambda: [
        Sample((arr(2, 3), 0.1)), Sample((arr(2, 3), arr(3)), name="tensor")]),
    OpInfo("clamp_max_only", lambda m, a, hi: m.clamp(a, max=hi), lambda: [
        Sample((arr(2, 3), 0.1)), Sample((arr(2, 3), arr(2, 1)), name="tensor")]),
    OpInfo("clamp_min_max_fns", lambda m, a, b: (m.clamp_min(a, b), m.clamp_max(a, b)), lambda: [
        Sample((arr(2, 3), 0.1)), Sample((arr(2, 3), arr(3)), name="tensor")]),
    OpInfo("clip", lambda m, a: m.clip(a, -1, 1), lambda: unary()),
    kink("clamp_boundary", lambda m, a, *b: m.clamp(a, *b), lambda: [
        Sample((BOUNDARY, 0.0, 1.0), name="numbers"),
        Sample((BOUNDARY, np.zeros(3), np.ones(3)), name="tensors"),
        Sample((BOUNDARY, np.full(3, 2.0), np.ones(3)), name="min_above_max"),
        Sample((BOUNDARY, 0.5, 0.25), name="numbers_min_above_max")]),
    values("clamp_int", lambda m, a: (m.clamp(a, -2, 3), m.clamp(a, min=0.5), a.clamp(max=1)),
           lambda: [Sample((INT_A,))]),
    values("clamp_no_bounds", lambda m, a: m.clamp(a), lambda: [],
           errors=lambda: [ErrorInput(Sample((arr(2),)), RuntimeError, "min.*max")]),
    OpInfo("where", lambda m, c, a, b: m.where(c, a, b), lambda: [
        Sample((MASK, arr(2, 3), arr(2, 3)), name="same"), Sample((MASK, arr(3), arr(2, 1)), name="bcast"),
        Sample((MASK[0], arr(2, 3), arr()), name="cond_bcast_0d"), Sample((MASK, arr(2, 3), 0.5), name="scalar_other"),
        Sample((MASK, -1.5, arr(2, 3)), name="scalar_input"),
        Sample((MASK, arr(2, 3), arr(2, 3)), noncontig=True, name="noncontig"),
        Sample((np.zeros((0, 3), bool), arr(0, 3), arr(3)), name="empty"),
        Sample((MASK, ints(2, 3), arr(2, 3)), name="promote")],
       errors=lambda: [ErrorInput(Sample((arr(2, 3), arr(2, 3), arr(2, 3))), RuntimeError, "boolean"),
                       ErrorInput(Sample((MASK, arr(4, 3), arr(2, 3))), RuntimeError, "size|shape")]),
    values("where_numbers", lambda m, c, a, b: m.where(c, a, b), lambda: [
        Sample((MASK, 1.0, 0), name="float_int"), Sample((MASK, 2, 0), name="ints"),
        Sample((MASK, ints(2, 3), 0.5), name="int_tensor_float")]),
    OpInfo("where_method", lambda m, a, c, b: a.where(c, b), lambda: [Sample((arr(2, 3), MASK, arr(2, 3)))]),
    OpInfo("lerp", lambda m, a, b, w: m.lerp(a, b, w), lambda: [
        Sample((arr(2, 3), arr(2, 3), 0.3), name="scalar_weight"), Sample((arr(2, 3), arr(3), 0.8), name="bcast"),
        Sample((arr(2, 3), arr(2, 3), unit(2, 3)), name="tensor_weight"),
        Sample((arr(3), arr(2, 1), arr(2, 3)), name="all_bcast"), Sample((arr(), arr(), arr()), name="0d"),
        Sample((arr(3, 2), arr(3, 2), arr(3, 2)), noncontig=True, name="noncontig"),
        Sample((arr(2, 3), arr(2, 3), 1.5), name="extrapolate")], errors=shape_error(3)),
    OpInfo("addcmul", lambda m, a, b, c, **kw: m.addcmul(a, b, c, **kw), lambda: [
        Sample((arr(2, 3), arr(2, 3), arr(2, 3)), name="same"), Sample((arr(3), arr(2, 1), arr(2, 3)), name="bcast"),
        Sample((arr(2, 3), arr(2, 3), arr(2, 3)), {"value": -0.5}, name="value"),
        Sample((arr(), arr(), arr()), name="0d"),
        Sample((arr(3, 2), arr(3, 2), arr(3, 2)), noncontig=True, name="noncontig")],
       errors=shape_error(3)),
    OpInfo("addcdiv", lambda m, a, b, c, **kw: m.addcdiv(a, b, c, **kw), lambda: [
        Sample((arr(2, 3), arr(2, 3), pos(2, 3)), name="same"), Sample((arr(3), arr(2, 1), pos(2, 3)), name="bcast"),
        Sample((arr(2, 3), arr(2, 3), pos(2, 3)), {"value": 2}, name="value"),
        Sample((arr(3, 2), arr(3, 2), pos(3, 2)), noncontig=True, name="noncontig")],
       errors=lambda: shape_error(3)() + [ErrorInput(Sample((arr(2), ints(2), ints(2, low=1))),
                                                     RuntimeError, "Integer division")]),
    OpInfo("nan_to_num", lambda m, a, **kw: m.nan_to_num(a, **kw), lambda: [
        Sample((SPECIAL,), name="default"),
        Sample((SPECIAL,), {"nan": 1.0, "posinf": 9.0, "neginf": -9.0}, name="values"),
        Sample((SPECIAL,), noncontig=True, name="noncontig"), Sample((arr(),), name="0d")]),
    values("nan_to_num_int", lambda m, a: m.nan_to_num(a), lambda: [Sample((INT_A,))]),
    # ------------------------------------------------------------ comparisons
    values("compare", lambda m, a, b: (m.eq(a, b), m.ne(a, b), m.lt(a, b), m.le(a, b), m.gt(a, b), m.ge(a, b)),
           lambda: binary(rounded, rounded, left=False) + promoting(rounded, rounded), errors=shape_error()),
    values("compare_op", lambda m, a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b),
           lambda: binary(rounded, rounded)),
    values("compare_aliases", lambda m, a, b: (m.greater(a, b), m.greater_equal(a, b), m.less(a, b),
                                               m.less_equal(a, b), m.not_equal(a, b)),
           lambda: binary(rounded, rounded, scalars=False)[:2]),
    values("compare_methods", lambda m, a, b: (a.eq(b), a.ne(b), a.lt(b), a.le(b), a.gt(b), a.ge(b)),
           lambda: binary(rounded, rounded, left=False)[:3]),
    values("compare_nan", lambda m, a, b: (a == b, a != b, a < b, a >= b), lambda: [Sample((NAN_A, NAN_B))]),
    values("compare_int", lambda m, a, b: (a == b, a < b, a > 0.5, a <= -1, a == 2.0),
           lambda: [Sample((INT_A, INT_B)), Sample((INT_A, rounded(2, 3)), name="int_float")]),
    values("eq_none", lambda m, a: (a == None, a != None, a == "x"),  # noqa: E711
           lambda: [Sample((arr(2),))]),
    values("isclose", lambda m, a, b, **kw: m.isclose(a, b, **kw), lambda: [
        Sample((arr(2, 3), arr(2, 3)), name="random"),
        Sample((np.array([1.0, 1.0, np.nan, np.inf, 1e-9]), np.array([1.0 + 1e-6, 1.1, np.nan, np.inf, 0.0])),
               name="edges"),
        Sample((np.array([1.0, np.nan]), np.array([1.05, np.nan])), {"rtol": 0.1, "equal_nan": True}, name="tol"),
        Sample((arr(2, 3), arr(3)), name="bcast")],
        errors=lambda: [ErrorInput(Sample((arr(2), ints(2))), RuntimeError, "did not match")]),
    values("allclose_equal", lambda m, a, b: (m.allclose(a, b), m.allclose(a, a), m.equal(a, b), m.equal(a, a),
                                              m.equal(a, a.reshape(3, 2))),
           lambda: [Sample((arr(2, 3), arr(2, 3)))], meta_error=RuntimeError),
    values("equal_mixed", lambda m, a, b: m.equal(a, b), lambda: [Sample((INT_A, INT_A * 1.0))],
           meta_error=NotImplementedError),
    values("isnan_family", lambda m, a: (m.isnan(a), m.isinf(a), m.isfinite(a), m.signbit(a), m.isposinf(a),
                                         m.isneginf(a)),
           lambda: [Sample((SPECIAL,)), Sample((SPECIAL,), noncontig=True, name="noncontig"),
                    Sample((INT_A,), name="int"), Sample((arr(),), name="0d")]),
    # ------------------------------------------------------------ logical and bitwise
    values("logical", lambda m, a, b: (m.logical_and(a, b), m.logical_or(a, b), m.logical_xor(a, b),
                                       m.logical_not(a), a.logical_and(b)),
           lambda: [Sample((MASK, MASK[::-1].copy())), Sample((rounded(2, 3), INT_B), name="mixed"),
                    Sample((MASK, MASK[0].copy()), name="bcast")], errors=shape_error()),
    values("bitwise", lambda m, a, b: (m.bitwise_and(a, b), m.bitwise_or(a, b), m.bitwise_xor(a, b),
                                       m.bitwise_not(a), a & b, a | b, a ^ b, ~a),
           lambda: [Sample((INT_A, INT_B)), Sample((MASK, MASK[::-1].copy()), name="bool"),
                    Sample((MASK, INT_B), name="bool_int"), Sample((INT_A, 6), name="scalar"),
                    Sample((INT_A, INT_B[0].copy()), name="bcast")],
           errors=lambda: [ErrorInput(Sample((arr(2), INT_A[0, :2].copy())), RuntimeError,
                                      "bitwise_and|not supported")]),
    values("bitwise_reflected", lambda m, a: (6 & a, 6 | a, 6 ^ a), lambda: [Sample((INT_A,))]),
    # ------------------------------------------------------------ methods and in-place forms
    OpInfo("methods", lambda m, a, b: (a.add(b, alpha=0.5), a.sub(b), a.mul(b), a.div(b), a.pow(2), a.exp(),
                                   a.maximum(b), a.clamp(-1, 1), a.lerp(b, 0.25), a.atan2(b), a.xlogy(b)),
       lambda: [Sample((arr(2, 3), pos(2, 3)))]),
    OpInfo("inplace_binary", lambda m, a, b, name, **kw: getattr(a * 1, name)(b, **kw), lambda: [
        Sample((arr(2, 3), arr(2, 3), n), name=n) for n in
        ("add_", "sub_", "mul_", "atan2_", "hypot_", "fmod_", "remainder_")] + [
        Sample((arr(2, 3), arr(3), "add_"), {"alpha": 2}, name="add_alpha_bcast"),
        Sample((arr(2, 3), 1.5, "sub_"), {"alpha": 2}, name="sub_scalar"),
        Sample((arr(2, 3), pos(2, 3), "div_"), name="div_"),
        Sample((pos(2, 3), arr(2, 3), "pow_"), name="pow_"), Sample((arr(2, 3), 3, "pow_"), name="pow_int"),
        Sample((pos(2, 3), pos(2, 3), "xlogy_"), name="xlogy_")],
       errors=lambda: [ErrorInput(Sample((arr(2, 3), arr(2, 1, 3), "add_")), RuntimeError, "shape")]),
    OpInfo("inplace_unary", lambda m, a, name: getattr(a * 1, name)(), lambda: [
        Sample((unit(2, 3), n), name=n) for n in
        ("exp_", "log1p_", "sin_", "cos_", "tan_", "asin_", "sigmoid_", "tanh_", "erf_", "erfinv_",
         "neg_", "abs_", "square_", "frac_", "relu_", "expm1_", "exp2_", "nan_to_num_", "arcsin_")] + [
        Sample((pos(2, 3), n), name=n) for n in ("sqrt_", "rsqrt_", "reciprocal_", "log_", "log2_")]),
    # torch has no derivative for these in-place forms; tapelab's equal the out-of-place ones
    values("inplace_nograd", lambda m, a: ((a * 1).atanh_(), (a + 2).acosh_(), (a * 1).floor_divide_(0.7)),
           lambda: [Sample((unit(2, 3),))]),
    OpInfo("inplace_params", lambda m, a: ((a * 1).clamp_(-0.5, 0.5), (a * 1).clamp_(min=0.1), (a * 1).clip_(max=0.2),
                                       (a * 1).round_(decimals=1), (a * 1).fill_(2.5), (a * 1).clamp_min_(0.0),
                                       (a * 1).lerp_(a * 2, 0.3), (a * 1).addcmul_(a, a, value=2),
                                       (a * 1).addcdiv_(a, a + 3, value=0.5), (a * 1).true_divide_(3),
                                       (a * 1).nan_to_num_(posinf=1.0)),
       lambda: [Sample((arr(2, 3),))]),
    flat("inplace_flat", lambda m, a: ((a * 1).floor_(), (a * 1).ceil_(), (a * 1).trunc_(), (a * 1).fix_(),
                                       (a * 1).round_(), (a * 1).sign_(), (a * 1).zero_(),
                                       (a * 1).div_(0.7, rounding_mode="floor"),
                                       (a * 1).div_(a + 3, rounding_mode="trunc")),
         lambda: [Sample((arr(2, 3),))]),
    OpInfo("inplace_tensor_bound", lambda m, a, lo: (a * 1).clamp_(min=lo), lambda: [Sample((arr(2, 3), arr(3)))]),
    flat("fill_tensor", lambda m, a, v: (a * 1).fill_(v), lambda: [Sample((arr(2, 3), arr()))],
       errors=lambda: [ErrorInput(Sample((arr(2, 3), arr(2))), RuntimeError, "0-dimension")]),
    OpInfo("inplace_operators", lambda m, a, b: _augmented(a * 1, b), lambda: [
        Sample((pos(2, 3), pos(2, 3)), name="tensor"), Sample((pos(2, 3), 1.5), name="scalar"),
        Sample((pos(2, 3), pos(3)), name="bcast")]),
    values("inplace_int_bool", lambda m, a, b: _int_augmented(a.clone(), b, m), lambda: [Sample((INT_A, INT_B))],
           errors=lambda: [ErrorInput(Sample((INT_A, 0.5)), RuntimeError, "can't be cast")]),
    values("inplace_compare", lambda m, a, b: ((a * 1).eq_(b), (a * 1).lt_(b), (a * 1).ge_(0.0),
                                               (a * 1).logical_and_(b), (a * 1).logical_not_()),
           lambda: [Sample((rounded(2, 3), rounded(2, 3)))]),
    OpInfo("inplace_float_into_half", lambda m, a, b: (a.to(m.float16) * 1).add_(b),
           lambda: [Sample((arr(2, 3), arr(2, 3)))], gradcheck=False, atol=1e-3, rtol=1e-3, grad_atol=1e-3),
]


def _augmented(a, b):
    a += b
    a *= b
    a -= b
    a /= b
    a **= 2
    return a


def _int_augmented(a, b, m):
    a //= b
    a %= 5
    a &= 6
    a |= 1
    a ^= 3
    mask = a > 0
    mask &= a < 4
    mask |= a == -1
    return a, mask, a.bitwise_not_(), a.clone().fill_(2.7)
