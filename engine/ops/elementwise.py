"""Elementwise arithmetic and math: one Op per primitive, vjps written in Tensor ops.

Gradients of broadcasting binary ops are summed back to each input's shape by ``unbroadcast``;
gradients at kinks and of piecewise-constant ops follow PyTorch's derivatives.yaml. Ops declared
``complex=True`` take complex tensors too: their vjps multiply by the conjugate of the local
derivative (``cj``), PyTorch's convention for holomorphic functions; a real gradient takes the
real expression after one dtype test, so real steps run the vjps they always ran.
Comparisons, selection (where, clamp, maximum) and logical/bitwise ops live in ``compare``.
"""
from __future__ import annotations

import cmath
import math
import numbers
import warnings
from math import prod

import numpy as np

from ..base.device import CPU
from ..base.dispatch_state import STATE as _DISPATCH
from ..base.grad_mode import is_grad_enabled
from ..core.overrides import handle_torch_function, has_tensor_like
from .. import kernels
from ..base import backend as _backend
from ..kernels import device as device_kernels
from ..kernels import vml as _vml
from ..base.meta import has_data
from ..core.creation import tensor as _tensor, zeros_like
from ..core.dispatch import apply, array_operand, binary, reflected_failure, refused_operand, unary
from ..autograd.views import apply_, fill_outside_autograd
from .compare import CLAMP_COMPLEX, isfinite, keep_where, where, zero_where
from .conjugation import conj as cj, sgn
from ..core.registry import ALL, NONE, OTHERS, Op, kernel_refusal
from ._util import Tensor, sum_to, unbroadcast as ub
from ._array_vjp import in_order, in_row_order, operand
from ..base.dtype import BFLOAT16_NP, FLOATING_KINDS, REDUCED_NP, in_float32, in_opmath, result_type as _result_type

__all__ = ["add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod",
           "pow", "neg", "abs", "sign", "reciprocal", "square", "exp", "exp2", "expm1", "log",
           "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan",
           "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "relu", "erf", "erfc",
           "erfinv", "floor", "ceil", "round", "trunc", "fix", "frac", "atan2", "hypot", "logaddexp",
           "xlogy", "lerp", "addcmul", "addcdiv", "nan_to_num", "multiply", "subtract", "divide",
           "negative", "absolute", "arcsin", "arccos", "arctan", "arctan2", "arcsinh", "arccosh",
           "arctanh"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``)
# Each receives the exporter's emitter ``g`` (tapelab.onnx); see engine/onnx/_emitter.py.
def _onnx_add(g, a, b, alpha=1):
    return g.op("Add", a, b if alpha == 1 else g.op("Mul", b, alpha))


def _onnx_sub(g, a, b, alpha=1):
    """``a - const`` as ``a + (-const)``: onnxruntime folds Add/Mul chains after a Conv into its weights
    (an eval BatchNorm's ``x - running_mean``), not a Sub."""
    if alpha != 1:
        return g.op("Sub", a, g.op("Mul", b, alpha))
    v = g.constant_value(b)
    if v is not None and v.dtype.kind == "f":
        return g.op("Add", a, g.const(-v))
    return g.op("Sub", a, b)


def _onnx_atan2(g, a, b):
    """atan(a / b) moved to the right quadrant; 0 where both are 0."""
    q = g.op("Atan", g.op("Div", a, b))
    pi = g.scalar(math.pi, a)
    q = g.op("Add", q, g.op("Where", g.op("Less", b, 0.0), g.op("Where", g.op("Less", a, 0.0), g.op("Neg", pi), pi), 0.0))
    return g.op("Where", g.op("And", g.op("Equal", a, 0.0), g.op("Equal", b, 0.0)), 0.0, q)


def _onnx_logaddexp(g, a, b):
    gap = g.op("Exp", g.op("Neg", g.op("Abs", g.op("Sub", a, b))))
    return g.op("Add", g.op("Max", a, b), g.op("Log", g.op("Add", gap, 1.0)))


def _onnx_lerp(g, a, b, w):
    d = g.op("Sub", b, a)
    if not isinstance(w, str):            # a Python weight picks its branch here, as the forward does
        return g.op("Add", a, g.op("Mul", d, w)) if -0.5 < w < 0.5 else g.op("Sub", b, g.op("Mul", d, 1 - w))
    near_a = g.op("Less", g.op("Abs", w), 0.5)
    return g.op("Where", near_a, g.op("Add", a, g.op("Mul", w, d)), g.op("Sub", b, g.op("Mul", d, g.op("Sub", 1.0, w))))


def _onnx_nan_to_num(g, a, *, nan=0.0, posinf=None, neginf=None):
    lo, hi = g.limits(a)
    a = g.op("Where", g.op("IsNaN", a), nan, a)
    a = g.op("Where", g.op("IsInf", a, detect_negative=0), hi if posinf is None else posinf, a)
    return g.op("Where", g.op("IsInf", a, detect_positive=0), lo if neginf is None else neginf, a)


def _onnx_fill(g, a, value):
    value = g.cast(value, g.dtype(a)) if isinstance(value, str) else g.scalar(value, a)
    return g.op("Expand", value, g.op("Shape", a))


def _onnx_float_only(op_type: str):
    """Floor/Ceil/Round: integers are their own result (ONNX defines these for floats only)."""
    return lambda g, a, **_: g.op(op_type, a) if g.dtype(a).kind == "f" else a


def _onnx_trunc(g, a):
    return g.op("Where", g.op("Less", a, 0.0), g.op("Ceil", a), g.op("Floor", a)) if g.dtype(a).kind == "f" else a


def _onnx_round(g, a, *, decimals=0):
    if not decimals or g.dtype(a).kind != "f":
        return _onnx_float_only("Round")(g, a)
    return g.op("Div", g.op("Round", g.op("Mul", a, 10.0 ** decimals)), 10.0 ** decimals)


def _onnx_div_rounding(g, a, b, *, rounding_mode):
    q = g.op("Div", g.cast(a, "float64"), g.cast(b, "float64")) if g.dtype(a).kind != "f" else g.op("Div", a, b)
    q = g.op("Floor", q) if rounding_mode == "floor" else _onnx_trunc(g, q) if g.dtype(a).kind == "f" else \
        g.op("Where", g.op("Less", q, 0.0), g.op("Ceil", q), g.op("Floor", q))
    return g.cast(q, g.dtype(a))


def _onnx_remainder(g, a, b):
    """Python's sign rule: ``Mod(fmod=0)`` on integers, ``a - floor(a / b) * b`` on floats."""
    if g.dtype(a).kind != "f":
        return g.op("Mod", a, b, fmod=0)
    return g.op("Sub", a, g.op("Mul", g.op("Floor", g.op("Div", a, b)), b))


_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRTPI, _SQRTPI_OVER_TWO = 2 / math.sqrt(math.pi), math.sqrt(math.pi) / 2
_special = _backend.special  # scipy.special for numpy, cupyx.scipy.special for cupy


def _zeros(g, out, *inputs, **params):
    """The vjp of a piecewise-constant op: zero gradient for the tensor inputs."""
    return tuple(zeros_like(a) if isinstance(a, Tensor) else None for a in inputs)


_READS = {"input": (ALL, False), "output": (NONE, True), "nothing": (NONE, False)}


def _unary(name: str, fwd, vjp, *, promote: str | None = "float", reads: str = "input", aliases=(), **meta):
    """Declare a unary elementwise op and return its public function; it and each alias are
    Tensor methods with an in-place variant (``exp_``, ``arcsin_``)."""
    saves, save_output = _READS[reads]
    op = Op(name, fwd, vjp, promote=promote, saves=saves, save_output=save_output, elementwise=True,
            aliases=aliases, inplace=tuple(f"{n}_" for n in (name, *aliases)), **meta)

    fn = unary(op)
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = f"Elementwise ``{name}``, as ``torch.{name}``."
    return fn


def _numel(input_shapes, output_shape) -> int:
    """FLOPs of an elementwise arithmetic op: one per output element."""
    return prod(output_shape)


def _keep_ints(f):
    """Rounding leaves integer tensors as they are (numpy would return floats on some backends)."""
    return lambda xp, a: f(xp)(a) if a.dtype.kind in FLOATING_KINDS else a.copy()


def _frac_fwd(xp, a):
    if a.dtype.kind not in FLOATING_KINDS:
        raise TypeError(f'"frac" not implemented for integer dtype {a.dtype}')
    t = xp.trunc(a)
    if type(t) is not np.ndarray:
        return a - t
    return np.subtract(a, t, out=t)   # one result array, not two


def _sign_fwd(xp, a):
    if a.dtype.kind == "b":
        return a.copy()
    if a.dtype.kind not in FLOATING_KINDS:
        return xp.sign(a)
    if a.size and kernels.use(xp, a):   # one pass (numpy's sign and the NaN fix-up: four)
        out = np.empty_like(a)
        kernels.parallel(kernels.loops("pointwise").sign, 2, a.reshape(-1), out.reshape(-1))
        return out
    return xp.where(a == a, xp.sign(a), 0)  # sign(nan) is 0 in PyTorch


def _sign_out(xp, a, *, out):
    o = out[0]
    if a.size and kernels.use(xp, a, o) and a.shape == o.shape:
        kernels.parallel(kernels.loops("pointwise").sign, 2, a.reshape(-1), o.reshape(-1))
    else:
        o[...] = _sign_fwd(xp, a)


# ---------------------------------------------------------------- fused backward primitives
# One dispatch instead of three in every backward pass, as PyTorch's tanh_backward and
# sigmoid_backward; their own vjps keep double backward exact. `1 - t` is taken against a 0-d one
# of t's dtype: numpy 2's Python-number operand path costs ~1 us more a call (the same values).
_ONES: dict = {}


def _one_minus(t):
    if type(t) is not np.ndarray:   # another device's array
        return 1 - t
    one = _ONES.get(t.dtype)
    if one is None:
        one = _ONES[t.dtype] = np.ones((), t.dtype)
    return one - t


_F32 = np.dtype(np.float32)


def _tanh_bw_fwd(xp, g, y):
    if y.dtype is BFLOAT16_NP:   # ATen's kernel computes g (1 - y^2) in float32 and rounds once
        return in_float32(_tanh_bw_fwd, xp, g, y)
    if y.dtype == g.dtype == _F32:   # 1 - y*y rounded once, as ATen's FMA: y*y of a float32 is exact in float64
        # the loop from one element up: 1.0 us against numpy's five passes' 2.5 on 16 (2026-12-04)
        if kernels.use(xp, g, y) and g.shape == y.shape:   # (use: not traced)
            # y is C-contiguous: empty (numpy 2's empty_like is a Python wrapper); 1-D as it is
            out = flat = xp.empty(y.shape, y.dtype)
            if y.ndim != 1:
                g, y, flat = g.reshape(-1), y.reshape(-1), out.reshape(-1)
            kernels.parallel(kernels.loops("pointwise").tanh_backward, 3, g, y, flat)
            return out
        y64 = y.astype(xp.float64)
        return g * (1.0 - y64 * y64).astype(xp.float32)
    return g * _one_minus(y * y)


def _sigmoid_bw_fwd(xp, g, y):
    if y.dtype is BFLOAT16_NP:
        return in_float32(_sigmoid_bw_fwd, xp, g, y)
    if kernels.use(xp, g, y) and g.shape == y.shape:   # one pass for numpy's three (0.9 -> 0.5 us on 16)
        out = flat = xp.empty(y.shape, y.dtype)
        if y.ndim != 1:
            g, y, flat = g.reshape(-1), y.reshape(-1), out.reshape(-1)
        kernels.parallel(kernels.loops("pointwise").sigmoid_backward, 3, g, y, flat)
        return out
    return g * _one_minus(y) * y       # PyTorch's order: the products round as its kernel's


_MUL_FWD = lambda xp, a, b: a * b   # noqa: E731 - mul's forward, shared by mul and exp's array vjp


def _by_output(fwd, loop: str | None = None):
    """The array vjp of an op whose vjp is ``fwd``'s op on ``(g, out)`` (tanh, sigmoid, relu, exp): that
    forward on the arrays, where the compiled path would call it as they are (same dtype and shape).
    ``loop``: the fused loop (``kernels.pointwise``) ``fwd`` runs whole on a small 1-D float32 pair,
    called here directly (``fwd``'s checks and ``kernels.parallel``'s were ~1 us of tanh's 1.8), its
    compiled code without numba's dispatcher (``kernels.entry``: aligned arrays, ``flags.carray``)."""
    small = kernels.small_entry(loop) if loop is not None else None

    def array_vjp(g, out, inputs, params):
        if (small is not None and g.ndim == 1 and g.dtype is _F32 and type(out) is np.ndarray and out.dtype is _F32
                and out.shape == g.shape and g.shape[0] <= kernels.PARALLEL_MIN and g.flags.carray
                and out.flags.carray and kernels.enabled()):
            result = np.empty(g.shape, _F32)
            small.run(g, out, result)
            return (result,)
        if in_order(g) and type(out) is np.ndarray and out.dtype is g.dtype and out.shape == g.shape:
            return (fwd(np, g, out),)
        return None
    return array_vjp


_tanh_bw = Op("tanh_backward", _tanh_bw_fwd,
              lambda gg, out, g, y: (apply(_tanh_bw, gg, cj(y)), gg * cj(g * y) * -2), elementwise=True,
              complex=True)
_sigmoid_bw = Op("sigmoid_backward", _sigmoid_bw_fwd,
                 lambda gg, out, g, y: (apply(_sigmoid_bw, gg, cj(y)), gg * cj(g * (1 - 2 * y))), elementwise=True,
                 complex=True)
_tanh_bw_call, _sigmoid_bw_call = binary(_tanh_bw), binary(_sigmoid_bw)   # the vjps' direct calls
# relu's gradient is 0 at 0 (and the mask itself has no gradient), as in PyTorch. Both directions
# take a vectorised loop (engine/kernels) on contiguous float32 when the loops are on.
_RELU_SMALL = kernels.small_entry("relu")   # relu's loop on flat aligned float32 arrays, made at its first small call


def _relu_fwd(xp, a):
    if a.size and kernels.use(xp, a):
        out = xp.empty_like(a)
        if a.size <= kernels.PARALLEL_MIN and a.flags.carray:
            # the one-thread call of ``kernels.parallel`` without its frame and numba's dispatcher (``kernels.entry``:
            # an aligned, writeable array): xn.relu() on 16 floats 2.3 -> 1.7 us
            flat, into = (a, out) if a.ndim == 1 else (a.reshape(-1), out.reshape(-1))
            _RELU_SMALL.run(flat, into)
            return out
        kernels.parallel(kernels.loops("pointwise").relu, 2, a.reshape(-1), out.reshape(-1))
        return out
    if a.dtype == bool:
        raise RuntimeError("Boolean inputs not supported for relu")
    # ATen's clamp_min(0): ``x < 0 ? 0 : x``, so -0.0 and NaN pass (numpy's maximum gives +0.0 for -0.0);
    # the ufunc ``less`` (a sparse compressed array answers it with a zero, not the operator ``<``)
    return xp.where(xp.less(a, 0), a.dtype.type(0), a)


def _relu_bw_fwd(xp, g, y):
    if kernels.use(xp, g, y) and y.size and g.shape == y.shape:   # use() first: a tracer's symbolic xp says no
        out = xp.empty_like(y)
        kernels.parallel(kernels.loops("pointwise").relu_backward, 3, g.reshape(-1), y.reshape(-1), out.reshape(-1))
        return out
    # PyTorch's threshold_backward, y <= 0 ? 0 : g: +0.0 there whatever g is (g * mask gave -0.0 for a negative g and
    # nan for an infinite one), and a NaN output passes g; a zero of g's dtype (a Python 0 would promote bfloat16)
    return xp.where(y <= 0, g.dtype.type(0), g)


_relu_bw = Op("threshold_backward", _relu_bw_fwd,
              lambda gg, out, g, y: (apply(_relu_bw, gg, y), None), elementwise=True)


def _sleef_unary(name: str):
    """``(fwd, fwd_out)`` of a unary op whose float32 forward is ATen's Sleef loop (``kernels.pointwise``'s
    ``name``, PyTorch's floats bit for bit) and numpy's ufunc ``name`` for other dtypes and namespaces."""
    small = kernels.small_entry(name)

    def fwd(xp, a):
        if type(a) is np.ndarray and a.dtype == np.float32 and a.size and kernels.enabled():
            if a.ndim == 1 and a.shape[0] <= kernels.PARALLEL_MIN and a.flags.carray and a.dtype is _F32:
                out = np.empty(a.shape[0], _F32)    # a small vector: no dispatcher, no split (1.6 -> 0.6 us)
                small.run(a, out)
                return out
            if not (a.flags.c_contiguous or a.flags.f_contiguous):
                a = np.ascontiguousarray(a)
            out = np.empty_like(a)    # a dense input's layout; both read flat in memory order
            kernels.parallel(getattr(kernels.loops("pointwise"), name), 2, a.ravel("K"), out.ravel("K"))
            return out
        return getattr(xp, name)(a)

    def fwd_out(xp, a, *, out):
        (res,) = out
        if kernels.enabled() and kernels.loops("pointwise").takes(a) and res.dtype == a.dtype:
            src = a if a.flags.c_contiguous and a.shape == res.shape else \
                np.ascontiguousarray(np.broadcast_to(a, res.shape))
            kernels.parallel(getattr(kernels.loops("pointwise"), name), 2, src.reshape(-1), res.reshape(-1))
            return
        getattr(xp, name)(a, out=res)
    fwd.__name__, fwd_out.__name__ = f"{name}_fwd", f"{name}_fwd_out"
    return fwd, fwd_out


# ---------------------------------------------------------------- unary math
exp = _unary("exp", _vml.unary("exp", lambda xp, a: xp.exp(a)),
             lambda g, out, a: (g * out,) if g._data.dtype.kind != "c" else (g * cj(out),),
             reads="output", fwd_out=_vml.unary_out("exp", "exp"), complex=True, onnx="Exp",
             array_vjp=_by_output(_MUL_FWD))
exp2 = _unary("exp2", lambda xp, a: xp.exp2(a),
              lambda g, out, a: (g * out * _LN2,) if g._data.dtype.kind != "c" else (g * cj(out) * _LN2,),
              reads="output", out_form="exp2", complex=True, onnx=lambda g, a: g.op("Pow", 2.0, a))
_EXPM1_FWD, _EXPM1_FWD_OUT = _sleef_unary("expm1")
_LOG1P_FWD, _LOG1P_FWD_OUT = _sleef_unary("log1p")
expm1 = _unary("expm1", _EXPM1_FWD,
               lambda g, out, a: (g * (out + 1),) if g._data.dtype.kind != "c" else (g * cj(out + 1),),
               reads="output", fwd_out=_EXPM1_FWD_OUT, complex=True, onnx=lambda g, a: g.op("Sub", g.op("Exp", a), 1.0))
log = _unary("log", _vml.unary("log", lambda xp, a: xp.log(a)),
             lambda g, out, a: (g / a,) if g._data.dtype.kind != "c" else (g / cj(a),),
             fwd_out=_vml.unary_out("log", "log"), complex=True, onnx="Log")
log2 = _unary("log2", _vml.unary("log2", lambda xp, a: xp.log2(a)),
              lambda g, out, a: (g / (a * _LN2),) if g._data.dtype.kind != "c" else (g / (cj(a) * _LN2),),
              fwd_out=_vml.unary_out("log2", "log2"), complex=True, onnx=lambda g, a: g.op("Div", g.op("Log", a), _LN2))
log10 = _unary("log10", _vml.unary("log10", lambda xp, a: xp.log10(a)),
               lambda g, out, a: (g / (a * _LN10),) if g._data.dtype.kind != "c" else (g / (cj(a) * _LN10),),
               fwd_out=_vml.unary_out("log10", "log10"), complex=True, onnx=lambda g, a: g.op("Div", g.op("Log", a), _LN10))
log1p = _unary("log1p", _LOG1P_FWD,
               lambda g, out, a: (g / (a + 1),) if g._data.dtype.kind != "c" else (g / cj(a + 1),),
               fwd_out=_LOG1P_FWD_OUT, complex=True, onnx=lambda g, a: g.op("Log", g.op("Add", a, 1.0)))
# VML at every size: the optimizers' denominators (exp_avg_sq.sqrt(), a bias of ten numbers too) read it
_sqrt_fwd = _vml.unary("sqrt", lambda xp, a: xp.sqrt(a), min_size=0)
sqrt = _unary("sqrt", _sqrt_fwd,
              lambda g, out, a: (g / (2 * out),) if g._data.dtype.kind != "c" else (g / (2 * cj(out)),),
              reads="output", fwd_out=_vml.unary_out("sqrt", "sqrt", min_size=0), complex=True, onnx="Sqrt")
def _rsqrt_fwd(xp, a):
    if a.dtype in REDUCED_NP:   # PyTorch computes it in float32 and rounds once
        return in_opmath(_rsqrt_fwd, xp, a)
    r = xp.sqrt(a)
    if type(r) is not np.ndarray:
        return 1 / r
    return np.divide(1, r, out=r)   # one result array


def _rsqrt_out(xp, a, *, out):
    o = out[0]
    if a.dtype in REDUCED_NP or type(o) is not np.ndarray or o.dtype != a.dtype:
        o[...] = _rsqrt_fwd(xp, a)
        return
    np.sqrt(a, out=o)
    np.divide(1, o, out=o)


rsqrt = _unary("rsqrt", _rsqrt_fwd,
               lambda g, out, a: (g * (out ** 3) * -0.5,) if g._data.dtype.kind != "c" else (g * cj(out ** 3) * -0.5,),
               reads="output", complex=True, onnx=lambda g, a: g.op("Reciprocal", g.op("Sqrt", a)), fwd_out=_rsqrt_out)
reciprocal = _unary("reciprocal", lambda xp, a: 1 / a,
                    lambda g, out, a: (-g * (out * out),) if g._data.dtype.kind != "c" else (-g * cj(out * out),),
                    reads="output", complex=True, onnx="Reciprocal", out_form="reciprocal")
sin = _unary("sin", _vml.unary("sin", lambda xp, a: xp.sin(a)),
             lambda g, out, a: (g * cos(a),) if g._data.dtype.kind != "c" else (g * cj(cos(a)),),
             fwd_out=_vml.unary_out("sin", "sin"), complex=True, onnx="Sin")
cos = _unary("cos", _vml.unary("cos", lambda xp, a: xp.cos(a)),
             lambda g, out, a: (g * -sin(a),) if g._data.dtype.kind != "c" else (g * -cj(sin(a)),),
             fwd_out=_vml.unary_out("cos", "cos"), complex=True, onnx="Cos")
tan = _unary("tan", _vml.unary("tan", lambda xp, a: xp.tan(a)),
             lambda g, out, a: (g * (1 + out * out),) if g._data.dtype.kind != "c" else (g * cj(1 + out * out),),
             reads="output", fwd_out=_vml.unary_out("tan", "tan"), complex=True, onnx="Tan")
asin = _unary("asin", _vml.unary("asin", lambda xp, a: xp.arcsin(a)), lambda g, out, a: (g * rsqrt(1 - a * a),),
              fwd_out=_vml.unary_out("asin", "arcsin"), aliases=("arcsin",), onnx="Asin")
acos = _unary("acos", _vml.unary("acos", lambda xp, a: xp.arccos(a)), lambda g, out, a: (g * -rsqrt(1 - a * a),),
              fwd_out=_vml.unary_out("acos", "arccos"), aliases=("arccos",), onnx="Acos")
atan = _unary("atan", _vml.unary("atan", lambda xp, a: xp.arctan(a)), lambda g, out, a: (g / (a * a + 1),),
              fwd_out=_vml.unary_out("atan", "arctan"), aliases=("arctan",), onnx="Atan")
sinh = _unary("sinh", lambda xp, a: xp.sinh(a),
              lambda g, out, a: (g * cosh(a),) if g._data.dtype.kind != "c" else (g * cj(cosh(a)),),
              out_form="sinh", complex=True, onnx="Sinh")
cosh = _unary("cosh", lambda xp, a: xp.cosh(a),
              lambda g, out, a: (g * sinh(a),) if g._data.dtype.kind != "c" else (g * cj(sinh(a)),),
              out_form="cosh", complex=True, onnx="Cosh")
tanh = _unary("tanh", _vml.unary("tanh", lambda xp, a: xp.tanh(a)),
              lambda g, out, a: (_tanh_bw_call(g, out),) if g._data.dtype.kind != "c" else (apply(_tanh_bw, g, cj(out)),),
              reads="output", fwd_out=_vml.unary_out("tanh", "tanh"), complex=True, onnx="Tanh",
              array_vjp=_by_output(_tanh_bw_fwd, "tanh_backward"))
asinh = _unary("asinh", lambda xp, a: xp.arcsinh(a), lambda g, out, a: (g * rsqrt(a * a + 1),),
               out_form="arcsinh", aliases=("arcsinh",), onnx="Asinh")
acosh = _unary("acosh", lambda xp, a: xp.arccosh(a), lambda g, out, a: (g * rsqrt(a * a - 1),),
               out_form="arccosh", aliases=("arccosh",), onnx="Acosh")
atanh = _unary("atanh", lambda xp, a: xp.arctanh(a), lambda g, out, a: (g / (1 - a * a),),
               out_form="arctanh", aliases=("arctanh",), onnx="Atanh")
# (ATen's block, the most elements a loop runs on one thread), known from the first float32 sigmoid: a small
# vector's sigmoid then calls its loop's ``small_entry`` without ``aten_map1``'s tests and frames
# (``_sigmoid_fwd`` on 16 floats 0.70 -> 0.58 us, ``t.sigmoid()`` 1.62 -> 1.51)
_SIGMOID_SMALL = kernels.small_entry("sigmoid")
_SIGMOID_BLOCK: list = []


def _sigmoid_fwd(xp, a):
    """float32: ATen's own loop (``kernels.pointwise.sigmoid``: Sleef's exp, libm's in the scalar tail), the
    same floats as PyTorch's CPU kernel; float64, and float32 without the loops: SciPy's ``expit`` (one
    loop: ~5x faster than the formula's four passes on small tensors, no overflow warning); the formula
    otherwise (and for the compiler's symbolic arrays, which read the formula), where exp(-a) overflowing
    to inf gives exactly 0, as PyTorch does."""
    if type(a) is np.ndarray:
        if a.dtype is _F32 and a.ndim == 1 and _SIGMOID_BLOCK:
            block, most = _SIGMOID_BLOCK[0]
            n = a.shape[0]
            if 0 < n <= most and a.flags.carray and xp is np and kernels.enabled():
                out = np.empty(n, _F32)
                _SIGMOID_SMALL.run(a, out, block, n)
                return out
        if a.dtype == _F32 and a.size and xp is np and kernels.enabled():   # ATen's float32 loop, bit for bit
            loops = kernels.loops("pointwise")
            if not _SIGMOID_BLOCK:
                _SIGMOID_BLOCK.append((loops.aten_block(), loops.PARALLEL_MIN))
            return loops.aten_map1(_SIGMOID_SMALL, a)
        if a.dtype.char in "fd":
            return _special(xp).expit(a)
    if a.dtype in REDUCED_NP:   # PyTorch computes it in float32 and rounds once
        return in_opmath(_sigmoid_fwd, xp, a)
    return 1 / (1 + xp.exp(-a))


sigmoid = _unary("sigmoid", _sigmoid_fwd,
                 lambda g, out, a: (_sigmoid_bw_call(g, out),) if g._data.dtype.kind != "c" else (apply(_sigmoid_bw, g, cj(out)),),
                 reads="output", complex=True, onnx="Sigmoid", array_vjp=_by_output(_sigmoid_bw_fwd, "sigmoid_backward"))
erf = _unary("erf", _vml.unary("erf", lambda xp, a: _special(xp).erf(a).astype(a.dtype, copy=False)),
             lambda g, out, a: (g * _TWO_OVER_SQRTPI * exp(-a * a),), onnx="Erf",
             complex_error=kernel_refusal("erf_vml"))
erfc = _unary("erfc", _vml.unary("erfc", lambda xp, a: _special(xp).erfc(a).astype(a.dtype, copy=False)),
              lambda g, out, a: (g * -_TWO_OVER_SQRTPI * exp(-a * a),),
              onnx=lambda g, a: g.op("Sub", 1.0, g.op("Erf", a)), complex_error=kernel_refusal("erfc_vml"))
erfinv = _unary("erfinv", _vml.unary("erfinv", lambda xp, a: _special(xp).erfinv(a).astype(a.dtype, copy=False)),
                lambda g, out, a: (g * _SQRTPI_OVER_TWO * exp(out * out),), reads="output",
                complex_error=kernel_refusal("erfinv_vml"))

# ---------------------------------------------------------------- dtype-preserving unary
def _neg_fwd(xp, a):
    if a.dtype.kind == "b":     # numpy refuses too, in its own words; PyTorch's point to ``~``
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return -a


neg = _unary("neg", _neg_fwd, lambda g, out, a: (-g,), promote=None, reads="nothing",
             ufunc="negative", aliases=("negative",), operator="neg", onnx="Neg",
             array_vjp=lambda g, out, inputs, params: (-g,) if in_order(g) else None)
abs = _unary("abs", lambda xp, a: xp.abs(a),
             lambda g, out, a: (g * (sign(a) if a._data.dtype.kind != "c" else sgn(a)),), promote=None,
             ufunc="absolute", aliases=("absolute",), operator="abs", onnx="Abs")
sign = _unary("sign", _sign_fwd, _zeros, promote=None, reads="nothing", onnx="Sign", fwd_out=_sign_out,
              complex_error=(NotImplementedError, "Unlike NumPy, torch.sign is not intended to support complex "
                                                  "numbers. Please use torch.sgn instead."))
relu = _unary("relu", _relu_fwd,
              lambda g, out, a: (apply(_relu_bw, g, out),), promote=None, reads="output", onnx="Relu",
              complex_error=CLAMP_COMPLEX, aten="relu(clamp_min)", array_vjp=_by_output(_relu_bw_fwd, "relu_backward"))


def _rounding(name: str) -> tuple:
    return NotImplementedError, f"{name} is not supported for complex inputs"


floor = _unary("floor", _keep_ints(lambda xp: xp.floor), _zeros, promote=None, reads="nothing", out_form="floor",
               onnx=_onnx_float_only("Floor"), complex_error=_rounding("floor"))
ceil = _unary("ceil", _keep_ints(lambda xp: xp.ceil), _zeros, promote=None, reads="nothing", out_form="ceil",
              onnx=_onnx_float_only("Ceil"), complex_error=_rounding("ceil"))
trunc = _unary("trunc", _keep_ints(lambda xp: xp.trunc), _zeros, promote=None, reads="nothing", aliases=("fix",),
               out_form="trunc",
               onnx=_onnx_trunc, complex_error=_rounding("trunc"))
frac = _unary("frac", _frac_fwd, lambda g, out, a: (g,), promote=None, reads="nothing",
              onnx=lambda g, a: g.op("Sub", a, _onnx_trunc(g, a)), complex_error=kernel_refusal("frac"))

def _round_fwd(xp, a, *, decimals=0):
    """PyTorch's rounding to ``decimals`` places, in ``a``'s dtype: rint(a * 10^d) / 10^d
    (numpy's and cupy's ``round(a, d)`` differ from it, and from each other, in float32)."""
    if not decimals:
        return xp.round(a)
    if decimals > 0:
        p = a.dtype.type(10.0 ** decimals)
        return xp.rint(a * p) / p
    p = a.dtype.type(10.0 ** -decimals)     # (this module's abs is the op)
    return xp.rint(a / p) * p


_round = Op("round", _round_fwd, _zeros, saves=NONE, elementwise=True, onnx=_onnx_round, out_form="round",
             complex_error=kernel_refusal("round_vml"))


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round half to even, to ``decimals`` decimal places."""
    if decimals and input._data.dtype.kind not in FLOATING_KINDS:
        raise NotImplementedError(f'"round" with decimals={decimals} not implemented for '
                                  f"'{input.dtype.scalar_type}'")
    return apply(_round, input, decimals=decimals)


fix, negative, absolute = trunc, neg, abs
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh

# ---------------------------------------------------------------- arithmetic
# add/sub with alpha, lerp and addcmul are fused multiply-adds in PyTorch's CPU kernels: float32,
# float16 and bfloat16 compute in float32 (a Python scalar rounded to it) and round once; rounding
# the product first differs in the last bit of about one element in five
_OPMATH32 = (np.float32, np.float16, BFLOAT16_NP)


def _fma32(xp, x, y, z, dtype, out=None):
    """``x * y + z`` of float32 operands as float32's fused multiply-add (float64 holds the product
    exactly), then rounded to ``dtype``; on cupy one ``fmaf`` kernel (``kernels/device.py``), into a
    float32 ``out`` when given."""
    if _backend.is_cupy(xp):
        if out is not None and out.dtype == xp.float32:
            return device_kernels.fma32(x, y, z, out)
        res = device_kernels.fma32(x, y, z)
        return res if res.dtype == dtype else res.astype(dtype)
    f64 = xp.float64
    return (x.astype(f64) * y.astype(f64) + z.astype(f64)).astype(xp.float32).astype(dtype)


def _one_pass(xp, a, *others) -> bool:
    """Whether a fused multiply-add's float32 loop takes these arrays: same shape, contiguous, numpy
    (``kernels.use``'s test, written out with the dtype compared as a dtype: ~0.3 us a call)."""
    if xp is not np or type(a) is not np.ndarray or a.dtype != _F32 or not a.size or not a.flags.c_contiguous \
            or not kernels.enabled():
        return False
    shape = a.shape
    for o in others:
        if type(o) is not np.ndarray or o.shape != shape or o.dtype != _F32 or not o.flags.c_contiguous:
            return False
    return True


def _scaled_sum(xp, a, b, alpha, out=None):
    """``a + alpha * b`` as PyTorch's kernel: ``fma(b, alpha, a)`` in float32 opmath, ``alpha`` in the
    tensors' dtype (``add`` and ``sub`` pass ``alpha`` only for float32, float16 and bfloat16 operands);
    into ``out`` when given (an optimizer's parameter, updated in place). A number ``b`` is rounded to
    ``a``'s dtype first, as PyTorch's kernel takes it (``add(x, 1.7, alpha=-0.3)``)."""
    if not hasattr(b, "dtype"):
        b = xp.asarray(b, dtype=a.dtype)
    if (xp is np and type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == _F32 and b.dtype == _F32
            and a.shape == b.shape and a.size and a.flags.c_contiguous and b.flags.c_contiguous and kernels.enabled()
            and (out is None or out is a or (out.shape == a.shape and out.dtype == _F32 and out.flags.c_contiguous))):
        # one pass, llvm.fma (``_one_pass``'s test written out: an optimizer's update of a small parameter
        # is mostly this Python, 4.0 -> 1.6 us at 16 elements; up to PARALLEL_MIN the loop runs whole)
        out = np.empty_like(a) if out is None else out
        _fma_pass(a, b, out, _F32.type(alpha))
        return out
    f32 = xp.float32
    alpha = f32(a.dtype.type(alpha))
    res = _fma32(xp, b.astype(f32, copy=False), alpha, a.astype(f32, copy=False), a.dtype, out)
    if out is None or res is out:
        return res
    xp.copyto(out, res)
    return out


def _fma_pass(a, b, out, alpha) -> None:
    """``out = fma(b, alpha, a)``: float32 C-contiguous numpy arrays of one shape, ``alpha`` a float32; the
    loop whole up to ``PARALLEL_MIN`` elements, else split as ``kernels.parallel`` times it."""
    loop = kernels.loops("pointwise").scaled_add
    if a.ndim != 1:   # contiguous: ravel is a view (and cheaper than reshape)
        a, b, out = a.ravel(), b.ravel(), out.ravel()
    if a.size <= kernels.PARALLEL_MIN:
        loop(b, a, out, alpha)
    else:
        kernels.parallel(loop, 3, b, a, out, alpha)


def _add_out(xp, a, b, alpha=1, *, out):
    """``add`` written into ``out[0]`` (a captured replay's buffer, or ``a`` itself: an optimizer's
    ``p.add_(u, alpha=-lr)`` in one pass), the same floats as the forward."""
    xp.add(a, b, out=out[0]) if alpha == 1 else _scaled_into(xp, a, b, alpha, out[0])


def _sub_out(xp, a, b, alpha=1, *, out):
    xp.subtract(a, b, out=out[0]) if alpha == 1 else _scaled_into(xp, a, b, -alpha, out[0])


def _scaled_into(xp, a, b, alpha, out):
    """``_scaled_sum`` into ``out``; into ``a`` itself (an optimizer's update, a foreach list of them) the
    fused pass after ``_one_pass``'s test alone (~1 us a tensor less)."""
    if out is a and _one_pass(xp, a, b):
        _fma_pass(a, b, a, _F32.type(alpha))
    else:
        _scaled_sum(xp, a, b, alpha, out=out)


def _passed(g, x):
    """``ub(g, x)`` where it passes ``g`` on: ``g`` for a tensor of its shape, None for a number; False
    where ``ub`` would sum ``g`` down (the array vjp then declines)."""
    if not isinstance(x, Tensor):
        return None
    return g if x._data.shape == g.shape else False


def _sum_array_vjp(negate: bool):
    """add's (``negate``: sub's) array vjp without ``alpha``: ``g`` passed on, ``-g`` to sub's second input."""
    def array_vjp(g, out, inputs, params):
        if params:
            return None
        a, b = inputs
        ga, gb = _passed(g, a), _passed(g, b)
        if ga is False or gb is False:
            return None
        if negate and gb is not None:
            if not in_order(g):
                return None
            gb = -g
        return ga, gb
    return array_vjp


def _add_fwd(xp, a, b, alpha=1):
    """``a + b`` (``a + alpha b``: ``_scaled_sum``); two float32 arrays of one shape over ``PARALLEL_MIN``
    elements (ATen's grain) with more than one thread as ``fma(b, 1, a)`` (the same floats) cut over the threads, as
    ATen's add: the residual add before a layer norm then leaves each thread's rows in its own cache,
    which the layer norm's split reads (80 -> 53 us for GPT's 16x64x128, bench/README.md, issue 17,
    session 29)."""
    if alpha != 1:
        return _scaled_sum(xp, a, b, alpha)
    if type(a) is np.ndarray and a.size > kernels.PARALLEL_MIN and kernels.threads() > 1:
        if _one_pass(xp, a, b):
            out = np.empty_like(a)
            _fma_pass(a, b, out, _F32.type(1))
            return out
        if _trailing_row(xp, a, b):   # ``wte(idx) + wpe(pos)``: the layer norm after it finds its rows
            out = np.empty_like(a)    # where the add left them (its call 201 -> 105 us in the GPT d384 step)
            kernels.parallel(kernels.loops("pointwise").add_rows, 2, a.reshape(-1, b.size),
                             out.reshape(-1, b.size), b.reshape(-1))
            return out
    return a + b


def _trailing_row(xp, a, b) -> bool:
    """Whether ``b`` broadcasts over ``a``'s leading dims as one row of ``a``'s trailing ones (both float32
    C-contiguous numpy arrays, ``b`` smaller): ``a + b`` is then ``add_rows`` over ``a``'s rows."""
    return (_one_pass(xp, a) and type(b) is np.ndarray and b.dtype == _F32 and 0 < b.ndim < a.ndim
            and b.flags.c_contiguous and a.shape[a.ndim - b.ndim:] == b.shape)


_add = Op("add", _add_fwd,
          lambda g, out, a, b, alpha=1: (ub(g, a), ub(g if alpha == 1 else g * alpha, b)),
          promote="common", saves=NONE, elementwise=True, ufunc="add", cost=_numel, operator="add", onnx=_onnx_add,
          fwd_out=_add_out, array_vjp=_sum_array_vjp(False))
_sub = Op("sub", lambda xp, a, b, alpha=1: a - b if alpha == 1 else _scaled_sum(xp, a, b, -alpha),
          lambda g, out, a, b, alpha=1: (ub(g, a), ub(-g if alpha == 1 else g * -alpha, b)),
          promote="common", saves=NONE, elementwise=True, ufunc="subtract", cost=_numel, operator="sub",
          aliases=("subtract", "rsub"), onnx=_onnx_sub, fwd_out=_sub_out, array_vjp=_sum_array_vjp(True))


def scaled_sum(xp, a, b, alpha, out=None):
    """``a + alpha * b`` on arrays exactly as ``add(a, b, alpha=alpha)`` computes it on tensors, into
    ``out`` when given (the optimizers' array fast paths use it)."""
    if alpha == 1:
        return xp.add(a, b, out=out)
    if a.dtype == b.dtype and a.dtype in _OPMATH32:
        return _scaled_sum(xp, a, b, alpha, out)
    return xp.add(a, b * alpha, out=out)


def _alpha_fused(a, b, alpha) -> bool:
    """Whether ``a + alpha * b`` is one fused op (PyTorch's fma): two tensors of one float32, float16
    or bfloat16 dtype, or such a tensor and a real number; otherwise the product is its own op, as
    exact for integers."""
    return (isinstance(a, Tensor) and a._data.dtype in _OPMATH32 and type(alpha) in (int, float)
            and (type(b) in (int, float) or isinstance(b, Tensor) and a._data.dtype == b._data.dtype))


def _alpha_check(input, other, alpha) -> None:
    """ATen's ``alpha_check`` against the result's dtype: a float ``alpha`` (``1.0`` too) needs a floating
    or complex result, a complex one a complex result, a bool one a bool result."""
    result = _result_type(input, other)
    if isinstance(alpha, (bool, np.bool_)):
        if result.np != np.bool_:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif isinstance(alpha, (complex, np.complexfloating)):
        if not result.is_complex:
            raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")
    elif not isinstance(alpha, (numbers.Integral, Tensor)) and not (result.is_floating_point or result.is_complex):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")


def _scaled(op, input, other, alpha, run=apply, numbers=True):
    """``input op alpha * other`` through ``run`` (``apply``, or ``apply_`` in place); ``numbers``: two
    numbers make a tensor (``add``, ``sub``; not ``rsub``, which PyTorch refuses them)."""
    if numbers:
        input = _number_operand(input, other)
    if type(alpha) is not int and not (type(alpha) is float and isinstance(input, Tensor)
                                       and input._data.dtype.kind in FLOATING_KINDS):   # an optimizer's step
        _alpha_check(input, other, alpha)
    if alpha == 1:
        return run(op, input, other)
    if _alpha_fused(input, other, alpha):
        if input._data.dtype == np.float16 and math.isfinite(alpha) and not -65504 <= alpha <= 65504:
            raise RuntimeError("value cannot be converted to type c10::Half without overflow")
        return run(op, input, other, alpha=alpha)
    return run(op, input, other * alpha)


def _wants(x) -> bool:
    """Only inputs that need a gradient get one computed (a Python number never does)."""
    return isinstance(x, Tensor) and x.requires_grad


def _cjn(x):
    """The conjugate of a tensor or a Python number (real ones as they are)."""
    return cj(x) if isinstance(x, Tensor) else (x.conjugate() if x.__class__ is complex else x)


def _mul_vjp(g, out, a, b):
    if g._data.dtype.kind == "c":
        ca, cb = _cjn(a), _cjn(b)
        return ub(g * cb, a) if _wants(a) else None, ub(g * ca, b) if _wants(b) else None
    # the real case, the one of every short chain, with _wants and ub's same-shape test inline
    ga = gb = None
    if isinstance(a, Tensor) and a.requires_grad:
        ga = g * b
        if ga._data.shape != a._data.shape:
            ga = sum_to(ga, a._data.shape)
    if isinstance(b, Tensor) and b.requires_grad:
        gb = g * a
        if gb._data.shape != b._data.shape:
            gb = sum_to(gb, b._data.shape)
    return ga, gb


def _div_vjp(g, out, a, b):
    # from the inputs, not the output, as PyTorch's DivBackward: ``loss = loss / n; loss *= k`` then
    # backward is allowed (the in-place scaling bumps the output's version, which nothing saved here reads);
    # the divisor's as PyTorch's div_tensor_other_backward, -g ((a / b) / b), whose roundings bfloat16 shows
    if g._data.dtype.kind != "c":
        return (ub(g / b, a) if _wants(a) else None), (ub(-g * ((a / b) / b), b) if _wants(b) else None)
    return (ub(g / _cjn(b), a) if _wants(a) else None), (ub(-g * cj((a / b) / b), b) if _wants(b) else None)


def _mul_array_vjp(g, out, inputs, params):
    """``_mul_vjp``'s real case on arrays, for inputs of ``g``'s shape (no ``sum_to``); ``g`` may be a slice of
    rows (``in_row_order``: the GRU cell's ``r * h`` takes a column slice of cat's gradient)."""
    if not (g.ndim == 1 and g.dtype.kind == "f" or in_row_order(g)):   # (a 1-D float g without the call)
        return None
    a, b = inputs
    if type(a) is Tensor and type(b) is Tensor:   # two cpu tensors of g's dtype and shape: operand's tests inline
        x, y = a._data, b._data
        if (type(x) is np.ndarray and type(y) is np.ndarray and x.dtype is g.dtype and y.dtype is g.dtype
                and x.shape == g.shape and y.shape == g.shape and a._device is CPU and b._device is CPU
                and (a.requires_grad or not a._vc[0] or a._base is None)
                and (b.requires_grad or not b._vc[0] or b._base is None)):
            return g * y if a.requires_grad else None, g * x if b.requires_grad else None
    ga = gb = None
    if isinstance(a, Tensor) and a.requires_grad:
        y = operand(b, g)
        if y is None or a._data.shape != g.shape:
            return None
        ga = g * y
    if isinstance(b, Tensor) and b.requires_grad:
        y = operand(a, g)
        if y is None or b._data.shape != g.shape:
            return None
        gb = g * y
    return ga, gb


_mul = Op("mul", _MUL_FWD, _mul_vjp, array_vjp=_mul_array_vjp,
          promote="common", saves=OTHERS, elementwise=True, ufunc="multiply", cost=_numel, operator="mul",
          aliases=("multiply",), inplace=("mul_", "multiply_"), complex=True, onnx="Mul")
_div = Op("div", lambda xp, a, b: a / b, _div_vjp,
          promote="float", elementwise=True, ufunc="true_divide", cost=_numel,
          operator="truediv", aliases=("divide", "true_divide", "__div__", "__rdiv__", "__idiv__"), complex=True,
          onnx="Div")


def _is_int(a, b) -> bool:
    return (a if hasattr(a, "dtype") else b).dtype.kind in "biu"


def _is_bool(x) -> bool:
    return x.dtype.kind == "b" if hasattr(x, "dtype") else x.__class__ is bool


def _refuse_bools(name, a, b) -> None:
    if _is_bool(a) and _is_bool(b):
        raise TypeError(f'"{name}" not implemented for \'Bool\' operands')


def _has_bool(a, b) -> bool:
    return ((a._data.dtype.kind == "b" if isinstance(a, Tensor) else a.__class__ is bool) or
            (b._data.dtype.kind == "b" if isinstance(b, Tensor) else b.__class__ is bool))


def _bool_sub_error() -> RuntimeError:
    """PyTorch refuses ``-`` with any bool operand: on masks it would silently mean xor."""
    return RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                        "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _check_divisor(xp, b) -> None:
    """Integer division by zero is an error in PyTorch (numpy would return 0)."""
    if (b == 0) if type(b) is int else has_data(xp) and not xp.all(b):
        raise RuntimeError("ZeroDivisionError: integer division or modulo by zero")


def _div_rounding_fwd(xp, a, b, *, rounding_mode):
    if _is_int(a, b):  # exact integer arithmetic, no detour through floats
        _refuse_bools("div", a, b)
        _check_divisor(xp, b)
        q = a // b
        if rounding_mode == "trunc":
            q = q + ((q * b != a) & ((a < 0) != (b < 0)))
        return q
    return xp.trunc(a / b) if rounding_mode == "trunc" else xp.floor_divide(a, b)


def _remainder_fwd(xp, a, b):
    if _is_int(a, b):
        _refuse_bools("remainder", a, b)
        _check_divisor(xp, b)
    return xp.remainder(a, b)


def _fmod_fwd(xp, a, b):
    if _is_int(a, b):
        _refuse_bools("fmod", a, b)
        _check_divisor(xp, b)
    return xp.fmod(a, b)


_div_rounding = Op("div_rounding", _div_rounding_fwd, _zeros, promote="common", saves=NONE, elementwise=True,
                   operator="floordiv", aliases=("floor_divide",), onnx=_onnx_div_rounding,
                   complex_error=kernel_refusal("div_{rounding_mode}"))
_remainder = Op("remainder", _remainder_fwd,
                lambda g, out, a, b: (ub(g, a), ub(-g * div(a, b, rounding_mode="floor"), b)
                                      if isinstance(b, Tensor) else None),
                promote="common", elementwise=True, operator="mod", inplace=("remainder_",), onnx=_onnx_remainder,
                complex_error=kernel_refusal("remainder"))
_fmod = Op("fmod", _fmod_fwd,
           lambda g, out, a, b: (ub(g, a), ub(-g * div(a, b, rounding_mode="trunc"), b)
                                 if isinstance(b, Tensor) else None),
           promote="common", elementwise=True, inplace=("fmod_",), onnx=lambda g, a, b: g.op("Mod", a, b, fmod=1),
           complex_error=kernel_refusal("fmod"))


def _log_number(a) -> float:
    if a.__class__ is complex:
        return cmath.log(a) if a else -math.inf
    return math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)


def _pow_vjp(g, out, a, b):
    # from the inputs, as PyTorch's PowBackward (``y = x ** 2; y += 1`` then backward is allowed): the
    # result is recomputed only for an exponent tensor's gradient
    ga = gb = None
    if isinstance(a, Tensor):
        if isinstance(b, Tensor):
            ga = ub(zero_where(b == 0, g * cj(b * a ** (b - 1))), a)
        else:
            ga = zeros_like(a) if b == 0 else ub(g * _cjn(b * a ** (b - 1)), a)
    if isinstance(b, Tensor):
        out = a ** b
        if isinstance(a, Tensor):  # 0 ** b with b >= 0 has zero slope in b, as in PyTorch
            zero = (a == 0) & (b.real >= 0) if b._data.dtype.kind == "c" else (a == 0) & (b >= 0)
            gb = zero_where(zero, g * cj(out * log(a)))
        else:
            gb = g * cj(out * _log_number(a))
            if a == 0:
                gb = zero_where(b >= 0, gb)
        gb = ub(gb, b)
    return ga, gb


# ATen's cpu pow by a number 3 or -2 multiplies (``x*x*x``, ``1/(x*x)``) in the tensor's float32, float64
# or bfloat16, rounding each product (bfloat16 too); numpy's ``power`` rounds the true power once
_POW_PRODUCTS = frozenset((np.dtype(np.float32), np.dtype(np.float64), np.dtype(BFLOAT16_NP)))
_POW_ROOTS = frozenset((np.dtype(np.float32), np.dtype(np.float64)))
# exponents whose ATen result numpy's ``power`` gives already: a copy, ones, the square, the reciprocal
_POW_NUMPY_EXACT = frozenset((0, 1, 2, -1))


def _pow_fwd(xp, a, b):
    if type(b) in (int, float) and (b == 3 or b == -2) and getattr(a, "dtype", None) in _POW_PRODUCTS:
        square = a * a
        return square * a if b == 3 else 1 / square
    if type(b) in (int, float) and (b == 0.5 or b == -0.5) and getattr(a, "dtype", None) in _POW_ROOTS:
        # ATen's pow by 0.5 is its sqrt kernel (VML's, as ``sqrt`` here), by -0.5 its rsqrt: 1 / an exact sqrt
        return _sqrt_fwd(xp, a) if b == 0.5 else 1 / xp.sqrt(a)
    if type(b) in (int, float) and b not in _POW_NUMPY_EXACT and kernels.enabled() \
            and kernels.loops("pointwise").takes(a):   # ATen's float32 loop: Sleef's powf, bit for bit
        from ..kernels.fastmath import aten_lanes
        return kernels.loops("pointwise").aten_map(kernels.loops("pointwise").pow_number, (a,),
                                                   (float(b), aten_lanes() == 16))
    out = a ** b
    if out.dtype.char == "b" and not (_int8(a) or _int8(b)):  # numpy's bool ** int is int8
        return _bool_pow(xp, a, b)
    return out


def _int8(x) -> bool:
    return hasattr(x, "dtype") and x.dtype.char == "b"


def _bool_pow(xp, a, b):
    """PyTorch: bool ** int is int64, bool tensor ** Python bool stays bool, bool ** bool tensor is refused."""
    if not _is_bool(b):
        return a.astype(xp.int64) ** b
    if hasattr(b, "dtype") or not hasattr(a, "dtype"):
        raise TypeError('"pow" not implemented for \'Bool\' operands')
    return a | (not b)


_pow = Op("pow", _pow_fwd, _pow_vjp, promote="common", elementwise=True, operator="pow",
          aliases=("square",), inplace=("pow_",), complex=True, onnx="Pow")


_NUMBERS = (bool, int, float, complex, np.bool_, np.number)


def _number_operand(input, other):
    """``input`` as PyTorch's parser hands it to ``add``, ``sub``, ``mul`` and the divisions: with two
    numbers (``torch.div(seq_len, window, rounding_mode="trunc")``) the first becomes a 0-d tensor of
    its kind (bool, int64, the default float or complex dtype), so the result is one; other ops
    refuse numbers only (``TypeError``)."""
    if isinstance(input, _NUMBERS) and isinstance(other, _NUMBERS):
        return _tensor(input.item() if isinstance(input, np.generic) else input)
    return input


def add(input, other, *rest, alpha=1) -> Tensor:
    if rest:
        (other,), alpha = _reordered("add", "alpha", other, rest, alpha, False)
    return _scaled(_add, input, other, alpha)


def sub(input, other, *rest, alpha=1) -> Tensor:
    if rest:
        (other,), alpha = _reordered("sub", "alpha", other, rest, alpha, False)
    if _has_bool(input, other):
        raise _bool_sub_error()
    return _scaled(_sub, input, other, alpha)


def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, other, alpha)):
        return handle_torch_function(rsub, (input, other, alpha), input, other, alpha=alpha)
    if _has_bool(input, other):
        raise _bool_sub_error()
    return _scaled(_sub, other, input, alpha, numbers=False)


def mul(input, other) -> Tensor:
    return apply(_mul, _number_operand(input, other), other)


def _rounding_op(rounding_mode):
    if rounding_mode is None:
        return _div, {}
    if rounding_mode != "trunc" and rounding_mode != "floor":
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"{rounding_mode!r}")
    return _div_rounding, {"rounding_mode": rounding_mode}


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """True division (integers give floats), or rounded with ``rounding_mode`` 'trunc' / 'floor'."""
    input = _number_operand(input, other)
    if rounding_mode is None:
        return apply(_div, input, other)
    op, params = _rounding_op(rounding_mode)
    return apply(op, input, other, **params)


def floor_divide(input, other) -> Tensor:
    return apply(_div_rounding, _number_operand(input, other), other, rounding_mode="floor")


def remainder(input, other) -> Tensor:
    """Python's ``%``: the result has the sign of ``other``."""
    return apply(_remainder, input, other)


def fmod(input, other) -> Tensor:
    """C's ``fmod``: the result has the sign of ``input``."""
    return apply(_fmod, input, other)


def pow(input, exponent) -> Tensor:
    """``input ** exponent``; either side may be a Python number."""
    return apply(_pow, input, exponent)


def square(input: Tensor) -> Tensor:
    return apply(_pow, input, 2)


true_divide = divide = div
multiply, subtract = mul, sub


# ---------------------------------------------------------------- binary math
def _atan2_vjp(g, out, a, b):
    d = a * a + b * b
    d = where(d == 0, 1.0, d)  # at (0, 0) both slopes are 0, as in PyTorch
    return ub(g * b / d, a), ub(g * -a / d, b)


def _xlogy_fwd(xp, x, y):
    if not hasattr(y, "dtype"):
        y = xp.asarray(y, x.dtype)
    elif not hasattr(x, "dtype"):
        x = xp.asarray(x, y.dtype)
    return xp.where((x == 0) & ~xp.isnan(y), 0, x * xp.log(y))


def _xlogy_vjp(g, out, x, y):
    return (ub(zero_where((x == 0) & (y <= 0), xlogy(g, y)), x) if isinstance(x, Tensor) else None,
            ub(g * x / y, y) if isinstance(y, Tensor) else None)


_atan2 = Op("atan2", lambda xp, a, b: xp.arctan2(a, b), _atan2_vjp, promote="float", elementwise=True,
            out_form="arctan2", aliases=("arctan2",), inplace=("atan2_", "arctan2_"), onnx=_onnx_atan2,
            complex_error=kernel_refusal("atan2"))
_hypot = Op("hypot", lambda xp, a, b: xp.hypot(a, b),
            lambda g, out, a, b: (ub(g * a / out, a), ub(g * b / out, b)),
            promote="float", save_output=True, elementwise=True, out_form="hypot", inplace=("hypot_",),
            onnx=lambda g, a, b: g.op("Sqrt", g.op("Add", g.op("Mul", a, a), g.op("Mul", b, b))),
            complex_error=kernel_refusal("hypot"))
_logaddexp = Op("logaddexp", lambda xp, a, b: xp.logaddexp(a, b),
                lambda g, out, a, b: (ub(g / (1 + exp(b - a)), a), ub(g / (1 + exp(a - b)), b)),
                promote="float", elementwise=True, out_form="logaddexp", onnx=_onnx_logaddexp)
_xlogy = Op("xlogy", _xlogy_fwd, _xlogy_vjp, promote="float", elementwise=True, inplace=("xlogy_",),
            onnx=lambda g, x, y: g.op("Where", g.op("Equal", x, 0.0), 0.0, g.op("Mul", x, g.op("Log", y))),
            complex_error=kernel_refusal("xlogy"))


def atan2(input: Tensor, other: Tensor) -> Tensor:
    return apply(_atan2, input, other)


def hypot(input: Tensor, other: Tensor) -> Tensor:
    return apply(_hypot, input, other)


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow."""
    return apply(_logaddexp, input, other)


def xlogy(input, other) -> Tensor:
    """``input * log(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    return apply(_xlogy, input, other)


arctan2 = atan2


def _lerp_fwd(xp, a, b, w):
    """``fma(coeff, end - start, base)`` with ``(coeff, base)`` = ``(w, start)`` where ``|w| < 0.5``,
    else ``(w - 1, end)``: exact at both ends."""
    if a.dtype in _OPMATH32:
        f32 = xp.float32
        if not hasattr(w, "dtype") and _one_pass(xp, a, b):
            return _lerp_loop(a, b, w, xp.empty_like(a))
        if hasattr(w, "dtype") and _one_pass(xp, a, b, w):   # a weight each: ATen's choice per element, one pass
            return _lerp_weights(a, b, w, xp.empty_like(a))
        start, end = a.astype(f32), b.astype(f32)
        if hasattr(w, "dtype"):
            w = w.astype(f32)
            small = xp.abs(w) < 0.5
            coeff, base = xp.where(small, w, w - f32(1)), xp.where(small, start, end)
        else:
            w = f32(w)
            coeff, base = (w, start) if -0.5 < w < 0.5 else (w - f32(1), end)
        return _fma32(xp, coeff, end - start, base, a.dtype)
    d = b - a
    if hasattr(w, "dtype"):
        return xp.where(xp.abs(w) < 0.5, a + w * d, b - d * (1 - w))
    return a + w * d if -0.5 < w < 0.5 else b - d * (1 - w)


def _lerp_weights(a, b, w, out):
    """float32 ``lerp`` of same-shape contiguous arrays, weight ``w`` one of them too, one numba pass into
    ``out`` (which may be ``a``)."""
    kernels.parallel(kernels.loops("pointwise").lerp_weights, 4, a.ravel(), b.ravel(), w.ravel(), out.ravel())
    return out


def _lerp_loop(a, b, w, out):
    """float32 ``lerp`` of same-shape contiguous arrays and a number weight, one numba pass into
    ``out`` (which may be ``a`` itself)."""
    _lerp_pass(a, b, out, *_lerp_weight(w))
    return out


_LERP_WEIGHTS: dict = {}


def _lerp_weight(w) -> tuple:
    """``(loop, coefficient, from the end)`` of a number weight: ATen's choice by the float32 weight's
    size, ``fma(w, end - start, start)`` for ``|w| < 0.5`` else ``fma(w - 1, end - start, end)``.
    Cached per weight (an EMA or an optimizer passes the same one every step; bounded)."""
    got = _LERP_WEIGHTS.get(w)   # numbers equal across types (1, 1.0, True) have one float32: one entry
    if got is None:
        w32 = np.float32(w)
        small = bool(-0.5 < w32 < 0.5)
        got = (kernels.loops("pointwise").lerp, w32 if small else w32 - np.float32(1), not small)
        if w:   # not 0: -0.0 == 0.0 share a key but not a sign (fma(-0.0, d, -0.0) is -0.0)
            if len(_LERP_WEIGHTS) >= 64:
                _LERP_WEIGHTS.clear()
            _LERP_WEIGHTS[w] = got
    return got


def _lerp_pass(a, b, out, loop, coeff, from_end: bool) -> None:
    """``_lerp_loop``'s pass with the weight's ``_lerp_weight`` already taken."""
    if a.ndim != 1:   # contiguous: ravel is a view (and cheaper than reshape)
        a, b, out = a.ravel(), b.ravel(), out.ravel()
    if a.size <= kernels.PARALLEL_MIN:     # the pool would run it whole: the loop, without its bookkeeping
        loop(a, b, out, coeff, from_end)
    else:
        kernels.parallel(loop, 3, a, b, out, coeff, from_end)


def lerp_arrays_(pairs, weight) -> bool:
    """``t.lerp_(e, weight)`` for each ``(t, e)`` of ``pairs`` straight on their arrays, the version
    counters moved as the op moves them, when nobody watches and every pair takes the float32 loop
    (a model-EMA update ``torch._foreach_lerp_(ema, params, 1 - decay)``: the dispatch per tensor
    cost more than the loop); the same floats as ``lerp_``. False (nothing done) otherwise."""
    if _DISPATCH.slow or type(weight) not in (float, int):
        return False
    grad = is_grad_enabled()     # under no_grad (an EMA's usual frame) parameters requiring grad take it too
    for t, e in pairs:
        if (t.grad_fn is not None or (grad and (t.requires_grad or e.requires_grad))
                or not _one_pass(np, t._data, e._data)):
            return False
    how = _lerp_weight(weight)
    for t, e in pairs:
        a = t._data
        _lerp_pass(a, e._data, a, *how)
        t._vc[0] += 1
    return True


def _lerp_out(xp, a, b, w, *, out):
    """``lerp`` written into ``out[0]`` (``lerp_``'s target: a model-EMA update ``ema.lerp_(p, 1 - decay)``
    in one pass, not a fresh result copied back), the same floats as the forward."""
    o = out[0]
    if (type(w) is float or type(w) is int) and (_one_pass(xp, a, b) if o is a else _one_pass(xp, a, b, o)):
        _lerp_pass(a, b, o, *_lerp_weight(w))
    elif hasattr(w, "dtype") and _one_pass(xp, a, b, w, o):
        _lerp_weights(a, b, w, o)
    else:
        o[...] = _lerp_fwd(xp, a, b, w)


def _lerp_vjp(g, out, a, b, w):
    return (ub(g * (1 - w), a), ub(g * w, b),
            ub(g * (b - a), w) if isinstance(w, Tensor) else None)


def _addcmul_fwd(xp, a, t1, t2, *, value=1):
    """``fma(value * tensor1, tensor2, input)``."""
    if a.dtype in _OPMATH32:
        f32 = xp.float32
        if _one_pass(xp, a, t1, t2):
            out = xp.empty_like(a)
            kernels.parallel(kernels.loops("pointwise").addcmul, 4, a.reshape(-1), t1.reshape(-1), t2.reshape(-1),
                             out.reshape(-1), f32(value))
            return out
        x = t1.astype(f32) if value == 1 else f32(value) * t1.astype(f32)
        return _fma32(xp, x, t2.astype(f32), a.astype(f32), a.dtype)
    return a + t1 * t2 if value == 1 else a + value * t1 * t2


def _addcmul_out(xp, a, t1, t2, *, value=1, out):
    """``addcmul`` written into ``out[0]`` (``a`` itself: an optimizer's ``v.addcmul_(g, g, value=1 - beta2)``
    in one pass, not a result copied back), the same floats as the forward."""
    o = out[0]
    if _one_pass(xp, a, t1, t2, o):
        kernels.parallel(kernels.loops("pointwise").addcmul, 4, a.ravel(), t1.ravel(), t2.ravel(), o.ravel(),
                         xp.float32(value))
    else:
        o[...] = _addcmul_fwd(xp, a, t1, t2, value=value)


def _addcmul_vjp(g, out, a, t1, t2, *, value=1):
    return ub(g, a), ub(g * t2 * value, t1), ub(g * t1 * value, t2)


def _addcdiv_fwd(xp, a, t1, t2, *, value=1):
    """``input + (value * tensor1) / tensor2``, PyTorch's order; float16 and bfloat16 in float32."""
    if a.size >= _LOOP_MIN and _one_pass(xp, a, t1, t2):
        return _addcdiv_pass(a, t1, t2, xp.empty_like(a), value)
    if a.dtype in _OPMATH32 and a.dtype != xp.float32:
        f32 = xp.float32
        return _addcdiv_fwd(xp, a.astype(f32), t1.astype(f32), t2.astype(f32), value=value).astype(a.dtype)
    return a + t1 / t2 if value == 1 else a + (value * t1) / t2


_LOOP_MIN = 4096   # below this many numbers numpy's passes cost less than a numba call (~1 us)


def _addcdiv_pass(a, t1, t2, out, value):
    """float32 ``addcdiv`` of same-shape contiguous arrays in one numba pass into ``out`` (``a`` itself too)."""
    kernels.parallel(kernels.loops("pointwise").addcdiv, 4, a.ravel(), t1.ravel(), t2.ravel(), out.ravel(),
                     np.float32(value))
    return out


def _addcdiv_out(xp, a, t1, t2, *, value=1, out):
    """``addcdiv`` written into ``out[0]``: the forward's quotient, then one add into ``out[0]`` (Adam's
    ``p.addcdiv_(m, denom, value=-lr)``: no sum to copy back)."""
    o = out[0]
    if a.size >= _LOOP_MIN and _one_pass(xp, a, t1, t2, o):
        _addcdiv_pass(a, t1, t2, o, value)
        return
    if a.dtype in _OPMATH32 and a.dtype != xp.float32:
        o[...] = _addcdiv_fwd(xp, a, t1, t2, value=value)
        return
    xp.add(a, t1 / t2 if value == 1 else (value * t1) / t2, out=o)


def _addcdiv_vjp(g, out, a, t1, t2, *, value=1):
    return ub(g, a), ub(g * value / t2, t1), ub(-g * value * t1 / (t2 * t2), t2)


_lerp = Op("lerp", _lerp_fwd, _lerp_vjp, elementwise=True, inplace=("lerp_",), onnx=_onnx_lerp, fwd_out=_lerp_out)
_addcmul = Op("addcmul", _addcmul_fwd, _addcmul_vjp, promote="common", saves=OTHERS, elementwise=True,
              fwd_out=_addcmul_out, onnx=lambda g, a, t1, t2, *, value=1: g.op("Add", a, g.op("Mul", g.op("Mul", t1, t2), value)))
_addcdiv = Op("addcdiv", _addcdiv_fwd, _addcdiv_vjp, promote="common", elementwise=True,
              fwd_out=_addcdiv_out, onnx=lambda g, a, t1, t2, *, value=1: g.op("Add", a, g.op("Mul", g.op("Div", t1, t2), value)))

def lerp(input: Tensor, end: Tensor, weight) -> Tensor:
    """``input + weight * (end - input)``; ``end`` (and a non-0-d ``weight``) must share input's dtype."""
    dt = input._data.dtype
    if end._data.dtype != dt:
        raise RuntimeError(f"expected dtype {input.dtype.cpp_name} for `end` but got dtype {end.dtype.cpp_name}")
    if isinstance(weight, Tensor) and weight._data.dtype != dt:
        if weight._data.ndim:
            raise RuntimeError(f"expected dtype {input.dtype.cpp_name} for `weight` but got dtype "
                               f"{weight.dtype.cpp_name}")
        weight = weight.to(input.dtype)
    return apply(_lerp, input, end, weight)


# ---------------------------------------------------------------- the deprecated number-first overloads
# Pre-1.5 code writes ``p.add_(-lr, grad)`` and ``v.addcmul_(1 - beta2, g, g)`` (the number first); PyTorch
# still takes them with one warning per process for all of them (its argument parser warns once).
_NUMBER_FIRST_WARNED: list = []


def _number_first(name: str, scalar: str, tensors: str, in_place: bool) -> None:
    if _NUMBER_FIRST_WARNED:
        return
    _NUMBER_FIRST_WARNED.append(name)
    if in_place:
        old, new = f"{name}(Number {scalar}, {tensors})", f"{name}({tensors}, *, Number {scalar} = 1)"
    else:
        old = f"{name}(Tensor input, Number {scalar}, {tensors}, *, Tensor out = None)"
        new = f"{name}(Tensor input, {tensors}, *, Number {scalar} = 1, Tensor out = None)"
    warnings.warn(f"This overload of {name} is deprecated:\n\t{old}\nConsider using one of the following "
                  f"signatures instead:\n\t{new}", UserWarning, stacklevel=4)


def _reordered(name: str, scalar: str, first, rest: tuple, default, in_place: bool) -> tuple:
    """The operands of a number-first call ``(first=number, *rest=tensors)`` in today's order, and the number."""
    if isinstance(first, Tensor) or not isinstance(first, (int, float, bool)) or default != 1:
        raise TypeError(f"{name}() received an invalid combination of arguments: a number comes first only in "
                        f"the deprecated {name}(Number {scalar}, ...) form, without {scalar}=")
    _number_first(name, scalar, "Tensor other" if len(rest) == 1 else "Tensor tensor1, Tensor tensor2", in_place)
    return rest, first


def addcmul(input: Tensor, tensor1, tensor2, *rest, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2``."""
    if rest:
        (tensor1, tensor2), value = _reordered("addcmul", "value", tensor1, (tensor2, *rest), value, False)
    return apply(_addcmul, input, tensor1, tensor2, value=value)


def addcdiv(input: Tensor, tensor1, tensor2, *rest, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (true division; integer operands are refused, as in PyTorch)."""
    if rest:
        (tensor1, tensor2), value = _reordered("addcdiv", "value", tensor1, (tensor2, *rest), value, False)
    _check_addcdiv(tensor1, tensor2)
    return apply(_addcdiv, input, tensor1, tensor2, value=value)


def _check_addcdiv(tensor1: Tensor, tensor2: Tensor) -> None:
    if tensor1._data.dtype.kind in "biu" and tensor2._data.dtype.kind in "biu":
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future release "
                           "addcdiv will perform a true division of tensor1 and tensor2. Use "
                           "torch.addcdiv(input, tensor1.float(), tensor2) or cast both to float first.")


def _addcmul_(self, tensor1, tensor2, *rest, value=1):
    if rest:
        (tensor1, tensor2), value = _reordered("addcmul_", "value", tensor1, (tensor2, *rest), value, True)
    return apply_(_addcmul, self, tensor1, tensor2, value=value)


def _addcdiv_(self, tensor1, tensor2, *rest, value=1):
    if rest:
        (tensor1, tensor2), value = _reordered("addcdiv_", "value", tensor1, (tensor2, *rest), value, True)
    _check_addcdiv(tensor1, tensor2)
    return apply_(_addcdiv, self, tensor1, tensor2, value=value)


_nan_to_num = Op("nan_to_num", lambda xp, a, *, nan=0.0, posinf=None, neginf=None:
                 xp.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf),
                 lambda g, out, a, **_: (keep_where(isfinite(a), g),), elementwise=True, onnx=_onnx_nan_to_num)


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """Replace NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: the dtype's extremes)."""
    return apply(_nan_to_num, input, nan=nan, posinf=posinf, neginf=neginf)


# ---------------------------------------------------------------- fill
_fill = Op("fill", lambda xp, a, value: xp.full_like(a, value),
           lambda g, out, a, value: (zeros_like(g), g.sum() if isinstance(value, Tensor) else None),
           saves=NONE, aliases=("zero_",), onnx=_onnx_fill, aten="fill_")


def fill_(self: Tensor, value) -> Tensor:
    """Overwrite every element with ``value`` (a number or a 0-d tensor)."""
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value._data.ndim} dimensions.")
    return self if fill_outside_autograd(self, value) else apply_(_fill, self, value)


def zero_(self: Tensor) -> Tensor:
    return self if fill_outside_autograd(self, 0) else apply_(_fill, self, 0)


# ---------------------------------------------------------------- Tensor surface
def _add_(self, other, *rest, alpha=1):
    if rest:
        (other,), alpha = _reordered("add_", "alpha", other, rest, alpha, True)
    return _scaled(_add, self, other, alpha, apply_)


def _sub_(self, other, *rest, alpha=1):
    if rest:
        (other,), alpha = _reordered("sub_", "alpha", other, rest, alpha, True)
    if _has_bool(self, other):
        raise _bool_sub_error()
    return _scaled(_sub, self, other, alpha, apply_)


def _sub_operator(self, other):
    if refused_operand(other):
        return NotImplemented
    if self._data.dtype.kind == "b" or other.__class__ is bool or (
            other.__class__ is Tensor and other._data.dtype.kind == "b"):
        raise _bool_sub_error()
    try:
        return apply(_sub, self, other)
    except TypeError:   # a numpy array, which the operators take (array_operand)
        return _sub_operator(self, array_operand(other))


def _rsub_operator(self, other):
    if refused_operand(other):
        return NotImplemented
    if self._data.dtype.kind == "b" or other.__class__ is bool:
        raise _bool_sub_error()
    try:
        return apply(_sub, other, self)
    except TypeError:
        return reflected_failure(other)


def _div_(self, other, *, rounding_mode=None):
    op, params = _rounding_op(rounding_mode)
    return apply_(op, self, other, **params)


def _round_(self, *, decimals=0):
    round(self, decimals=decimals)  # argument checks
    return apply_(_round, self, decimals=decimals)


def _nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    return apply_(_nan_to_num, self, nan=nan, posinf=posinf, neginf=neginf)


def _rtruediv(self, other):
    """``other / self`` as PyTorch's ``Tensor.__rtruediv__``: ``self.reciprocal() * other``, two roundings
    (a MulBackward0 over a ReciprocalBackward0)."""
    if refused_operand(other):
        return NotImplemented
    try:
        return mul(reciprocal(self), other)
    except TypeError:
        return _rtruediv(self, array_operand(other))


# Tensor methods; the in-place variants of these ops are declared with each op (``inplace=``)
METHODS = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
           "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
           "sigmoid", "relu", "erf", "erfc", "erfinv", "neg", "abs", "sign", "floor", "ceil", "trunc", "frac",
           "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "arctan2", "fix", "negative",
           "absolute", "multiply", "true_divide",
           "add", "sub", "mul", "div", "divide", "subtract", "floor_divide", "remainder", "fmod", "pow",
           "square", "round", "atan2", "hypot", "logaddexp", "xlogy", "lerp", "addcmul", "addcdiv", "nan_to_num")
def _operator(op, reflected=False, inplace=False, **params):
    """A Tensor operator method with ``params`` (``//``, ``%``, ``**``, the in-place ``+=`` ...):
    ``op(self, other)`` (``op(other, self)`` when ``reflected``; in place on self when ``inplace``),
    NotImplemented for a ``refused_operand``; ``binary`` is the hot ``+``, ``*``, ``/``."""
    def method(self, other):
        if refused_operand(other):
            return NotImplemented
        try:
            if inplace:
                return apply_(op, self, other, **params)
            return apply(op, other, self, **params) if reflected else apply(op, self, other, **params)
        except TypeError:   # a numpy array, which the operators take (array_operand), the reflected ones not
            return reflected_failure(other) if reflected else method(self, array_operand(other))
    return method


def _isub_operator(self, other):
    if refused_operand(other):
        return NotImplemented
    try:
        return _sub_(self, other)
    except TypeError:
        return _sub_(self, array_operand(other))


OPERATORS = {
    "__add__": binary(_add), "__radd__": binary(_add, reflected=True),
    "__sub__": _sub_operator, "__rsub__": _rsub_operator,
    "__mul__": binary(_mul), "__rmul__": binary(_mul, reflected=True),
    "__truediv__": binary(_div), "__rtruediv__": _rtruediv,
    "__floordiv__": _operator(_div_rounding, rounding_mode="floor"),
    "__rfloordiv__": _operator(_div_rounding, reflected=True, rounding_mode="floor"),
    "__mod__": _operator(_remainder), "__rmod__": _operator(_remainder, reflected=True),
    "__pow__": _operator(_pow), "__rpow__": _operator(_pow, reflected=True),
    "__neg__": neg, "__pos__": lambda s: s, "__abs__": abs,
    "__iadd__": _operator(_add, inplace=True), "__isub__": _isub_operator,
    "__imul__": _operator(_mul, inplace=True), "__itruediv__": _operator(_div, inplace=True),
    "__ifloordiv__": _operator(_div_rounding, inplace=True, rounding_mode="floor"),
    "__imod__": _operator(_remainder, inplace=True), "__ipow__": _operator(_pow, inplace=True),
    "add_": _add_, "sub_": _sub_, "subtract_": _sub_, "div_": _div_, "divide_": _div_, "true_divide_": _div_,
    "floor_divide_": lambda s, o: apply_(_div_rounding, s, o, rounding_mode="floor"),
    "square_": lambda s: apply_(_pow, s, 2), "round_": _round_, "nan_to_num_": _nan_to_num_,
    "fill_": fill_, "zero_": zero_, "addcmul_": _addcmul_, "addcdiv_": _addcdiv_,
}
# Python 2's names for the division operators, which PyTorch's Tensor keeps
OPERATORS.update(__div__=binary(_div), __rdiv__=lambda self, other: _rtruediv(self, other),
                 __idiv__=_operator(_div, inplace=True))
