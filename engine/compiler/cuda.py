"""The cuda backend: a kernel description becomes one ``cupy.ElementwiseKernel``.

cupy's elementwise kernels broadcast their inputs themselves, so the generated CUDA C is the
scalar DAG alone: one typed statement per node, CUDA's float32 math (``expf``, ``tanhf``,
``erff``) for float32. ``source`` is plain text (tested without a GPU); ``load`` builds the
kernel with cupy when a cuda device is present.
"""
from __future__ import annotations

import numpy as np

from .kernel import Kernel
from .symbolic import Sym

__all__ = ["source", "params", "load", "supported"]

_CTYPE = {"float32": "float", "float64": "double", "float16": "float16", "bool": "bool", "int64": "long long",
          "int32": "int", "int16": "short", "int8": "signed char", "uint8": "unsigned char"}
_INFIX = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "less": "<", "less_equal": "<=",
          "greater": ">", "greater_equal": ">=", "equal": "==", "not_equal": "!=", "logical_and": "&&",
          "logical_or": "||", "remainder": "%"}
_MATH = {"exp": "exp", "log": "log", "tanh": "tanh", "erf": "erf", "erfc": "erfc", "sqrt": "sqrt", "sin": "sin",
         "cos": "cos", "tan": "tan", "log1p": "log1p", "expm1": "expm1", "log2": "log2", "exp2": "exp2",
         "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint", "absolute": "fabs", "power": "pow",
         "arctan": "atan", "arcsin": "asin", "arccos": "acos", "sinh": "sinh", "cosh": "cosh",
         "arctan2": "atan2", "hypot": "hypot", "log10": "log10", "fmod": "fmod", "copysign": "copysign",
         "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "fmax": "fmax", "fmin": "fmin"}
# float ufuncs written as their formulas, ``{0}``, ``{1}`` the operands and ``{f}`` the float32 suffix:
# logaddexp as numpy's npy_logaddexp (equal operands, two infinities among them, give x + log 2)
_FORMULA = {"logaddexp": ("(({0}) == ({1}) ? ({0}) + log{f}(2.0{f}) "
                          ": fmax{f}({0}, {1}) + log1p{f}(exp{f}(-fabs{f}(({0}) - ({1})))))"),
            "isnan": "isnan({0})", "isinf": "isinf({0})", "isfinite": "isfinite({0})", "signbit": "signbit({0})"}


def _ctype(dt) -> str:
    return _CTYPE[np.dtype(dt).name]


def _const(s: Sym) -> str:
    if s.dtype == np.bool_:
        return "true" if s.value else "false"
    if s.dtype == np.float32:
        return f"{float(s.value)!r}f".replace("inff", "INFINITY").replace("nanf", "NAN")
    if s.dtype.kind == "f":
        return repr(float(s.value)).replace("inf", "INFINITY").replace("nan", "NAN")
    return f"({_ctype(s.dtype)}){int(s.value)}"


def _expr(s: Sym, a: list) -> str:
    k, dt = s.kind, s.dtype
    if k == "cast":
        return f"({_ctype(dt)})({a[0]})"
    if k == "where":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if k == "negative":
        return f"(-{a[0]})"
    if k == "logical_not":
        return f"(!{a[0]})"
    if k in _INFIX:
        return f"({a[0]} {_INFIX[k]} {a[1]})"
    if k in ("maximum", "minimum"):      # numpy's: nan if either is nan
        cmp = ">" if k == "maximum" else "<"
        return f"(({a[0]} {cmp} {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})"
    if k in _MATH:
        fn = _MATH[k] + ("f" if dt == np.float32 else "")
        return f"{fn}({', '.join(a)})"
    if k == "logical_xor":
        return f"(!{a[0]} != !{a[1]})"
    if k in _FORMULA and s.args[0].dtype.kind == "f":
        return _FORMULA[k].format(*a, f="f" if s.args[0].dtype == np.float32 else "")
    raise NotImplementedError(f"tapelab.compile cuda backend: no CUDA form for the ufunc {k!r}")


def supported(kernel: Kernel) -> bool:
    """Whether every scalar op of ``kernel`` has a CUDA form (numpy's other ufuncs fuse on the cpu
    only; on cuda such a group runs op by op)."""
    try:
        source(kernel)
    except (NotImplementedError, KeyError):      # KeyError: a dtype CUDA C has no name for here
        return False
    return True


def params(kernel: Kernel) -> tuple:
    """``(in_params, out_params)`` as cupy's ElementwiseKernel takes them: numpy's type names there
    (cupy reads ``float`` as numpy's ``float``, float64, and refuses a float32 array for it); the body
    declares its temporaries in C types."""
    ins = ", ".join(f"{np.dtype(dt).name} a{i}" for i, (dt, _) in enumerate(kernel.inputs))
    outs = ", ".join(f"{np.dtype(o.dtype).name} o{j}" for j, o in enumerate(kernel.outputs))
    return ins, outs


def source(kernel: Kernel) -> str:
    """The loop body in CUDA C: ``i``-th element of every input to every output."""
    order, outs = kernel.lines()
    names = {id(s): f"t{i}" for i, s in enumerate(order)}

    def ref(s: Sym) -> str:
        if s.kind == "input":
            return f"a{s.value}"
        if s.kind == "const":
            return _const(s)
        return names[id(s)]
    lines = [f"{_ctype(s.dtype)} {names[id(s)]} = {_expr(s, [ref(x) for x in s.args])};" for s in order]
    lines += [f"o{j} = {ref(o)};" for j, o in enumerate(outs)]
    return "\n".join(lines)


def load(kernel: Kernel):
    """A callable ``run(*cupy_arrays) -> tuple`` (cupy compiles on first call, and caches on disk)."""
    import cupy
    ins, outs = params(kernel)
    name = "tapelab_" + kernel.digest
    k = cupy.ElementwiseKernel(ins, outs, source(kernel), name)
    dtypes = [o.dtype for o in kernel.outputs]

    def run(*arrays):
        shape = np.broadcast_shapes(*(a.shape for a in arrays))   # sizes are arguments (dynamic dims)
        res = [cupy.empty(shape, dt) for dt in dtypes]
        k(*arrays, *res)
        if kernel.reduce:                # a trailing sum or mean: cupy's reduction of the last output's values
            return (*res[:-1], getattr(res[-1], kernel.reduce)(dtype=cupy.float64).astype(dtypes[-1]))
        return tuple(res)
    return run
