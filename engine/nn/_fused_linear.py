"""``linear`` as one op: ``x Wᵀ + b`` was a transpose view, a matmul and an add (three dispatches
and three backward nodes); here it is one GEMM over the flattened leading dims with the bias
added into the GEMM's output buffer, declared under PyTorch's name so autocast's ``linear``
policy applies to it.

Plain backward is one fused op: ``g W`` for the input, ``gᵀ x`` over the flattened leading dims
for the weight (one GEMM, in the weight's layout) and ``sum(g)`` for the bias, each only when
that input requires grad (the other slots hold empty arrays). Under ``create_graph`` the vjp is
written in Tensor ops, so double backward stays exact.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import dtype as _dtype
from ..base.grad_mode import is_grad_enabled
from ..base.dispatch_state import STATE as _DISPATCH
from ..core.dispatch import _NO_PARAMS, apply
from ..core.registry import OTHERS, Op
from ..core.tensor import Tensor
from .. import kernels
from ..kernels import gemm, gemm_add, gemms
from ..kernels.gemm import gemm_bias, product_out
from ..ops.reduce import array_sum

__all__ = ["linear", "applies"]

# PyTorch's ScalarType names, as its "must have the same dtype" messages spell them
_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                 "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _rows(a):
    """``a`` as (rows, features): a batch of vectors is one GEMM operand, not a batch of GEMMs."""
    return a if a.ndim == 2 else a.reshape(-1, a.shape[-1])


def _check_dtypes(x, w, b) -> None:
    """PyTorch's refusals, in its order: without a bias, linear is a matmul (``expected m1 and m2``);
    with one it is ``addmm(b, x, w.T)``, which checks the bias (``self``) against the weight first,
    then the input (``mat1``)."""
    # here, after the modes: autocast casts the operands before the forward sees them
    if b is None:
        if x.dtype != w.dtype:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                               f"{_dtype.from_np(x.dtype).cpp_name} != {_dtype.from_np(w.dtype).cpp_name}")
        return
    for name, a in (("self", b), ("mat1", x)):
        if a.dtype != w.dtype:
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got "
                               f"{_SCALAR_NAMES[_dtype.from_np(a.dtype).name]} and "
                               f"{_SCALAR_NAMES[_dtype.from_np(w.dtype).name]}")


def _fwd(xp, x, w, *b):
    if x.dtype is not w.dtype or (b and b[0].dtype is not w.dtype):   # identical dtypes: nothing to check
        _check_dtypes(x, w, b[0] if b else None)
    if x.dtype is _dtype.BFLOAT16_NP:     # numpy has no bfloat16 GEMM: float32, rounded once
        return _dtype.in_float32(_fwd, xp, x, w, *b)
    if b and x.dtype == xp.float16:       # ATen's addmm adds the bias to the float32 accumulator: one rounding
        return _fwd(xp, x.astype(xp.float32), w.astype(xp.float32), b[0].astype(xp.float32)).astype(x.dtype)
    if x.ndim < 2:
        out = gemm(xp, w, x)
        if b:
            out += b[0]
        return out
    rows = _rows(x)
    if b:   # ATen's addmm: the bias broadcast into the output, then added inside the GEMM where MKL runs it
        out = _bias_gemm(xp, rows, w.T, b[0])
        if out is not None:
            return out.reshape(x.shape[:-1] + w.shape[:1]) if x.ndim > 2 else out
        out = product_out(xp, rows, w.T, (rows.shape[0], w.shape[0]))
        _fill_bias(xp, out, b[0])
        gemm_add(xp, rows, w.T, out)
    else:
        out = gemm(xp, rows, w.T)
    return out.reshape(x.shape[:-1] + w.shape[:1]) if x.ndim > 2 else out


def _bias_gemm(xp, rows, wt, bias):
    """The fill and the GEMM as one compiled call (``gemm_bias``) where the fill would split as
    ``_fill_bias`` splits it (on numba's threads, or not at all); else None. Without the dispatch and checks
    between the two steps 1024 x 128 -> 128 took 115-125 us against 129-134 at two threads, 194-200 against
    207-212 at one (bench/README.md, issue 17, session 30)."""
    parts = kernels.split_count(rows.shape[0] * wt.shape[1])
    if parts > 1 and not kernels.native():
        return None
    return gemm_bias(xp, rows, wt, bias, parts)


def _fill_bias(xp, out, bias) -> None:
    """``out[...] = bias`` (each row), as ATen's addmm expands its bias into the output: over the
    intra-op threads with the loops (1024 x 128 at two threads: a 512 KiB copy on one thread was 30 of
    the forward's 138 us, torch's 108)."""
    if kernels.use(xp, out, bias) and bias.ndim == 1:     # (``out`` is (rows, O) in both callers)
        kernels.parallel(kernels.loops("pointwise").fill_rows, 1, out, bias)
    else:
        out[...] = bias


def _fwd_out(xp, x, w, *b, out):
    """The forward written into ``out[0]`` (a captured replay's buffer): the same GEMM blocks as
    ``_fwd``, so the same floats, with no result to copy over."""
    (res,) = out
    if x.dtype is _dtype.BFLOAT16_NP or x.ndim < 2 or (b and x.dtype == xp.float16):
        res[...] = _fwd(xp, x, w, *b)
        return
    _check_dtypes(x, w, b[0] if b else None)
    rows = res.reshape(-1, w.shape[0])
    if b:
        _fill_bias(xp, rows, b[0])
        gemm_add(xp, _rows(x), w.T, rows)
    else:
        gemm(xp, _rows(x), w.T, out=rows)


def _bwd_fwd(xp, g, x, w, *, needs):
    """``(g W, gᵀ x, sum g)`` as arrays; an input that needs no gradient gets an empty array."""
    if g.dtype is _dtype.BFLOAT16_NP:
        return _dtype.in_float32(_bwd_fwd, xp, g, x, w, needs=needs)
    empty = xp.empty((0,), g.dtype)
    g2, x2 = (g, x) if g.ndim > 1 else (g[None], x[None])
    g2, x2 = _rows(g2), _rows(x2)
    if needs[0] and needs[1]:
        gx, gw = gemms(xp, (g2, w), (g2.T, x2))
        gx = gx.reshape(x.shape)
    else:
        gx = gemm(xp, g2, w).reshape(x.shape) if needs[0] else empty
        gw = gemm(xp, g2.T, x2) if needs[1] else empty
    gb = array_sum(xp, g2, (0,)) if needs[2] else empty  # ATen's column order: torch's bias gradient
    return gx, gw, gb


def _vjp(g, out, x, w, *b):
    needs = (x.requires_grad, w.requires_grad, bool(b) and b[0].requires_grad)
    if not is_grad_enabled():
        gx, gw, gb = apply(_bwd, g, x, w, needs=needs)
    else:                                 # create_graph: Tensor ops, differentiable again
        g2 = g.reshape(-1, g.shape[-1]) if g.ndim != 2 else g
        x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
        gx = g.matmul(w) if needs[0] else None
        gw = g2.mT.matmul(x2) if needs[1] else None
        gb = g2.sum(0) if needs[2] else None
    grads = (gx if needs[0] else None, gw if needs[1] else None)
    return grads + ((gb if needs[2] else None,) if b else ())


def _array_vjp(g, out, inputs, params):
    """``_vjp``'s plain backward on arrays (the walk's ``_run_arrays``): ``_bwd_fwd``'s own arrays, without
    the ``linear_backward`` dispatch and its three tensors; None where an operand is not a numpy array."""
    x, w = inputs[0], inputs[1]
    if not (isinstance(x, Tensor) and isinstance(w, Tensor) and type(x._data) is np.ndarray
            and type(w._data) is np.ndarray):
        return None
    b = inputs[2:]
    needs = (x.requires_grad, w.requires_grad, bool(b) and b[0].requires_grad)
    gx, gw, gb = _bwd_fwd(np, g, x._data, w._data, needs=needs)
    grads = (gx if needs[0] else None, gw if needs[1] else None)
    return grads + ((gb if needs[2] else None,) if b else ())


def _onnx_linear(g, x, w, *b):
    """``Gemm`` with the weight transposed in place (``transB``) for a matrix input, else ``MatMul``
    by the transposed weight and ``Add``."""
    if g.rank(x) == 2:
        return g.op("Gemm", x, w, *b, transB=1)
    out = g.op("MatMul", x, g.op("Transpose", w, perm=[1, 0]))
    return g.op("Add", out, b[0]) if b else out


def _cost(shapes, out) -> int:
    """One GEMM, 2 FLOPs per multiply-add (the bias add is not counted, as PyTorch's addmm)."""
    return 2 * math.prod(out) * shapes[0][-1]


def _backward_name(ndims: tuple, params: dict) -> str:
    """PyTorch's node for ``linear``: ``addmm``/``mm`` on a matrix; on a vector or a batch of matrices
    the view (or ``_unsafe_view``, without bias) of the folded product. A freed node reads as a matrix's."""
    x, bias = ndims[0], len(ndims) == 3
    if x is None or x == 2:
        return "AddmmBackward0" if bias else "MmBackward0"
    if x == 1:
        return "ViewBackward0" if bias else "SqueezeBackward4"
    return "ViewBackward0" if bias else "UnsafeViewBackward0"


def _aten(shapes, params) -> str:
    """PyTorch's calls for ``linear``: ``addmm`` of a matrix and a bias, else a ``matmul`` (a batch folded
    to a matrix by views)."""
    x, bias = len(shapes[0]), len(shapes) == 3
    if x == 2:
        return "linear(t, addmm)" if bias else "linear(t, matmul(mm))"
    if x > 2:
        return "linear(view, t, addmm, view)" if bias else "linear(t, matmul(view, mm, _unsafe_view))"
    return "linear(t, matmul(mv), add_)" if bias else "linear(t, matmul(mv))"


_linear = Op("linear", _fwd, _vjp, saves=OTHERS, cost=_cost, onnx=_onnx_linear, fwd_out=_fwd_out,
             backward_name=_backward_name, aten=_aten, array_vjp=_array_vjp)
_bwd = Op("linear_backward", _bwd_fwd, None, n_extra=2,
           aten="t, mm*, t, mm, sum")   # its result, the input's gradient, is the first mm's


def applies(input: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Whether the fused op covers these operands: a matrix weight, an input of at least one dim
    whose last size is the weight's, and a bias of the weight's rows (or none). The rest (a
    vector weight, a broadcast bias, the mismatches PyTorch reports) keep the composite."""
    try:
        w, x = weight._data, input._data   # the arrays' shapes: no Size built on a call per layer
    except AttributeError:                 # an array-like operand: as it is
        w, x = weight, input
    if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[1]:
        return False
    return bias is None or tuple(getattr(bias, "_data", bias).shape) == (w.shape[0],)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input Wᵀ + b`` as one op (callers check ``applies`` first). While nobody watches, the op's
    compiled path is called here, as ``dispatch.unary`` calls it (no ``apply`` frame packing the
    arguments and a new params dict: a recurrent cell's step makes a Linear call per gate)."""
    args = (input, weight) if bias is None else (input, weight, bias)
    fast = _linear.fast
    if fast and not _DISPATCH.slow:
        return fast(args, _NO_PARAMS)
    return apply(_linear, *args)
