"""Complex parts and conjugation: ``real``, ``imag``, ``conj``, ``angle``, ``sgn``, ``view_as_real``,
``view_as_complex``, ``complex``, ``polar``.

Gradients follow PyTorch's convention for complex tensors: a vjp returns the conjugate Wirtinger
gradient, so for a real loss ``L`` of ``z = x + iy``, ``z.grad`` is ``dL/dx + i dL/dy``.
``real``/``imag``/``view_as_real``/``view_as_complex`` are views (numpy's ``.real`` and ``.view``).
On real tensors every function here is PyTorch's answer for real values at no cost: ``conj`` and
``real`` return the tensor itself. tapelab keeps no lazy conjugate bit: ``conj`` of a complex tensor
is ``conj_physical`` (a new tensor), so ``is_conj()`` is always False and ``resolve_conj`` is free.
"""
from __future__ import annotations

import math

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..base.meta import has_data
from ..base.pytype import tp_name
from ..core.arguments import refuse_non_tensors
from ..core.dispatch import apply
from ..core.registry import NONE, Op
from .compare import where
from ._util import Tensor, unbroadcast as ub

__all__ = ["conj", "conj_physical", "resolve_conj", "resolve_neg", "real", "imag", "angle", "sgn", "view_as_real",
           "view_as_complex", "complex", "polar"]


def _cx(t: Tensor) -> bool:
    try:
        return t._data.dtype.kind == "c"
    except AttributeError:
        refuse_non_tensors("angle", t)
        raise


def _complex_of(t: Tensor) -> _dtype.dtype:
    return _dtype.from_np(t._data.dtype).to_complex()


_conj = Op("conj_physical", lambda xp, a: xp.conjugate(a), lambda g, out, a: (conj(g),), saves=NONE,
           elementwise=True, ufunc="conjugate", aliases=("conj",), inplace=("conj_physical_",))


def conj(input: Tensor) -> Tensor:
    """The complex conjugate; a real tensor is its own (returned as is, no copy)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(conj, (input,), input)
    try:
        return apply(_conj, input) if input._data.dtype.kind == "c" else input
    except AttributeError:
        refuse_non_tensors("conj", input)
        raise


def conj_physical(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(conj_physical, (input,), input)
    return conj(input)


def resolve_conj(input: Tensor) -> Tensor:
    """``input``: tapelab's conjugates are already materialised (no lazy conjugate bit)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(resolve_conj, (input,), input)
    return input


def resolve_neg(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(resolve_neg, (input,), input)
    return input


def _real_vjp(g, out, a):
    return (g.to(_complex_of(a)),)


def _imag_vjp(g, out, a):
    return (g.to(_complex_of(a)) * 1j,)


_real = Op("real", lambda xp, a: a.real, _real_vjp, saves=NONE, is_view=True)
_imag = Op("imag", lambda xp, a: a.imag, _imag_vjp, saves=NONE, is_view=True)


def real(input: Tensor) -> Tensor:
    """The real parts, a view of a complex tensor (settable: ``z.real = x``); a real tensor itself."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(real, (input,), input)
    return apply(_real, input) if input._data.dtype.kind == "c" else input


def imag(input: Tensor) -> Tensor:
    """The imaginary parts, a view of a complex tensor; an error for a real one, as in PyTorch."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(imag, (input,), input)
    if not _cx(input):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply(_imag, input)


def _set_part(part):
    def setter(self: Tensor, value) -> None:
        part(self).copy_(value)
    return setter


def _angle_vjp(g, out, a):
    # d(angle)/dx + i d(angle)/dy = i z / |z|^2, and 0 at z = 0 (PyTorch's angle_backward)
    r2 = (a * a.conj()).real
    return (where(r2 == 0, 0, g * a * 1j / where(r2 == 0, 1, r2)),)


_angle = Op("angle", lambda xp, a: xp.angle(a), _angle_vjp, elementwise=True, complex=True)


def angle(input: Tensor) -> Tensor:
    """The argument of each element, in radians. Real tensors: pi for negative values, 0 otherwise
    (NaN stays NaN); integers give the default float dtype."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(angle, (input,), input)
    if _cx(input):
        return apply(_angle, input)
    x = input if input.is_floating_point() else input.to(_dtype.get_default_dtype())
    return (x < 0).to(x.dtype) * math.pi + x * 0


def _sgn_fwd(xp, a):
    r = xp.abs(a)
    return xp.where(r == 0, 0, a / xp.where(r == 0, 1, r)).astype(a.dtype, copy=False)


def _sgn_vjp(g, out, a):
    # PyTorch's sgn_backward: (g - Re(g conj(s)) s) / |z|, and 0 at z = 0
    r = a.abs()
    safe = where(r == 0, 1, r)
    return (where(r == 0, 0, (g - (g * out.conj()).real * out) / safe),)


_sgn = Op("sgn", _sgn_fwd, _sgn_vjp, save_output=True, elementwise=True, complex=True, inplace=("sgn_",))


def sgn(input: Tensor) -> Tensor:
    """``z / |z|`` (0 at 0) for complex tensors; ``sign`` for real ones."""
    return apply(_sgn, input) if _cx(input) else input.sign()


def _view_as_real_fwd(xp, a):
    # the real parts' view with one more axis stepping half an element: a view for any strides
    re = a.real
    return xp.lib.stride_tricks.as_strided(re, shape=a.shape + (2,), strides=a.strides + (re.itemsize,))


def _view_as_complex_fwd(xp, a):
    cdt = _dtype.from_np(a.dtype).to_complex().np
    if not has_data(xp):   # a meta array's zero strides cannot be reinterpreted
        return xp.empty(a.shape[:-1], cdt)
    return a.view(cdt).reshape(a.shape[:-1])


_view_as_real = Op("view_as_real", _view_as_real_fwd, lambda g, out, a: (view_as_complex(g.contiguous()),),
                   saves=NONE, is_view=True)
_view_as_complex = Op("view_as_complex", _view_as_complex_fwd, lambda g, out, a: (view_as_real(g),),
                      saves=NONE, is_view=True)


def view_as_real(input: Tensor) -> Tensor:
    """A real view of a complex tensor with a last dim of size 2 (real, imaginary)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(view_as_real, (input,), input)
    if not _cx(input):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return apply(_view_as_real, input)


def view_as_complex(input: Tensor) -> Tensor:
    """A complex view of a float32/float64 tensor whose last dim (size 2, stride 1) holds the parts."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(view_as_complex, (input,), input)
    if input.dtype not in (_dtype.float32, _dtype.float64):
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, but got a tensor "
                           f"of scalar type: {input.dtype.name}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError(f"Tensor must have a last dimension of size 2 (got shape {list(input.shape)})")
    st = input.stride()
    if st[-1] != 1:
        raise RuntimeError(f"Tensor must have a last dimension with stride 1 (got strides {list(st)})")
    if any(s % 2 for s in st[:-1]):
        raise RuntimeError(f"Tensor must have a stride divisible by 2 for all but last dimension (got strides "
                           f"{list(st)})")
    return apply(_view_as_complex, input)


def _complex_fwd(xp, re, im):
    return re + im * 1j


_complex = Op("complex", _complex_fwd, lambda g, out, re, im: (ub(g.real, re), ub(g.imag, im)), saves=NONE,
              elementwise=True)


def complex(real: Tensor, imag: Tensor) -> Tensor:
    """The complex tensor ``real + i imag`` (both float32, float64; broadcast), as ``torch.complex``."""
    if _DISPATCH.functions is not None and has_tensor_like((real, imag)):
        return handle_torch_function(complex, (real, imag), real, imag)
    for position, (name, t) in enumerate((("real", real), ("imag", imag)), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"complex(): argument '{name}' (position {position}) must be Tensor, not {tp_name(t)}")
    if real.dtype is not imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {real.dtype.name} but got scalar type "
                           f"{imag.dtype.name} for second argument")
    if real.dtype not in (_dtype.float32, _dtype.float64):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got {real.dtype.name} "
                           f"and {imag.dtype.name}")
    return apply(_complex, real, imag)


def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """``abs * (cos(angle) + i sin(angle))``."""
    if _DISPATCH.functions is not None and has_tensor_like((abs, angle)):
        return handle_torch_function(polar, (abs, angle), abs, angle)
    return complex(abs * angle.cos(), abs * angle.sin())


METHODS = ("conj", "conj_physical", "resolve_conj", "resolve_neg", "angle", "sgn")
OPERATORS = {"real": property(real, _set_part(real)), "imag": property(imag, _set_part(imag))}

COMPOSITES = {"resolve_conj": "the tensor itself", "resolve_neg": "the tensor itself",
              "polar": "complex of cos and sin"}
