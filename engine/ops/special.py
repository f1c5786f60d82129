"""Special functions and floating-point bit operations: gamma-family functions, Bessel i0, sinc,
logit, copysign/nextafter/frexp/ldexp, heaviside, gcd/lcm, bit shifts and their relatives.

Primitives where PyTorch's gradient is not what composing ops would give (gamma family, sinc at 0,
copysign at 0) or where there is no gradient (integer and bit ops); the rest are composites,
listed in ``COMPOSITES`` with what they are made of.
"""
from __future__ import annotations

import math

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from .. import return_types
from ..autograd.views import apply_
from ..base import backend as _backend
from ..base import dtype as _dtype
from ..base.meta import has_data
from ..core.dispatch import apply
from ..core.registry import NONE, Op, kernel_refusal
from ._util import Tensor, unbroadcast as ub
from .compare import clamp, where
from .elementwise import _unary as _elementwise_unary, _wants, log, logaddexp, pow
from .special_limits import scipy_bessel
from .special_series import exp_derivative, gammainc_da

__all__ = ["digamma", "lgamma", "polygamma", "mvlgamma", "i0", "igamma", "igammac", "sinc", "logit", "copysign",
           "nextafter", "heaviside", "gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift", "frexp", "ldexp",
           "float_power", "logaddexp2", "deg2rad", "rad2deg"]

_special = _backend.special
_LN2 = math.log(2.0)


def _unary(name: str, fwd, vjp, **meta):
    """elementwise's unary op, its public function living here (pickle finds ``digamma`` by its module)."""
    fn = _elementwise_unary(name, fwd, vjp, **meta)
    fn.__module__ = __name__
    return fn


def _cast(f):
    """A scipy.special function keeping the input's float dtype."""
    return lambda xp, a: f(_special(xp))(a).astype(a.dtype, copy=False)


# ---------------------------------------------------------------- gamma family and Bessel
def _trigamma(xp, a):
    """PyTorch's trigamma (ATen's ``calc_trigamma``): reflection below 0.5, six recurrence steps, then
    the asymptotic series. It is about 1e-10 off the true value (scipy's zeta); programs see its numbers
    in every second derivative of ``lgamma`` and first of ``digamma``."""
    small = a < 0.5
    x = xp.where(small, 1 - a, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.sin(math.pi * a)
        result = xp.where(small, -(math.pi * math.pi) / (s * s), 0).astype(a.dtype, copy=False)
        for _ in range(6):
            result = result + 1 / (x * x)
            x = x + 1
        ixx = 1 / (x * x)
        result = result + (1 + 1 / (2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return xp.where(small, -result, result).astype(a.dtype, copy=False)


def _polygamma_fwd(xp, a, *, n):
    sp = _special(xp)
    if n == 0:
        return sp.digamma(a).astype(a.dtype, copy=False)
    if n == 1:
        return _trigamma(xp, a)
    # psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x): two ufuncs, on every array backend
    return ((-1) ** (n + 1) * math.factorial(n) * sp.zeta(n + 1, a)).astype(a.dtype, copy=False)


_polygamma = Op("polygamma", _polygamma_fwd, lambda g, out, a, *, n: (g * apply(_polygamma, a, n=n + 1),),
                promote="float", elementwise=True,
                complex_error=(NotImplementedError, "\"polygamma\" not implemented for '{dtype}'"))
digamma = _unary("digamma", _cast(lambda sp: sp.digamma), lambda g, out, a: (g * apply(_polygamma, a, n=1),),
                 complex_error=(NotImplementedError, "\"digamma\" not implemented for '{dtype}'"))
def _lgamma_fwd(xp, a):
    out = _special(xp).gammaln(a).astype(a.dtype, copy=False)
    return xp.where(a == -math.inf, math.inf, out).astype(a.dtype, copy=False)   # |Gamma| grows at -inf


lgamma = _unary("lgamma", _lgamma_fwd, lambda g, out, a: (g * digamma(a),),
                complex_error=kernel_refusal("lgamma_vml"))


def _i1_vjp(g, out, a):
    # i1'(x) = i0(x) - i1(x)/x, and 1/2 at 0
    safe = where(a == 0, 1.0, a)
    return (g * where(a == 0, 0.5, i0(a) - out / safe),)


# scipy's i0/i1 in float64 on every backend, where cupy's differ too (engine/ops/special_limits.py)
_i1 = Op("special_i1", scipy_bessel("i1"), _i1_vjp, promote="float", save_output=True, elementwise=True,
         complex_error=kernel_refusal("i1"))
i0 = _unary("i0", scipy_bessel("i0"), lambda g, out, a: (g * apply(_i1, a),),
            complex_error=kernel_refusal("i0_vml"))


def _density(a, x):
    """d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)."""
    return (-x + (a - 1) * log(x) - lgamma(a)).exp()


def _igamma_vjp(sign: float):
    def vjp(g, out, a, x):
        # d/da by special_series.gammainc_da: PyTorch has no gradient in the shape parameter
        ga = ub(g * sign * apply(_igamma_da, a, x, order=1), a) if _wants(a) else None
        return ga, (ub(g * _density(a, x) * sign, x) if _wants(x) else None)
    return vjp


def _igamma_da_fwd(xp, a, x, *, order):
    if not has_data(xp):
        return xp.empty(np.broadcast_shapes(a.shape, x.shape), a.dtype)
    return gammainc_da(xp, _special(xp), a.astype("float64"), x.astype("float64"), order).astype(a.dtype, copy=False)


def _igamma_da_vjp(g, out, a, x, *, order):
    # in a: the next order; in x: d^n/da^n of the density e^h, h = (a-1) ln x - lgamma(a), by Faà di Bruno
    ga = ub(g * apply(_igamma_da, a, x, order=order + 1), a) if _wants(a) else None
    if not _wants(x):
        return ga, None
    first = log(x) - digamma(a)
    h = exp_derivative(order, 0, lambda p, q: first if p == 1 else -apply(_polygamma, a, n=p - 1))
    return ga, ub(g * _density(a, x) * h, x)


# d^order/da^order P(a, x), for the gradients of igamma and igammac in a (each order differentiates again)
_igamma_da = Op("igamma_grad_a", _igamma_da_fwd, _igamma_da_vjp, promote="float", elementwise=True)
_igamma = Op("igamma", lambda xp, a, x: _special(xp).gammainc(a, x).astype(a.dtype, copy=False),
             _igamma_vjp(1.0), promote="float", elementwise=True, inplace=("igamma_",),
             complex_error=kernel_refusal("igamma"))
_igammac = Op("igammac", lambda xp, a, x: _special(xp).gammaincc(a, x).astype(a.dtype, copy=False),
              _igamma_vjp(-1.0), promote="float", elementwise=True, inplace=("igammac_",),
              complex_error=kernel_refusal("igammac"))


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of ``digamma``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(polygamma, (input,), n, input)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return apply(_polygamma, input, n=int(n))


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """Log of the multivariate gamma function of dimension ``p``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(mvlgamma, (input,), input, p)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    total = lgamma(input)
    for j in range(1, p):
        total = total + lgamma(input - j / 2)
    return total + p * (p - 1) / 4 * math.log(math.pi)


def igamma(input: Tensor, other: Tensor) -> Tensor:
    """The regularised lower incomplete gamma function ``P(input, other)``."""
    return apply(_igamma, input, other)


def igammac(input: Tensor, other: Tensor) -> Tensor:
    """The regularised upper incomplete gamma function ``Q(input, other)``."""
    return apply(_igammac, input, other)


def _sinc_vjp(g, out, a):
    pa = a * math.pi
    safe = where(a == 0, 1.0, pa)
    return (g * where(a == 0, 0.0, ((pa.cos() * pa - pa.sin()) * math.pi) / (safe * safe)),)


def _sinc_fwd(xp, a):
    pa = a * math.pi
    with_zero = xp.where(a == 0, 1, pa)
    return xp.where(a == 0, 1, xp.sin(with_zero) / with_zero).astype(a.dtype, copy=False)


sinc = _unary("sinc", _sinc_fwd, _sinc_vjp)


def _real_only(input, kind: type, message: str) -> None:
    """A composite's refusal of complex input, in PyTorch's words (a declared op says ``complex_error``)."""
    if isinstance(input, Tensor) and input.is_complex():
        raise kind(message.format(dtype=input.dtype.scalar_type))


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(logit, (input,), input, eps=eps)
    _real_only(input, NotImplementedError, "\"logit_cpu\" not implemented for '{dtype}'")
    x = input if eps is None else clamp(input, eps, 1 - eps)
    return log(x / (1 - x))


# ---------------------------------------------------------------- floating-point bits
def _copysign_vjp(g, out, a, b):
    ratio = where(a == 0, 0.0, out / where(a == 0, 1.0, a))
    return (ub(g * ratio, a) if _wants(a) else None), (ub(g * 0.0, b) if _wants(b) else None)


_copysign = Op("copysign", lambda xp, a, b: xp.copysign(a, b), _copysign_vjp, promote="float", save_output=True,
               elementwise=True, out_form="copysign", inplace=("copysign_",), complex_error=kernel_refusal("copysign"))
_nextafter = Op("nextafter", lambda xp, a, b: xp.nextafter(a, b), promote="common", elementwise=True,
                out_form="nextafter", inplace=("nextafter_",), complex_error=kernel_refusal("nextafter"))
_heaviside = Op("heaviside", lambda xp, a, b: xp.heaviside(a, b).astype(a.dtype, copy=False), promote="common",
                elementwise=True, inplace=("heaviside_",),
                complex_error=(RuntimeError, "heaviside is not yet implemented for complex tensors."))
_gcd = Op("gcd", lambda xp, a, b: xp.gcd(a, b), promote="common", elementwise=True, out_form="gcd", inplace=("gcd_",))
_lcm = Op("lcm", lambda xp, a, b: xp.lcm(a, b), promote="common", elementwise=True, out_form="lcm", inplace=("lcm_",))
_lshift = Op("bitwise_left_shift", lambda xp, a, b: xp.left_shift(a, b), promote="common", elementwise=True,
             out_form="left_shift", inplace=("bitwise_left_shift_",), operator="lshift")
_rshift = Op("bitwise_right_shift", lambda xp, a, b: xp.right_shift(a, b), promote="common", elementwise=True,
             out_form="right_shift", inplace=("bitwise_right_shift_",), operator="rshift")


def _frexp_fwd(xp, a):
    mantissa, exponent = xp.frexp(a)
    return mantissa.astype(a.dtype, copy=False), exponent.astype(xp.int32, copy=False)


_frexp = Op("frexp", _frexp_fwd, n_extra=1, saves=NONE)


def _float_only(name: str, *xs) -> None:
    """Integer operands (complex ones meet the op's ``complex_error``)."""
    if any(isinstance(x, Tensor) and not x.is_floating_point() and not x.is_complex() for x in xs):
        bad = next(x for x in xs if isinstance(x, Tensor) and not x.is_floating_point() and not x.is_complex())
        raise RuntimeError(f'"{name}_cpu" not implemented for \'{bad.dtype.scalar_type}\'')


def _ints_only(name: str, *xs) -> None:
    """PyTorch's integer kernels refuse a float or bool result dtype of the operands' promotion (a bool
    tensor shifted by a Python int is int64 and runs); the meta device has no kernel, so no check."""
    if any(isinstance(x, Tensor) and x.device.type == "meta" for x in xs) or not all(
            isinstance(x, (Tensor, int, float, complex)) for x in xs):
        return   # (an operand that is neither: the dispatcher refuses it in PyTorch's words)
    dt = _dtype.result_type(*xs)
    if dt.is_floating_point or dt.is_complex or dt == _dtype.bool:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{dt.scalar_type}\'')


def copysign(input, other) -> Tensor:
    """``|input|`` with the sign of ``other`` (the sign bit: -0.0 counts as negative)."""
    return apply(_copysign, input, other)


def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next representable float after ``input`` towards ``other``."""
    _float_only("nextafter", input, other)
    return apply(_nextafter, input, other)


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """0 where ``input < 0``, 1 where ``input > 0``, ``values`` where it is 0."""
    if isinstance(values, Tensor) and values.dtype != input.dtype and not values.is_complex():
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    return apply(_heaviside, input, values)


def gcd(input: Tensor, other: Tensor) -> Tensor:
    _ints_only("gcd", input, other)
    return apply(_gcd, input, other)


def lcm(input: Tensor, other: Tensor) -> Tensor:
    _ints_only("lcm", input, other)
    return apply(_lcm, input, other)


def bitwise_left_shift(input, other) -> Tensor:
    """``input << other`` for integer tensors."""
    _ints_only("lshift", input, other)
    return apply(_lshift, input, other)


def bitwise_right_shift(input, other) -> Tensor:
    """``input >> other`` (arithmetic shift) for integer tensors."""
    _ints_only("rshift", input, other)
    return apply(_rshift, input, other)


def frexp(input: Tensor):
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent`` and ``|mantissa|`` in [0.5, 1)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(frexp, (input,), input)
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return return_types.frexp(*apply(_frexp, input))


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2**other``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, other)):
        return handle_torch_function(ldexp, (input, other), input, other)
    return input * pow(2.0, other)


def float_power(input, exponent) -> Tensor:
    """``input ** exponent`` computed in double precision (float64 result)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, exponent)):
        return handle_torch_function(float_power, (input, exponent), input, exponent)
    base = input.double() if isinstance(input, Tensor) else float(input)
    exp = exponent.double() if isinstance(exponent, Tensor) else float(exponent)
    return pow(base, exp)


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2**input + 2**other)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, other)):
        return handle_torch_function(logaddexp2, (input, other), input, other)
    return logaddexp(input * _LN2, other * _LN2) / _LN2


def deg2rad(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(deg2rad, (input,), input)
    _real_only(input, RuntimeError, "deg2rad is not supported for complex tensors.")
    return input * (math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(rad2deg, (input,), input)
    _real_only(input, RuntimeError, "rad2deg is not supported for complex tensors.")
    return input * (180.0 / math.pi)


# ---------------------------------------------------------------- Tensor methods
def _in_place(fn):
    """The in-place method of a composite: compute, then write into ``self`` (one version bump)."""
    def method(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    return method


def _float_power_(self, exponent):
    if self.dtype != _dtype.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype.scalar_type} but the "
                           "operation's result requires dtype Double")
    return self.copy_(float_power(self, exponent))


METHODS = ("digamma", "lgamma", "mvlgamma", "i0", "igamma", "igammac", "sinc", "logit", "copysign", "nextafter",
           "heaviside", "gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift", "frexp", "ldexp", "float_power",
           "logaddexp2", "deg2rad", "rad2deg")
def _shift_inplace(kernel: str, name: str):
    def method(self, other):
        _ints_only(kernel, self, other)
        return getattr(self, name)(other)
    return method


OPERATORS = {"polygamma": lambda self, n: polygamma(n, self),
             "__lshift__": lambda self, other: bitwise_left_shift(self, other),
             "__rlshift__": lambda self, other: bitwise_left_shift(other, self),
             "__rshift__": lambda self, other: bitwise_right_shift(self, other),
             "__rrshift__": lambda self, other: bitwise_right_shift(other, self),
             "__ilshift__": _shift_inplace("lshift", "bitwise_left_shift_"),
             "__irshift__": _shift_inplace("rshift", "bitwise_right_shift_"),
             "polygamma_": lambda self, n: apply_(_polygamma, self, n=int(n)),
             "mvlgamma_": _in_place(mvlgamma), "logit_": _in_place(logit), "ldexp_": _in_place(ldexp),
             "float_power_": _float_power_, "deg2rad_": _in_place(deg2rad), "rad2deg_": _in_place(rad2deg)}

# public names that are plain functions over other ops (tests/test_op_declarations.py reads this)
COMPOSITES = {
    "mvlgamma": "a sum of lgamma", "mvlgamma_": "mvlgamma, then copy_", "logit": "clamp, div and log",
    "logit_": "logit, then copy_", "ldexp": "pow and mul", "ldexp_": "ldexp, then copy_",
    "float_power": "casts to float64 and pow", "float_power_": "float_power, then copy_",
    "logaddexp2": "logaddexp of scaled inputs", "deg2rad": "a mul", "deg2rad_": "deg2rad, then copy_",
    "rad2deg": "a mul", "rad2deg_": "rad2deg, then copy_",
}
