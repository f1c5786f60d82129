"""``torch._foreach_*``: one op over a list of tensors, as model-EMA updates and hand-written
optimizers call it (``torch._foreach_lerp_(ema_params, params, 1 - decay)``).

Each applies the Tensor method of the same name to every tensor of the list, so values,
promotion, errors and autograd are the single-tensor op's own; the second operand is one number,
a 0-d tensor, or a list (of numbers or tensors) matched element by element, as PyTorch's overloads
take them. Out-of-place forms return a tuple, in-place forms (``_`` suffix) the list they updated.
tapelab's optimizers run their own multi-tensor steps on flat arrays (``optim/_foreach.py``);
these are the public front end for programs that call PyTorch's names directly.
"""
from __future__ import annotations

from numbers import Number

from .core.tensor import Tensor
from .ops.reduce import vector_norm
from .ops.elementwise import _mul, _div, lerp_arrays_, pow as _pow, scaled_add_arrays_, ufunc_arrays_

__all__: list = []

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor",
          "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt",
          "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")
# name: (Tensor method, the one for a number operand, the in-place one without its "_", takes ``alpha``):
# maximum and minimum have no in-place Tensor methods; clamp_min_/clamp_max_ are the same (NaN included)
_BINARY = {"add": ("add", "add", "add", True), "sub": ("sub", "sub", "sub", True),
           "mul": ("mul", "mul", "mul", False), "div": ("div", "div", "div", False),
           "pow": ("pow", "pow", "pow", False), "clamp_min": ("clamp_min", "clamp_min", "clamp_min", False),
           "clamp_max": ("clamp_max", "clamp_max", "clamp_max", False),
           "maximum": ("maximum", "clamp_min", "clamp_min", False), "minimum": ("minimum", "clamp_max", "clamp_max", False)}


def _tensors(name: str, tensors) -> list:
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"_foreach_{name}(): argument 'self' (position 1) must be tuple of Tensors, "
                        f"not {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return list(tensors)


def _operands(name: str, tensors: list, other, position: int = 2) -> list:
    """The second operand of each tensor: one number or 0-d tensor for all, or a list, one each."""
    if isinstance(other, (list, tuple)):
        if all(isinstance(o, Tensor) for o in other) and other:
            if len(other) != len(tensors):
                raise RuntimeError(f"Tensor lists must have the same number of tensors, got {len(tensors)} "
                                   f"and {len(other)}")
        elif all(isinstance(o, Number) for o in other):
            if len(other) != len(tensors):
                raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        else:
            raise TypeError(f"_foreach_{name}(): argument {position} must be a number, a tensor, or a list "
                            f"of numbers or of tensors")
        return list(other)
    if isinstance(other, Tensor):
        if other.ndim != 0:
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.ndim} dimensions and "
                               f"{other.numel()} elements.")
        return [other] * len(tensors)
    if isinstance(other, Number):
        return [other] * len(tensors)
    raise TypeError(f"_foreach_{name}(): argument {position} must be a number, a tensor, or a list of numbers "
                    f"or of tensors, not {type(other).__name__}")


def _export(name: str, fn) -> None:
    fn.__name__ = fn.__qualname__ = f"_foreach_{name}"
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)


def _unary(name: str) -> None:
    def out_of_place(self):
        return tuple(getattr(t, name)() for t in _tensors(name, self))

    def in_place(self):
        for t in _tensors(name + "_", self):
            getattr(t, name + "_")()
        return self
    out_of_place.__doc__ = f"``[t.{name}() for t in self]``, as a tuple."
    in_place.__doc__ = f"``t.{name}_()`` for each tensor of ``self``; returns ``self``."
    _export(name, out_of_place)
    _export(name + "_", in_place)


def _binary(name: str, method: str, number_method: str, inplace_method: str, takes_alpha: bool):
    def each(m, o, alpha):
        return m(o, alpha=alpha) if takes_alpha and alpha != 1 else m(o)

    def out_of_place(self, other, *, alpha=1):
        tensors = _tensors(name, self)
        return tuple(each(getattr(t, number_method if isinstance(o, Number) else method), o, alpha)
                     for t, o in zip(tensors, _operands(name, tensors, other)))

    def in_place(self, other, *, alpha=1):
        tensors = _tensors(name + "_", self)
        operands = _operands(name + "_", tensors, other)
        if not _on_arrays(name, tensors, operands, alpha):
            for t, o in zip(tensors, operands):
                each(getattr(t, inplace_method + "_"), o, alpha)
        return self
    out_of_place.__doc__ = f"``t.{method}(o)`` for each tensor and its operand (one for all, or a list)."
    in_place.__doc__ = f"``t.{method}_(o)`` for each tensor and its operand; returns ``self``."
    _export(name, out_of_place)
    _export(name + "_", in_place)
    return out_of_place


def _on_arrays(name: str, tensors: list, operands: list, alpha) -> bool:
    """An optimizer's in-place update (``add_``/``sub_`` of tensors with ``alpha``, ``mul_``/``div_`` by
    tensors or numbers) straight on the arrays where nobody watches and nothing is recorded: the same
    writes as each tensor's own method, without its dispatch (``ops/elementwise.py``). False: nothing done."""
    if name in ("add", "sub"):
        return all(isinstance(o, Tensor) for o in operands) and scaled_add_arrays_(
            list(zip(tensors, operands)), alpha if name == "add" else -alpha)
    if name in ("mul", "div"):
        return ufunc_arrays_(_mul if name == "mul" else _div, list(zip(tensors, operands)))
    return False


for _name in _UNARY:
    _unary(_name)
_BINARY_FORMS = {_name: _binary(_name, *_how) for _name, _how in _BINARY.items()}


def _foreach_pow(self, exponent):
    """``t ** e`` for each tensor (exponent one for all or a list), or, with a number first,
    ``self ** t`` for each tensor of ``exponent``."""
    if isinstance(self, Number):
        return tuple(_pow(self, t) for t in _tensors("pow", exponent))
    return _BINARY_FORMS["pow"](self, exponent)


def _pointwise3(name: str) -> None:
    def values(nm, tensors, value, scalars) -> list:
        value = value if scalars is None else scalars
        if isinstance(value, Tensor) and value.ndim == 1:
            if value.numel() != len(tensors):
                raise RuntimeError("Tensor list must have same number of elements as scalar list.")
            return value.tolist()
        return _operands(nm, tensors, value, 4)

    def each(nm, self, tensor1, tensor2, value, scalars):
        tensors = _tensors(nm, self)
        return zip(tensors, _operands(nm, tensors, tensor1), _operands(nm, tensors, tensor2),
                   values(nm, tensors, value, scalars))

    def out_of_place(self, tensor1, tensor2, value=1, *, scalars=None):
        return tuple(getattr(t, name)(a, b, value=v) for t, a, b, v in each(name, self, tensor1, tensor2, value, scalars))

    def in_place(self, tensor1, tensor2, value=1, *, scalars=None):
        for t, a, b, v in each(name + "_", self, tensor1, tensor2, value, scalars):
            getattr(t, name + "_")(a, b, value=v)
        return self
    out_of_place.__doc__ = (f"``t.{name}(a, b, value=v)`` for each tensor: ``value`` one number for all, or "
                            f"(``scalars``) a list or 1-D tensor, one each.")
    in_place.__doc__ = f"``t.{name}_(a, b, value=v)`` for each tensor; returns ``self``."
    _export(name, out_of_place)
    _export(name + "_", in_place)


_pointwise3("addcmul")
_pointwise3("addcdiv")


def _foreach_lerp(self, tensors1, weight):
    """``t.lerp(e, w)`` for each tensor, its end and its weight (one number for all, or a list)."""
    tensors = _tensors("lerp", self)
    return tuple(t.lerp(e, w) for t, e, w in
                 zip(tensors, _operands("lerp", tensors, tensors1), _operands("lerp", tensors, weight, 3)))


def _foreach_lerp_(self, tensors1, weight):
    """``t.lerp_(e, w)`` for each tensor (the model-EMA update); returns ``self``."""
    tensors = _tensors("lerp_", self)
    ends = _operands("lerp_", tensors, tensors1)
    if not isinstance(weight, (list, tuple)) and lerp_arrays_(list(zip(tensors, ends)), weight):
        return self                     # nobody watching, float32 arrays: the loop on each, no dispatch
    for t, e, w in zip(tensors, ends, _operands("lerp_", tensors, weight, 3)):
        t.lerp_(e, w)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    """The vector norm of each tensor (``torch.linalg.vector_norm``), as a tuple of 0-d tensors."""
    return tuple(vector_norm(t, ord, dtype=dtype) for t in _tensors("norm", self))


def _foreach_powsum(self, ord=2, dtype=None):
    """``sum(|t| ** ord)`` of each tensor."""
    return tuple((t.abs() ** ord).sum(dtype=dtype) for t in _tensors("powsum", self))


def _foreach_max(self):
    """The largest element of each tensor."""
    return tuple(t.max() for t in _tensors("max", self))


def _foreach_clone(self):
    return tuple(t.clone() for t in _tensors("clone", self))


def _foreach_copy_(self, src, non_blocking: bool = False):
    """``t.copy_(s)`` for each tensor and its source; returns ``self``."""
    tensors = _tensors("copy_", self)
    for t, s in zip(tensors, _operands("copy_", tensors, _tensors("copy_", src))):
        t.copy_(s, non_blocking=non_blocking)
    return self


def _foreach_zero_(self):
    for t in _tensors("zero_", self):
        t.zero_()
    return self


def _foreach_mm(self, mat2):
    tensors = _tensors("mm", self)
    return tuple(a.mm(b) for a, b in zip(tensors, _operands("mm", tensors, _tensors("mm", mat2))))


__all__ += ["_foreach_lerp", "_foreach_lerp_", "_foreach_norm", "_foreach_powsum",
            "_foreach_max", "_foreach_clone", "_foreach_copy_", "_foreach_zero_", "_foreach_mm"]
