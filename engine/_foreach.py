"""``torch._foreach_*``: one op over a list of tensors, as model-EMA updates and hand-written
optimizers call it (``torch._foreach_lerp_(ema_params, params, 1 - decay)``).

Each applies the Tensor method of the same name to every tensor of the list, so values,
promotion, errors and autograd are the single-tensor op's own; the second operand is one number,
a 0-d tensor, or a list (of numbers or tensors) matched element by element, as PyTorch's overloads
take them. Out-of-place forms return a tuple, in-place forms (``_`` suffix) the list they updated.
tapelab's optimizers run their own multi-tensor steps on flat arrays (``optim/_foreach.py``);
these are the public front end for programs that call PyTorch's names directly.

While nobody watches and nothing needs recording (no input requiring grad under grad mode), a list of
plain float32/float64 arrays of matching shapes takes ``_loop``: the op's own forward (or its in-place
writer, as ``apply_`` picks it) on each array in turn, without the dispatch per tensor (which cost
more than a small tensor's pass). Everything else (views, promotion, broadcasting, other devices,
autograd, and every error) goes through the Tensor methods, one tensor at a time.
"""
from __future__ import annotations

from numbers import Number

import numpy as np

from .base.dispatch_state import STATE as _DISPATCH
from .base.device import CPU
from .base.grad_mode import is_grad_enabled
from .core.registry import REGISTRY
from .core.tensor import Tensor, _new
from .ops.reduce import vector_norm
from .ops.elementwise import pow as _pow

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


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_WRITEABLE, _C_WRITEABLE = 0x400, 0x401   # numpy's flag bits: NPY_ARRAY_WRITEABLE, | NPY_ARRAY_C_CONTIGUOUS


def _c_strides(x) -> bool:
    """Row-major strides on every dimension, one-element ones too (numpy's contiguity ignores theirs,
    ATen's ordering reads them: such an array keeps the dispatcher's path)."""
    step = x.itemsize
    for n, s in zip(reversed(x.shape), reversed(x.strides)):
        if s != step:
            return False
        step *= n
    return True


def _loop(op, tensors: list, operands: list, params: dict, inplace: bool):
    """``op`` on each tensor of ``tensors`` and its operands (``operands``: one list per operand, each
    entry a tensor or a Python number) straight on the arrays: the out-of-place form runs the op's
    forward and wraps each result as the dispatcher does, the in-place one writes into the target with
    its ufunc, else its elementwise ``fwd_out`` (as ``apply_`` does), else its ``out_form``, else the
    forward and a copy back, and moves the version counter. The same floats as the Tensor methods.

    None (nothing done) unless nothing watches, nothing would record, and each tensor is a float32 or
    float64 numpy array whose tensor operands are numpy arrays of its dtype and shape (or 0-d) and whose
    numbers are ``int``/``float``; in place, a writeable array that is no view (row-major for a
    ``fwd_out``); out of place with tensor operands, row-major with ATen's strides (the dispatcher
    re-lays out other results). Only what the dispatcher's own fast path would check is checked (each
    numpy attribute read costs ~0.1 us: an 8-tensor list of 16-256 numbers is mostly this loop)."""
    if _DISPATCH.slow:
        return None
    grad = is_grad_enabled()
    if inplace:
        write = ("ufunc" if op.ufunc is not None and not params else
                 "fwd_out" if op.fwd_out is not None and op.elementwise else
                 "out_form" if op.out_form is not None and not params else "copy")
        need = _C_WRITEABLE if write == "fwd_out" else _WRITEABLE
    rows = []
    for i, t in enumerate(tensors):
        x = t._data
        if type(x) is not np.ndarray or (grad and t.requires_grad):
            return None
        dt = x.dtype
        if dt not in _FLOATS or (inplace and (t._base is not None or x.flags.num & need != need)):
            return None
        row = [x]
        laid_out = inplace or x.ndim < 2   # out of place, a tensor operand: the result's layout is checked once
        for o in operands:   # an operand's layout or view-ness changes no value the op computes
            v = o[i]
            if isinstance(v, Tensor):
                y = v._data
                if type(y) is not np.ndarray or (grad and v.requires_grad) or y.dtype is not dt and y.dtype != dt:
                    return None
                if y.shape != x.shape and y.ndim:
                    return None
                if not laid_out:
                    if not x.flags.c_contiguous or (1 in x.shape and not _c_strides(x)):
                        return None
                    laid_out = True
                row.append(y)
            elif type(v) is float or type(v) is int:
                row.append(v)
            else:
                return None
        rows.append(row)
    fwd = op.fwd
    if not inplace:
        out = []
        for row in rows:
            r = fwd(np, *row, **params) if params else fwd(np, row[0]) if len(row) == 1 else fwd(np, *row)
            if type(r) is not np.ndarray:
                if not isinstance(r, np.generic):   # a forward of another kind: dispatch
                    return None
                r = np.asarray(r)   # a reduction's numpy scalar, as the dispatcher wraps it
            x = row[0]
            if r.dtype is not x.dtype and r.dtype != x.dtype:
                return None
            res = _new(Tensor)   # the dispatcher's result, written out (one call less a tensor)
            res._data = r
            res._out_nr = 0
            res._device = CPU
            res._grad = None
            res._vc = [0]
            res.requires_grad = False
            res.grad_fn = None
            out.append(res)
        return tuple(out)
    if write == "ufunc":
        ufunc = getattr(np, op.ufunc)
        for row in rows:
            ufunc(*row, out=row[0], casting="same_kind")
    elif write == "fwd_out":
        fwd_out = op.fwd_out
        if params:
            for row in rows:
                fwd_out(np, *row, out=(row[0],), **params)
        else:
            for row in rows:
                fwd_out(np, *row, out=(row[0],))
    elif write == "out_form":   # declared equal to the forward (capture replays it)
        form = getattr(np, op.out_form)
        for row in rows:
            form(*row, out=row[0])
    else:
        for row in rows:
            row[0][...] = fwd(np, *row, **params)
    for t in tensors:
        t._vc[0] += 1
    return tensors


def _export(name: str, fn) -> None:
    fn.__name__ = fn.__qualname__ = f"_foreach_{name}"
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)


def _unary(name: str) -> None:
    op = REGISTRY[name]

    def out_of_place(self):
        tensors = _tensors(name, self)
        return _loop(op, tensors, (), {}, False) or tuple(getattr(t, name)() for t in tensors)

    def in_place(self):
        tensors = _tensors(name + "_", self)
        if _loop(op, tensors, (), {}, True) is None:
            for t in tensors:
                getattr(t, name + "_")()
        return self
    out_of_place.__doc__ = f"``[t.{name}() for t in self]``, as a tuple."
    in_place.__doc__ = f"``t.{name}_()`` for each tensor of ``self``; returns ``self``."
    _export(name, out_of_place)
    _export(name + "_", in_place)


def _binary(name: str, method: str, number_method: str, inplace_method: str, takes_alpha: bool):
    def each(m, o, alpha):
        return m(o, alpha=alpha) if takes_alpha and alpha != 1 else m(o)

    def arrays(tensors, operands, alpha, inplace):
        """``_loop`` with the op the methods apply: the number form's for numbers, ``alpha`` fused
        (float32 and two tensors, as ``add``'s front end fuses it) or absent."""
        number = isinstance(operands[0], Number)
        if alpha != 1 and (number or type(alpha) not in (int, float) or tensors[0]._data.dtype != np.float32):
            return None
        return _loop(REGISTRY[number_method if number else method], tensors, (operands,),
                     {"alpha": alpha} if alpha != 1 else {}, inplace)

    def out_of_place(self, other, *, alpha=1):
        tensors = _tensors(name, self)
        operands = _operands(name, tensors, other)
        return arrays(tensors, operands, alpha, False) or tuple(
            each(getattr(t, number_method if isinstance(o, Number) else method), o, alpha)
            for t, o in zip(tensors, operands))

    def in_place(self, other, *, alpha=1):
        tensors = _tensors(name + "_", self)
        operands = _operands(name + "_", tensors, other)
        if arrays(tensors, operands, alpha, True) is None:
            for t, o in zip(tensors, operands):
                each(getattr(t, inplace_method + "_"), o, alpha)
        return self
    out_of_place.__doc__ = f"``t.{method}(o)`` for each tensor and its operand (one for all, or a list)."
    in_place.__doc__ = f"``t.{method}_(o)`` for each tensor and its operand; returns ``self``."
    _export(name, out_of_place)
    _export(name + "_", in_place)
    return out_of_place


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
    op = REGISTRY[name]

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

    def arrays(rows, inplace):
        """``_loop`` over the rows of one ``value`` (an optimizer's: one for all)."""
        tensors, ones, twos, values = zip(*rows)
        v = values[0]
        if type(v) not in (int, float) or any(w != v or type(w) is not type(v) for w in values):
            return None
        return _loop(op, list(tensors), (ones, twos), {} if v == 1 else {"value": v}, inplace)

    def out_of_place(self, tensor1, tensor2, value=1, *, scalars=None):
        rows = list(each(name, self, tensor1, tensor2, value, scalars))
        return arrays(rows, False) or tuple(getattr(t, name)(a, b, value=v) for t, a, b, v in rows)

    def in_place(self, tensor1, tensor2, value=1, *, scalars=None):
        rows = list(each(name + "_", self, tensor1, tensor2, value, scalars))
        if arrays(rows, True) is None:
            for t, a, b, v in rows:
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
    ends, weights = _operands("lerp", tensors, tensors1), _operands("lerp", tensors, weight, 3)
    return _loop(REGISTRY["lerp"], tensors, (ends, weights), {}, False) or tuple(
        t.lerp(e, w) for t, e, w in zip(tensors, ends, weights))


def _foreach_lerp_(self, tensors1, weight):
    """``t.lerp_(e, w)`` for each tensor (the model-EMA update); returns ``self``."""
    tensors = _tensors("lerp_", self)
    ends, weights = _operands("lerp_", tensors, tensors1), _operands("lerp_", tensors, weight, 3)
    if _loop(REGISTRY["lerp"], tensors, (ends, weights), {}, True) is None:
        for t, e, w in zip(tensors, ends, weights):
            t.lerp_(e, w)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    """The vector norm of each tensor (``torch.linalg.vector_norm``), as a tuple of 0-d tensors."""
    tensors = _tensors("norm", self)
    if dtype is None and type(ord) in (int, float) and all(t._data.size for t in tensors):
        got = _loop(REGISTRY["norm"], tensors, (), {"ord": float(ord), "dims": None, "keepdim": False}, False)
        if got is not None:
            return got
    return tuple(vector_norm(t, ord, dtype=dtype) for t in tensors)


def _foreach_powsum(self, ord=2, dtype=None):
    """``sum(|t| ** ord)`` of each tensor: outside autograd, for ``0 < ord < inf``, its ord-norm (PyTorch's
    order of sums where it is ``vecnorm``'s) to the power ``ord`` in float64, rounded once (within ulps of
    PyTorch's sum, which is not returned under its root); otherwise the formula."""
    tensors = _tensors("powsum", self)
    if dtype is None and type(ord) in (int, float) and 0 < ord < float("inf"):
        norms = _foreach_norm(tensors, ord)
        if not any(n.requires_grad or type(n._data) is not np.ndarray for n in norms):
            return tuple(Tensor._wrap(np.asarray(np.float64(n._data) ** ord, n._data.dtype), False, None, 0, [0], CPU)
                         for n in norms)
    return tuple((t.abs() ** ord).sum(dtype=dtype) for t in tensors)


def _foreach_max(self):
    """The largest element of each tensor."""
    return tuple(t.max() for t in _tensors("max", self))


def _foreach_clone(self):
    tensors = _tensors("clone", self)
    return _loop(REGISTRY["clone"], tensors, (), {}, False) or tuple(t.clone() for t in tensors)


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
