"""An elementwise op's forward as a scalar expression, read from the op's own declaration.

An op's forward is ``fwd(xp, *arrays, **params)``. Called with numpy as ``xp`` and ``Sym``
placeholders as arrays, every ufunc it reaches (``xp.exp``, ``a * b``, ``scipy.special.erf``)
comes back through numpy's ``__array_ufunc__`` protocol and ``xp.where`` through
``__array_function__``: the result is a DAG of numpy ufunc names, so the compiler needs no
table of op names, only what each ufunc computes (``codegen``). Anything else a forward does
(a reduction, a reshape, a scipy call that is not a ufunc) raises ``NotElementwise``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Sym", "NotElementwise", "trace_op", "input_sym", "const_sym"]


class NotElementwise(Exception):
    """The forward did something a scalar loop cannot: the op stays an eager op."""


class Sym:
    """One scalar value of the loop body: ``kind`` is a ufunc name, ``"input"``, ``"const"``,
    ``"where"`` or ``"cast"``; ``dtype`` follows numpy's promotion of the same call."""

    __slots__ = ("kind", "args", "dtype", "value", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, kind: str, args: tuple, dtype: np.dtype, value=None):
        self.kind, self.args, self.dtype, self.value = kind, args, np.dtype(dtype), value

    def __repr__(self) -> str:
        if self.kind == "input":
            return f"in{self.value}"
        if self.kind == "const":
            return repr(self.value)
        return f"{self.kind}({', '.join(map(repr, self.args))})"

    # numpy protocols: every ufunc and ``where`` on a Sym records a node
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs or ufunc.nout != 1:
            raise NotElementwise(f"{ufunc.__name__}.{method}")
        return _ufunc(ufunc, inputs)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.where and len(args) == 3 and not kwargs:
            c, a, b = (_lift(x) for x in args)
            dt = np.result_type(_probe(a), _probe(b))
            return Sym("where", (_cast(c, np.bool_), _cast(a, dt), _cast(b, dt)), dt)
        raise NotElementwise(getattr(func, "__name__", str(func)))

    def astype(self, dtype, copy=True):
        return _cast(self, np.dtype(dtype))

    @property
    def shape(self):
        raise NotElementwise("shape")

    @property
    def size(self):
        """Truthy and nothing else: relu's forward guards its loop with ``a.size and kernels.use(...)``
        (the loop refuses a Sym, so its formula is traced); arithmetic on a size is not elementwise."""
        return _NONEMPTY

    def __getattr__(self, name):
        raise NotElementwise(name)

    def __bool__(self):
        raise NotElementwise("bool() of a value")


class _NonEmpty:
    """A Sym's ``size``: true, with no arithmetic (a TypeError, which ``trace_op`` reports as not elementwise)."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True


_NONEMPTY = _NonEmpty()


def _binary(name: str, swap: bool = False):
    uf = getattr(np, name)
    if swap:
        return lambda self, other: _ufunc(uf, (other, self))
    return lambda self, other: _ufunc(uf, (self, other))


for _dunder, _name in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "true_divide"),
                       ("pow", "power"), ("floordiv", "floor_divide"), ("mod", "remainder"), ("and", "logical_and"),
                       ("or", "logical_or"), ("xor", "logical_xor")):
    setattr(Sym, f"__{_dunder}__", _binary(_name))
    setattr(Sym, f"__r{_dunder}__", _binary(_name, swap=True))
for _dunder, _name in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal"),
                       ("eq", "equal"), ("ne", "not_equal")):
    setattr(Sym, f"__{_dunder}__", _binary(_name))
Sym.__neg__ = lambda self: _ufunc(np.negative, (self,))
Sym.__abs__ = lambda self: _ufunc(np.absolute, (self,))
Sym.__invert__ = lambda self: _ufunc(np.logical_not if self.dtype == np.bool_ else np.invert, (self,))
Sym.__hash__ = object.__hash__


def _probe(x):
    """A zero of ``x``'s dtype (a Python number stays itself: numpy's weak scalars)."""
    return np.zeros((), x.dtype) if isinstance(x, Sym) else x


def _lift(x) -> Sym:
    if isinstance(x, Sym):
        return x
    if isinstance(x, (bool, int, float, np.generic)) and not isinstance(x, complex):
        return const_sym(x)
    raise NotElementwise(type(x).__name__)


# ufuncs a forward may call that the backends write as their formula (SciPy's ``expit``: sigmoid's
# one-loop forward; exp(-x) overflowing to inf gives exactly 0, as expit does)
_EXPAND = {"expit": lambda x: 1 / (1 + np.exp(-x))}


# SciPy ufuncs the backends write (numba's math.erf, the numpy chain's special.erf, CUDA's erff); any
# other ufunc outside numpy's namespace (special.erfinv) is no kernel statement: its op runs unfused
_SPECIAL = frozenset({"erf", "erfc"})


def _ufunc(uf, inputs) -> Sym:
    """Record ``uf(*inputs)``, its dtype found by running the ufunc on zeros of the same dtypes."""
    if uf.__name__ in _EXPAND and len(inputs) == 1 and isinstance(inputs[0], Sym):
        return _EXPAND[uf.__name__](inputs[0])
    if getattr(np, uf.__name__, None) is not uf and uf.__name__ not in _SPECIAL:
        raise NotElementwise(f"{uf.__name__}: a ufunc outside numpy's namespace")
    probes = [_probe(x) for x in inputs]
    for x in inputs:
        if not isinstance(x, (Sym, bool, int, float, np.generic)):
            raise NotElementwise(type(x).__name__)
    with np.errstate(all="ignore"):
        dt = np.asarray(uf(*probes)).dtype
    # operands are cast to the loop's type first, as numpy's ufunc loop casts them
    loop = dt if uf.__name__ not in _MIXED else None
    args = tuple(_cast(_lift(x), loop) if loop is not None and (not isinstance(x, Sym) or x.dtype != np.bool_
                                                                  or dt == np.bool_)
                 else _lift(x) for x in inputs)
    return Sym(uf.__name__, args, dt)


# comparisons and logical ops compute in their operands' type, not their (bool) result's
_MIXED = {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "logical_and",
          "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite", "signbit"}


def _cast(x: Sym, dtype) -> Sym:
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.kind == "const":
        return const_sym(dtype.type(x.value))
    return Sym("cast", (x,), dtype)


def input_sym(index: int, dtype) -> Sym:
    return Sym("input", (), dtype, index)


def const_sym(value) -> Sym:
    if isinstance(value, np.generic):
        return Sym("const", (), value.dtype, value.item())
    dt = np.bool_ if isinstance(value, bool) else (np.int64 if isinstance(value, int) else np.float64)
    return Sym("const", (), dt, value)


def trace_op(op, args: tuple, params: dict) -> Sym:
    """``op``'s forward on ``args`` (Syms and Python numbers) as a Sym, or ``NotElementwise``."""
    try:
        out = op.fwd(np, *args, **params)
    except NotElementwise:
        raise
    except Exception as e:  # noqa: BLE001 - any other failure means "not a scalar map"
        raise NotElementwise(f"{op.name}: {type(e).__name__}: {e}") from None
    if isinstance(out, (bool, int, float)):
        out = const_sym(out)
    if not isinstance(out, Sym):
        raise NotElementwise(f"{op.name} returned {type(out).__name__}")
    return out
