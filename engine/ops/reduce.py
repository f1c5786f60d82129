"""Reductions over dimensions: sums, products, extrema, statistics, norms, scans, logical tests.

Ops that pick one element per slice (``max(dim)``, and ``sort``/``topk``/``median`` in
sort.py) are written in two steps: a non-differentiable op finds the indices, then a
named gather op (``picker``) reads the values. The indices are an input of the recorded
node, so the vjp scatters the gradient back without recomputing them.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import kernels, return_types
from ..base.dispatch_state import STATE as _DISPATCH
from ..base.grad_mode import STATE as GRAD
from ..core.creation import eye
from ..base import backend as _backend
from ..base.coo import COOArray, unsupported
from ..core.dispatch import apply
from ..core.arguments import refuse_non_tensors
from ..core.overrides import handle_torch_function, has_tensor_like
from ..core.registry import NONE, OTHERS, Op, kernel_refusal
from ._util import Tensor, along_key, dim_or_axis, norm_dims, numpy_names
from ._array_vjp import operand
from ..base import dtype as _dtype
from ..base.dtype import BFLOAT16_NP, FLOATING_KINDS, INEXACT_KINDS, in_float32
from .conjugation import conj as cj
from .movement import _expand, _mark

__all__ = ["sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std",
           "var_mean", "std_mean", "logsumexp", "norm", "cumsum", "cumprod", "all", "any",
           "count_nonzero"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_count_nonzero(g, x, *, dims):
    return g.reduce("ReduceSum", g.cast(g.cast(x, "bool"), "int64"), dims, False)


def _onnx_prod(g, x, *, dim, keepdim, dtype):
    return _onnx_reduce("ReduceProd")(g, x, dims=None if dim is None else (dim,), keepdim=keepdim)


def _onnx_cumsum(g, x, *, dim, reverse, dtype):
    return g.op("CumSum", g.cast(x, g.output_dtype), g.const(dim, "int64"), reverse=int(reverse))


def _onnx_reduce(op_type: str):
    """``ReduceSum``-style lowering; the input is cast to the result's dtype first (a bool sum is int64)."""
    return lambda g, x, *, dims, keepdim, dtype=None: g.reduce(op_type, g.cast(x, g.output_dtype), dims, keepdim)


def _onnx_arg(op_type: str):
    def lower(g, x, *, dim, keepdim):
        if dim is not None:
            return g.op(op_type, x, axis=dim, keepdims=int(keepdim))
        out = g.op(op_type, g.op("Reshape", x, g.const([-1], "int64")), axis=0, keepdims=0)
        return g.op("Reshape", out, g.ints([1] * g.rank(x))) if keepdim else out
    return lower


def _onnx_take(g, x, idx, *, dim, keepdim):
    out = g.op("GatherElements", x, idx, axis=dim)
    return out if keepdim else g.op("Squeeze", out, g.const([dim], "int64"))


def _onnx_var(g, x, *, dims, keepdim, correction):
    d = g.op("Sub", x, g.reduce("ReduceMean", x, dims, True))
    v = g.reduce("ReduceMean", g.op("Mul", d, d), dims, keepdim)
    n = g.numel([s for i, s in enumerate(g.shape(x)) if dims is None or i in dims])
    return v if not correction else g.op("Mul", v, n / (n - correction) if n > correction else float("inf"))


def _onnx_norm(g, x, *, ord, dims, keepdim):
    fixed = {2: "ReduceL2", 1: "ReduceL1"}
    if ord in fixed:
        return g.reduce(fixed[ord], x, dims, keepdim)
    a = g.op("Abs", x)
    if ord in (_INF, -_INF):
        return g.reduce("ReduceMax" if ord > 0 else "ReduceMin", a, dims, keepdim)
    if ord == 0:
        return g.reduce("ReduceSum", g.cast(g.op("Not", g.op("Equal", a, 0.0)), g.dtype(x)), dims, keepdim)
    return g.op("Pow", g.reduce("ReduceSum", g.op("Pow", a, float(ord)), dims, keepdim), 1.0 / ord)


def _onnx_all_any(op_type: str):
    return lambda g, x, *, dims, keepdim: g.cast(
        g.reduce(op_type, g.cast(g.cast(x, "bool"), "int32"), dims, keepdim), g.output_dtype)


_INF = float("inf")


_max_t, _min_t = return_types.max, return_types.min


def _dims(input: Tensor, dim, op: str):
    """Canonical dims: None for all (also for 0-d inputs), else a sorted tuple of axes."""
    if dim is None or dim == () or dim == []:
        return None
    dims = norm_dims(dim, input.ndim, op)
    return dims if input.ndim else None


def _keep_shape(shape: tuple, dims) -> tuple:
    return tuple(1 if dims is None or i in dims else s for i, s in enumerate(shape))


def _expand_back(g: Tensor, x: Tensor, dims, keepdim: bool) -> Tensor:
    """Broadcast a reduced gradient back over the reduced dims of ``x``."""
    shape = x._data.shape
    if not keepdim and (dims is not None or g._data.ndim):
        g = g.reshape(_keep_shape(shape, dims))
    if g._data.shape == shape:
        return g
    # g has x's shape with the reduced dims 1, always expandable: the op itself, without
    # expand()'s size checks (the most expensive backward node of a short chain had them)
    out = apply(_expand, g, shape=shape, fill=True)   # a one-element gradient may be a filled copy
    return out if out._data.base is None else _mark(out, g)


def _count(shape, dims) -> int:
    n = 1
    for i, s in enumerate(shape):
        if dims is None or i in dims:
            n *= s
    return n


def _nonempty(input: Tensor, dims, op: str) -> None:
    """max/min/argmax have no identity: every reduced dim must be non-empty (IndexError as torch)."""
    try:
        shape = input._data.shape
    except AttributeError:
        refuse_non_tensors(op, input)
        raise
    if dims is None and input._data.size == 0:
        kind = IndexError if op.startswith("arg") else RuntimeError
        raise kind(f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
                   f"Specify the reduction dim with the 'dim' argument. (input shape {list(shape)})")
    for d in dims or ():
        if shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size "
                             f"(input shape {list(shape)}).")


# ---------------------------------------------------------------- gather / scatter along a dim
def _take_fwd(xp, x, idx, *, dim, keepdim):
    if x.ndim == 0:
        return x.copy()
    if x.ndim == 1:
        v = x[idx]   # a plain take (~1 us, not ~6)
    else:   # on numpy fancy indexing with cached grids: 1.7 us against take_along_axis's 3.9 (64x10)
        v = x[along_key(xp, idx, dim)] if xp is np else xp.take_along_axis(x, idx, axis=dim)
    return v if keepdim else v.squeeze(dim)


def _take_vjp(g, out, x, idx, *, dim, keepdim):
    if not keepdim and x.ndim:
        g = g.unsqueeze(dim)
    return apply(_put_along, g, idx, dim=dim, shape=x._data.shape), None


def _put_fwd(xp, g, idx, *, dim, shape):
    if not shape:
        return g.copy()
    out = xp.zeros(shape, g.dtype)
    xp.put_along_axis(out, idx, g, axis=dim)
    return out


def picker(name: str, **meta) -> Op:
    """A gather along ``dim`` at indices that are unique per slice, under an op's own name."""
    return Op(name, _take_fwd, _take_vjp, saves=OTHERS, **meta)


take_along = picker("take_along", onnx=_onnx_take)
# the adjoint of take_along: writes g at idx into zeros (indices are unique per slice)
_put_along = Op("put_along", _put_fwd,
                lambda gg, out, g, idx, *, dim, shape: (apply(take_along, gg, idx, dim=dim, keepdim=True),
                                                        None),
                saves=OTHERS)


def pick(op: Op, input: Tensor, idx: Tensor, dim: int, keepdim: bool):
    """Values of ``input`` at ``idx`` (kept dims) along ``dim`` through ``op``, plus the indices."""
    values = apply(op, input, idx, dim=dim, keepdim=keepdim)
    return values, (idx if keepdim or not input.ndim else idx.squeeze(dim))


# ---------------------------------------------------------------- sum, mean, prod
_add_reduce = np.add.reduce
_empty = np.empty
_asarray = np.asarray
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))   # equal dtypes need not be these objects


def _sum_in_order(xp, x, dims, keepdim: bool, dtype):
    """The sum over all (of a contiguous or densely permuted array), the trailing or the leading dims
    of a contiguous cpu float32/float64 array in ATen's order (``kernels/sum_order.py``: a printed
    loss, metric or bias gradient rounds as PyTorch's), or None where numpy's sum is used (other dtypes, layouts and dims, empty arrays, cupy)."""
    if type(x) is not np.ndarray or x.dtype not in _FLOATS or not x.size or (
            dtype is not None and dtype != x.dtype) or not kernels.enabled():
        return None
    contiguous = x.flags.c_contiguous
    if dims is None and contiguous:   # a loss's or a metric's sum of everything: the short way (~1 us less)
        loops = kernels.loops("sum_order")    # below ATen's grain the thread count changes nothing: not read
        if x.ndim == 1 and x.dtype not in _TOTALS and x.flags.carray:   # (then _sum_fwd's short way)
            _TOTALS[x.dtype] = kernels.entry(loops.total, x, 1), loops.GRAIN
        total = loops.total(x if x.ndim == 1 else x.reshape(-1), kernels.threads() if x.size >= loops.GRAIN else 1)
        # numba hands the float32 back as a Python float (exact); the result owns its memory
        return np.full((1,) * x.ndim, total, x.dtype) if keepdim else np.asarray(total, x.dtype)
    if not contiguous:
        # a sum of all elements of a dense permuted layout (``x.t()``, ``rot90``'s transposed copy)
        # runs over memory in ATen, whose TensorIterator sorts the dims by stride and merges them
        # into one: sum the same elements in that order
        if dims is not None and len(dims) != x.ndim:
            return None
        x = _in_memory_order(x)
        if x is None:
            return None
    k = 0 if dims is None else len(dims)
    leading = dims == tuple(range(k))
    if dims is not None and not leading and dims != tuple(range(x.ndim - k, x.ndim)):
        return None
    loops = kernels.loops("sum_order")
    flat = x.reshape(-1)
    # the result owns its memory (no view of a kernel's array: graphs and views read ``.base``)
    out = _empty(_keep_shape(x.shape, dims) if keepdim
                 else () if dims is None else x.shape[k:] if leading else x.shape[:x.ndim - k], x.dtype)
    if out.size == 1:  # one sum: PyTorch cuts it into one chunk per thread
        out[()] = loops.total(flat, kernels.threads())
    elif leading:
        loops.column_sums(flat, out.size, kernels.threads(), out.reshape(-1))
    else:
        loops.row_sums(flat, x.size // out.size, out.reshape(-1))
    return out


def _in_memory_order(x: np.ndarray) -> np.ndarray | None:
    """``x``'s dims permuted into the order of its memory (a C-contiguous view), or None when its
    elements are not one dense block laid out forward (gaps, overlaps, negative strides)."""
    strides = x.strides
    for s in strides:    # (this module's any/min are the ops)
        if s < 0:
            return None
    y = x.transpose(sorted(range(x.ndim), key=lambda d: -strides[d]))
    return y if y.flags.c_contiguous else None


# float32/float64 -> (sum_order.total's compiled code for a 1-D aligned array of it (kernels.entry), ATen's grain),
# made at the first such sum: a loss's sum of a vector then calls the loop without numba's dispatcher or
# _sum_in_order's tests (``_sum_fwd`` 0.79 -> 0.61 us, ``e.sum()`` 2.16 -> 1.90 on 16 floats)
_TOTALS: dict = {}


def _small_total(x):
    """The sum of all of a 1-D float32/float64 array below ATen's grain, C-contiguous and aligned, as
    ``_sum_in_order`` makes it, by its loop's compiled code (a Python float: exact); None for any other."""
    found = _TOTALS.get(x.dtype)
    if found is not None and 0 < x.shape[0] < found[1] and x.flags.carray and kernels.enabled():
        return found[0](x, 1)
    return None


def _sum_fwd(xp, x, *, dims, keepdim, dtype):
    if dims is None and type(x) is np.ndarray and x.ndim == 1 and dtype is None:
        total = _small_total(x)
        if total is not None:
            return np.full(1, total, x.dtype) if keepdim else _asarray(total, x.dtype)
    if x.dtype is BFLOAT16_NP:
        return in_float32(_sum_fwd, xp, x, dims=dims, keepdim=keepdim, dtype=dtype)
    ordered = _sum_in_order(xp, x, dims, keepdim, dtype)
    if ordered is not None:
        return ordered
    if dtype is None and x.ndim >= 3 and dims == _BIAS_DIMS.get(x.ndim) and x.size and kernels.use(xp, x):
        return _channel_sums(x, keepdim)
    if type(x) is np.ndarray:  # the ufunc's reduce without ndarray.sum's Python wrapper (numpy/_core/_methods);
        # other arrays (sparse COO data, the simulated device's) keep their own sum
        if dims is None and not keepdim:  # into a 0-d array: no numpy scalar for the dispatcher to wrap
            return _add_reduce(x, None, dtype, _empty((), x.dtype if dtype is None else dtype), False)
        return _add_reduce(x, dims, dtype, None, keepdim)
    return x.sum(axis=dims, keepdims=keepdim, dtype=dtype)


# the dims of a per-channel sum (a convolution bias's gradient) by rank: all but dim 1
_BIAS_DIMS = {n: (0,) + tuple(range(2, n)) for n in range(3, 9)}


def _channel_sums(x: np.ndarray, keepdim: bool) -> np.ndarray:
    """numpy's ``add.reduce`` over all dims but 1 of a C-contiguous float32 array, the same floats, with
    the eight partial sums as one vector and the channels over the threads (``kernels/pairwise.py``)."""
    rows = x.reshape(x.shape[0], x.shape[1], -1)
    # the result owns its memory (as ``_sum_in_order``'s: graphs and views read ``.base``)
    out = _empty(_keep_shape(x.shape, _BIAS_DIMS[x.ndim]) if keepdim else x.shape[1], x.dtype)
    flat = out.reshape(-1)
    kernels.parallel_ranges(kernels.loops("pairwise").channel_sums, x.shape[1], x.size,
                            lambda first, lo, hi: (rows, flat, lo, hi), shared=True)
    return out


def _sum_vjp(g, out, x, *, dims, keepdim, dtype):
    g = _expand_back(g, x, dims, keepdim)
    return (g if g._data.dtype is x._data.dtype else g.to(x.dtype),)


def _spread(g, inputs: tuple, params: dict):
    """A whole reduction's 0-d gradient spread over its input as ``_expand_back`` spreads it, on arrays,
    where that makes a new array of the input's dtype: ``g`` itself for a 0-d input, else the filled copy
    ``movement._expand_fwd`` makes of one element for at most 4096 (a one-element or larger input gets a
    view of ``g`` there, with its ``_base``); None for the rest (the reductions' array vjps decline)."""
    x = inputs[0]
    if params["dims"] is not None or params["keepdim"] or g.ndim or not isinstance(x, Tensor):
        return None
    d = x._data
    if type(d) is not np.ndarray or d.dtype is not g.dtype:
        return None
    shape = d.shape
    if not shape:
        return g
    n = math.prod(shape)
    if n == 1 or n > 4096:
        return None
    grad = np.empty(shape, g.dtype)
    grad[...] = g
    return grad


def _sum_array_vjp(g, out, inputs, params):
    grad = _spread(g, inputs, params)
    return None if grad is None else (grad,)


_sum = Op("sum", _sum_fwd, _sum_vjp, saves=NONE, contiguous=True, onnx=_onnx_reduce("ReduceSum"),
          array_vjp=_sum_array_vjp)


def array_sum(xp, a, dims: tuple | None):
    """The sum of the array ``a`` over ``dims`` (sorted axes, or None for all) as the ``sum`` op rounds
    it, for callers that work on arrays (``linear``'s fused backward sums its bias gradient)."""
    return _sum_fwd(xp, a, dims=dims, keepdim=False, dtype=None)


def array_mean(xp, a, dims: tuple | None):
    """The mean of the array ``a`` as the ``mean`` op rounds it (a loss op's own reduction)."""
    return _mean_fwd(xp, a, dims=dims, keepdim=False, dtype=None)


def _mean_fwd(xp, x, *, dims, keepdim, dtype):
    if dims is None and type(x) is np.ndarray and x.ndim == 1 and dtype is None:
        total = _small_total(x)
        if total is not None:   # a loss's mean of a vector: that sum over the count, as below, without numpy's
            # 0-d division (1.3 us of xn.mean()'s 4.0): the quotient of the exact float total in float64, rounded
            # once to float32, is float32's own (53 >= 2 * 24 + 2 bits: the double rounding is innocuous)
            mean = total / x.shape[0]
            return np.full(1, mean, x.dtype) if keepdim else _asarray(mean, x.dtype)
    if x.dtype is BFLOAT16_NP:
        return in_float32(_mean_fwd, xp, x, dims=dims, keepdim=keepdim, dtype=dtype)
    ordered = _sum_in_order(xp, x, dims, keepdim, dtype)
    if ordered is not None:  # ATen's mean: that sum divided by the count
        return np.divide(ordered, x.dtype.type(_count(x.shape, dims)), out=ordered)
    if _count(x.shape, dims) == 0:   # the mean of nothing is NaN, silently (numpy warns 'Mean of empty slice')
        total = x.sum(axis=dims, keepdims=keepdim, dtype=dtype)
        return xp.full(xp.shape(total), xp.nan, total.dtype)
    return x.mean(axis=dims, keepdims=keepdim, dtype=dtype)


def _mean_vjp(g, out, x, *, dims, keepdim, dtype):
    return ((_expand_back(g, x, dims, keepdim) / _count(x._data.shape, dims)).to(x.dtype),)


def _mean_array_vjp(g, out, inputs, params):
    """``_mean_vjp`` on arrays: the spread gradient over the count, as the dispatched division by the
    count (a 0-d array of the dtype) computes it; float32/float64 of one or more dims only."""
    grad = _spread(g, inputs, params)
    if grad is None:
        return _mean_over_dims(g, inputs[0], params)
    if not grad.ndim or grad.dtype not in _FLOATS:
        return None
    return (grad / operand(grad.size, grad),)


def _mean_over_dims(g, x, params):
    """A float32/float64 mean over some dims (a global average pool's): the reduced gradient divided by the
    count first, then spread into a new array; each element the same quotient as the dispatched expand then
    divide (ResNet's (16, 32, 1, 1) -> (16, 32, 16, 16): 68 -> 43 us in the step, issue 17, session 30).
    None for the rest."""
    dims = params["dims"]
    d = x._data if isinstance(x, Tensor) else None
    if (dims is None or params["dtype"] is not None or type(d) is not np.ndarray or type(g) is not np.ndarray
            or d.dtype != g.dtype or g.dtype not in _FLOATS or not d.size):
        return None
    shape = _keep_shape(d.shape, dims)
    if g.size != math.prod(shape):
        return None
    grad = np.empty(d.shape, g.dtype)
    grad[...] = g.reshape(shape) / operand(_count(d.shape, dims), g)
    return (grad,)


_mean = Op("mean", _mean_fwd, _mean_vjp, saves=NONE, contiguous=True, onnx=_onnx_reduce("ReduceMean"),
           array_vjp=_mean_array_vjp)


def _prod_fwd(xp, x, *, dim, keepdim, dtype):
    if x.dtype is BFLOAT16_NP:
        return in_float32(_prod_fwd, xp, x, dim=dim, keepdim=keepdim, dtype=dtype)
    return x.prod(axis=dim, keepdims=keepdim, dtype=dtype)


def _prod_vjp(g, out, x, *, dim, keepdim, dtype):
    dims = None if dim is None else (dim,)
    g = _expand_back(g, x, dims, keepdim)
    if not (x._data == 0).any():
        return (g * cj(_expand_back(out, x, dims, keepdim) / x),)
    if dim is None:
        return (g * cj(apply(_prod_others, x.reshape(-1), dim=0).reshape(x.shape)),)
    return (g * cj(apply(_prod_others, x, dim=dim)),)


def _prod_others_fwd(xp, x, *, dim):
    """out[k] = product of x[j] over j != k along ``dim`` (exclusive prefix * suffix products)."""
    xm = xp.moveaxis(x, dim, -1)
    left = xp.ones_like(xm)
    right = xp.ones_like(xm)
    xp.cumprod(xm[..., :-1], axis=-1, out=left[..., 1:])
    xp.cumprod(xm[..., :0:-1], axis=-1, out=right[..., -2::-1])
    return xp.moveaxis(left * right, -1, dim)


def _prod_others_vjp(g, out, x, *, dim):
    # d out[k] / d x[m] = prod of x[j], j not in {k, m}: the same op on an n x n stack where
    # row k has x[k] replaced by 1, masked off the diagonal (exact, so it differentiates again)
    xl = x.transpose(dim, -1)
    n = xl.shape[-1]
    e = eye(n, dtype=x.dtype, device=x.device)
    rows = xl.unsqueeze(-2) * (1 - e) + e
    q = apply(_prod_others, rows, dim=rows.ndim - 1)
    gx = (g.transpose(dim, -1).unsqueeze(-1) * cj(q) * (1 - e)).sum(-2)
    return (gx.transpose(dim, -1),)


_prod = Op("prod", _prod_fwd, _prod_vjp, save_output=True, contiguous=True, complex=True, onnx=_onnx_prod)
_prod_others = Op("prod_others", _prod_others_fwd, _prod_others_vjp, complex=True)


def _int_acc(x: Tensor, dtype):
    """PyTorch sums bool and integer tensors in int64 unless told otherwise."""
    if dtype is not None:
        return _dtype.canonical(dtype).np
    try:
        return "int64" if x._data.dtype.kind in "biu" else None
    except AttributeError:
        refuse_non_tensors("sum", x)
        raise


# the params of ``t.sum()``: one dict for all its calls (a new one was ~0.08 us); nothing writes a call's
# params, and the nodes recorded keep this one
_SUM_ALL = {"dims": None, "keepdim": False, "dtype": None}


def sum(input, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("sum", dim, keepdim, axis, keepdims)
    if dim is None and dtype is None and input._data.dtype.kind in FLOATING_KINDS:   # a loss's sum of everything
        fast = _sum.fast
        if fast and not _DISPATCH.slow:   # ``apply``'s fast path without its frame, as ``dispatch.unary`` (0.13 us)
            return fast((input,), _SUM_ALL if keepdim is False else {"dims": None, "keepdim": keepdim, "dtype": None})
        return apply(_sum, input, dims=None, keepdim=keepdim, dtype=None)
    return apply(_sum, input, dims=_dims(input, dim, "sum"), keepdim=keepdim, dtype=_int_acc(input, dtype))


def mean(input, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("mean", dim, keepdim, axis, keepdims)
    if input._data.dtype.kind not in INEXACT_KINDS and dtype is None:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {input.dtype.name.capitalize()}")
    return apply(_mean, input, dims=_dims(input, dim, "mean"), keepdim=keepdim,
                 dtype=None if dtype is None else _dtype.canonical(dtype).np)


def prod(input, dim: int | None = None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("prod", dim, keepdim, axis, keepdims)
    if dim is not None:
        if not isinstance(dim, int):
            raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
        dim = _dims(input, dim, "prod")
        dim = None if dim is None else dim[0]
    return apply(_prod, input, dim=dim, keepdim=keepdim, dtype=_int_acc(input, dtype))


# ---------------------------------------------------------------- extrema
def _tie_weights_fwd(xp, x, out, *, dims, keepdim):
    """1/k on each of the k elements equal to the extremum of their slice, 0 elsewhere."""
    o = out if keepdim or dims is None else out.reshape(_keep_shape(x.shape, dims))
    hit = (x == o) | (xp.isnan(x) & xp.isnan(o))
    return (hit / hit.sum(axis=dims, keepdims=True)).astype(x.dtype, copy=False)


_tie_weights = Op("tie_weights", _tie_weights_fwd)


def _extremum_vjp(g, out, x, *, dims, keepdim):
    w = apply(_tie_weights, x, out, dims=dims, keepdim=keepdim)
    return (_expand_back(g, x, dims, keepdim) * w,)


def _whole(name: str, whole: str):
    """PyTorch's node: ``max(x)``'s whole reduction (``dims=None``) is ``MaxBackward1``, ``amax``'s
    (all dims given) ``AmaxBackward0``; the gradient is the same, split evenly among ties."""
    return lambda ndims, params: whole if params.get("dims") is None else name


_amax = Op("amax", lambda xp, x, *, dims, keepdim: x.max(axis=dims, keepdims=keepdim),
           _extremum_vjp, save_output=True, contiguous=True, onnx=_onnx_reduce("ReduceMax"), complex_error=kernel_refusal("max_values"),
           backward_name=_whole("AmaxBackward0", "MaxBackward1"))
_amin = Op("amin", lambda xp, x, *, dims, keepdim: x.min(axis=dims, keepdims=keepdim),
           _extremum_vjp, save_output=True, contiguous=True, onnx=_onnx_reduce("ReduceMin"), complex_error=kernel_refusal("min_values"),
           backward_name=_whole("AminBackward0", "MinBackward1"))
_argmax = Op("argmax", lambda xp, x, *, dim, keepdim: xp.argmax(x, axis=dim, keepdims=keepdim),
             onnx=_onnx_arg("ArgMax"), complex_error=(RuntimeError, "argmax(): does not support complex input"))
_argmin = Op("argmin", lambda xp, x, *, dim, keepdim: xp.argmin(x, axis=dim, keepdims=keepdim),
             onnx=_onnx_arg("ArgMin"), complex_error=(RuntimeError, "argmin(): does not support complex input"))
_max_dim, _min_dim = picker("max", onnx=_onnx_take), picker("min", onnx=_onnx_take)


def amax(input, dim=(), keepdim: bool = False, *, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("amax", dim, keepdim, axis, keepdims)
    dims = _dims(input, dim, "amax")
    _nonempty(input, dims, "amax")
    # all dims named: dims=None is max()'s whole reduction, whose node PyTorch names apart
    return apply(_amax, input, dims=tuple(range(input.ndim)) if dims is None else dims, keepdim=keepdim)


def amin(input, dim=(), keepdim: bool = False, *, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("amin", dim, keepdim, axis, keepdims)
    dims = _dims(input, dim, "amin")
    _nonempty(input, dims, "amin")
    # all dims named: dims=None is max()'s whole reduction, whose node PyTorch names apart
    return apply(_amin, input, dims=tuple(range(input.ndim)) if dims is None else dims, keepdim=keepdim)


def _arg(op: Op, input, dim, keepdim: bool, name: str):
    if dim is None:
        _nonempty(input, None, name)
        return apply(op, input, dim=None, keepdim=keepdim)
    d = norm_dims(dim, input.ndim, name)
    _nonempty(input, d if input.ndim else None, name)
    return apply(op, input, dim=d[0] if input.ndim else None, keepdim=keepdim)


def argmax(input, dim: int | None = None, keepdim: bool = False, *, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("argmax", dim, keepdim, axis, keepdims)
    return _arg(_argmax, input, dim, keepdim, "argmax")


def argmin(input, dim: int | None = None, keepdim: bool = False, *, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("argmin", dim, keepdim, axis, keepdims)
    return _arg(_argmin, input, dim, keepdim, "argmin")


def _extremum(input, dim, keepdim, arg: Op, full: Op, picker: Op, result, name: str):
    if dim is None:
        _nonempty(input, None, name)
        return apply(full, input, dims=None, keepdim=False)
    if isinstance(dim, Tensor):
        return getattr(input, "maximum" if name == "max" else "minimum")(dim)
    d = norm_dims(dim, input.ndim, name)[0]
    if input.ndim:
        _nonempty(input, (d,), name)
    idx = apply(arg, input, dim=d if input.ndim else None, keepdim=True)
    return result(*pick(picker, input, idx, d, keepdim))


def max(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    """``max(x)`` -> value; ``max(x, dim)`` -> (values, indices); ``max(x, other)`` -> maximum."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("max", dim, keepdim, axis, keepdims)
    return _extremum(input, dim, keepdim, _argmax, _amax, _max_dim, _max_t, "max")


def min(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    """``min(x)`` -> value; ``min(x, dim)`` -> (values, indices); ``min(x, other)`` -> minimum."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("min", dim, keepdim, axis, keepdims)
    return _extremum(input, dim, keepdim, _argmin, _amin, _min_dim, _min_t, "min")


# ---------------------------------------------------------------- variance, std
_WELFORD64 = (np.float32, np.float16, BFLOAT16_NP)   # dtypes ATen's var/std accumulate in float64


def _var_fwd(xp, x, *, dims, keepdim, correction):
    """float32, float16 and bfloat16 accumulate in float64 and round once, as ATen's Welford
    reduction (float32 arithmetic differed in the last bit of about half the variances)."""
    if x.dtype == np.float32 and x.size and kernels.use(xp, x):   # one float64 pass per row, no float64 copy
        rows, shape = _reduced_rows(xp, x, dims, keepdim)
        out = xp.empty(rows.shape[0], x.dtype)
        kernels.loops("sum_order").variances(rows, float(correction), out)
        return out.reshape(shape)
    if x.dtype in _WELFORD64:
        return _var_fwd(xp, x.astype(xp.float64), dims=dims, keepdim=keepdim, correction=correction).astype(x.dtype)
    if x.size == 0:           # no values: NaN (numpy's mean of the empty slice would warn)
        real = x.real if x.dtype.kind == "c" else x
        return xp.full(xp.shape(real.sum(axis=dims, keepdims=keepdim)), xp.nan, real.dtype)
    d = x - x.mean(axis=dims, keepdims=True)
    if d.dtype.kind == "c":   # |d|^2: a complex tensor's variance is real
        d = xp.abs(d)
    n = _count(x.shape, dims)
    return (d * d).sum(axis=dims, keepdims=keepdim) / (n - correction if n > correction else 0)


def _centred(g, x, dims, keepdim, correction):
    """PyTorch's ``var_backward``: ``2 / (N - correction)`` times g first, then broadcast over x times
    (x - mean), in that order, so the gradient rounds as PyTorch's (``2 * g * (x - mean) / dof``
    differed in the last bit, and an Adam step at a gradient that should cancel to zero moved by lr)."""
    dof = _count(x._data.shape, dims) - correction
    factor = 2.0 / dof if dof else math.inf
    return _expand_back(g * factor, x, dims, keepdim) * (x - x.mean(dims, keepdim=True))


def _var_vjp(g, out, x, *, dims, keepdim, correction):
    return (_centred(g, x, dims, keepdim, correction),)


def _std_vjp(g, out, x, *, dims, keepdim, correction):
    # PyTorch's std_backward: g / (2 std), zero on constant slices (std 0), then var's backward
    return (_centred((g / (out * 2)).masked_fill(out == 0, 0), x, dims, keepdim, correction),)


def _std_fwd(xp, x, **params):
    if x.dtype in _WELFORD64:   # the square root of the float64 variance, rounded once
        return _std_fwd(xp, x.astype(xp.float64), **params).astype(x.dtype)
    return xp.sqrt(_var_fwd(xp, x, **params))


_var = Op("var", _var_fwd, _var_vjp, contiguous=True, onnx=_onnx_var)
_std = Op("std", _std_fwd, _std_vjp, save_output=True, contiguous=True, onnx=lambda g, x, **p: g.op("Sqrt", _onnx_var(g, x, **p)))


def _var_args(input, dim, unbiased, keepdim, correction, op: str):
    try:
        kind = input._data.dtype.kind
    except AttributeError:
        refuse_non_tensors(op, input)
        raise
    if kind not in INEXACT_KINDS:
        raise RuntimeError(f"std and var only support floating point and complex dtypes "
                           f"({op}() got {input.dtype.name.capitalize()})")
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    dims = _dims(input, dim, op)
    if _count(input.shape, dims) - correction <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel).", stacklevel=3)
    return dict(dims=dims, keepdim=keepdim, correction=correction)


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("var", dim, keepdim, axis, keepdims)
    return apply(_var, input, **_var_args(input, dim, unbiased, keepdim, correction, "var"))


def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("std", dim, keepdim, axis, keepdims)
    return apply(_std, input, **_var_args(input, dim, unbiased, keepdim, correction, "std"))


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None,
             keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("var_mean", dim, keepdim, axis, keepdims)
    p = _var_args(input, dim, unbiased, keepdim, correction, "var_mean")
    return apply(_var, input, **p), _welford_mean(input, p["dims"], keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None,
             keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("std_mean", dim, keepdim, axis, keepdims)
    p = _var_args(input, dim, unbiased, keepdim, correction, "std_mean")
    return apply(_std, input, **p), _welford_mean(input, p["dims"], keepdim)


def _welford_mean(input, dims, keepdim: bool):
    """var_mean's and std_mean's mean: the Welford reduction's, in float64 for the dtypes it widens
    (it can differ in the last bit from ``mean``, which sums in the input's dtype)."""
    if input._data.dtype in _WELFORD64:
        return apply(_mean, input.double(), dims=dims, keepdim=keepdim, dtype=None).to(input.dtype)
    return apply(_mean, input, dims=dims, keepdim=keepdim, dtype=None)


# ---------------------------------------------------------------- logsumexp, norms
def _lse_fwd(xp, x, *, dims, keepdim):
    if x.dtype is BFLOAT16_NP:
        return in_float32(_lse_fwd, xp, x, dims=dims, keepdim=keepdim)
    m = x.max(axis=dims, keepdims=True) if x.size else xp.zeros(_keep_shape(x.shape, dims), x.dtype)
    m = xp.where(xp.isinf(m), 0, m)
    out = xp.log(xp.exp(x - m).sum(axis=dims, keepdims=True)) + m
    return out if keepdim else out.reshape([s for i, s in enumerate(out.shape)
                                            if not (dims is None or i in dims)])


_logsumexp = Op("logsumexp", _lse_fwd,
                lambda g, out, x, *, dims, keepdim: (_expand_back(g, x, dims, keepdim)
                                                     * (x - _expand_back(out, x, dims, keepdim)).exp(),),
                promote="float", save_output=True, contiguous=True, onnx=_onnx_reduce("ReduceLogSumExp"))


def logsumexp(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    dim, keepdim = numpy_names("logsumexp", dim_or_axis("logsumexp", dim, axis), keepdim, None, keepdims)
    return apply(_logsumexp, input, dims=_dims(input, dim, "logsumexp"), keepdim=keepdim)


def _norm2_in_lanes(xp, x, dims, keepdim):
    """The 2-norm over trailing dims of a contiguous cpu float32 array in ATen's lane order
    (``kernels/vecnorm.py``), or None where numpy's sum is used."""
    if not x.size or not kernels.use(xp, x):
        return None
    lead = 0 if dims is None else x.ndim - len(dims)
    if dims is not None and dims != tuple(range(lead, x.ndim)):
        return None
    norms = kernels.loops("vecnorm").norm2_rows(x.reshape(int(np.prod(x.shape[:lead])), -1))
    return norms.reshape(_keep_shape(x.shape, dims) if keepdim else x.shape[:lead])


def array_norm2(a: np.ndarray) -> np.ndarray:
    """The 2-norm of all of the numpy array ``a``, rounded as ``vector_norm`` rounds it (for callers
    that work on arrays, as ``clip_grad_norm_``'s unrecorded path)."""
    return _norm_fwd(np, a, ord=2.0, dims=None, keepdim=False)


def _norm_fwd(xp, x, *, ord, dims, keepdim):
    if type(x) is COOArray:   # PyTorch's linalg_vector_norm has no sparse kernel (torch.norm does: norm())
        raise unsupported("linalg_vector_norm", xp)
    if x.dtype is BFLOAT16_NP:
        return in_float32(_norm_fwd, xp, x, ord=ord, dims=dims, keepdim=keepdim)
    if ord == 2:
        laned = _norm2_in_lanes(xp, x, dims, keepdim)
        if laned is not None:
            return laned
    if x.dtype == xp.float16 and ord != 2:   # ATen's generic loop accumulates float16 in float32
        return _norm_fwd(xp, x.astype(xp.float32), ord=ord, dims=dims, keepdim=keepdim).astype(x.dtype)
    a = xp.abs(x)
    if ord == 2:
        return xp.sqrt((a * a).sum(axis=dims, keepdims=keepdim))
    if ord == 1:
        return _in_sequence(xp, a, dims, keepdim)
    if ord == _INF:
        return a.max(axis=dims, keepdims=keepdim)
    if ord == -_INF:
        return a.min(axis=dims, keepdims=keepdim)
    if ord == 0:
        return (a != 0).sum(axis=dims, keepdims=keepdim, dtype=x.dtype)
    return _in_sequence(xp, a ** ord, dims, keepdim) ** (1.0 / ord)


def _in_sequence(xp, a, dims, keepdim: bool):
    """ATen's generic reduction loop (``binary_kernel_reduce``, the 1- and p-norms'): each output adds
    its elements one at a time in memory order; a pairwise sum differed in the last bit of most
    1-norms. (Past 32768 elements ATen splits a single output's loop among threads; that split is
    not followed.)"""
    nd = a.ndim
    reduced = tuple(range(nd)) if dims is None else tuple(sorted(d % nd for d in dims)) if nd else ()
    if not reduced or a.size == 0:
        return a.sum(axis=dims, keepdims=keepdim)
    rows, shape = _reduced_rows(xp, a, dims, keepdim)
    if xp is np and kernels.enabled() and rows.dtype in (np.float32, np.float64):
        out = xp.empty(rows.shape[0], a.dtype)
        kernels.loops("sum_order").sequential(rows, out, kernels.threads())
        return out.reshape(shape)
    return xp.cumsum(rows, axis=-1)[..., -1].reshape(shape)


def _reduced_rows(xp, a, dims, keepdim: bool) -> tuple:
    """``a`` as C-contiguous 2-D rows, one per output (the kept dims first, in order, then the reduced
    ones), and the output's shape."""
    nd = a.ndim
    reduced = tuple(range(nd)) if dims is None else tuple(sorted(d % nd for d in dims)) if nd else ()
    kept = [s for d, s in enumerate(a.shape) if d not in reduced]
    rows = xp.ascontiguousarray(xp.moveaxis(a, reduced, tuple(range(nd - len(reduced), nd))).reshape(
        [math.prod(kept), -1]))
    shape = [1 if d in reduced else s for d, s in enumerate(a.shape)] if keepdim else kept
    return rows, tuple(shape)


def _norm_vjp(g, out, x, *, ord, dims, keepdim):
    if ord == 0:
        return (_expand_back(g, x, dims, keepdim) * 0,)
    if ord == 1:
        return (_expand_back(g, x, dims, keepdim) * x.sgn(),)
    if ord == _INF or ord == -_INF:
        return (x.sgn() * _extremum_vjp(g, out, x.abs(), dims=dims, keepdim=keepdim)[0],)
    # ATen's norm_backward, its roundings: ``g * (x / norm)`` for 2, ``|x|^(p-1) sgn(x) g norm^(1-p)`` below
    # 1, ``(x |x|^(p-2) or sgn(x) |x|^(p-1)) * (g / norm^(p-1))`` otherwise, zero where the norm (or x) is
    n, gx = _unsqueezed(out, x, dims, keepdim), _unsqueezed(g, x, dims, keepdim)
    if ord == 2:
        return (gx * (x / n).masked_fill(n == 0, 0),)
    if ord < 1:
        return ((x.sgn() * x.abs() ** (ord - 1)).masked_fill(x == 0, 0) * gx * n ** (1 - ord),)
    scaled = x.sgn() * x.abs() ** (ord - 1) if ord < 2 else x * x.abs() ** (ord - 2)
    return (scaled * (gx / n ** (ord - 1)).masked_fill(n == 0, 0),)


def _unsqueezed(t: Tensor, x: Tensor, dims, keepdim: bool) -> Tensor:
    """A reduction's result or gradient with the reduced dims of ``x`` kept as ones (broadcasts against x)."""
    if not keepdim and (dims is not None or t._data.ndim):
        return t.reshape(_keep_shape(x._data.shape, dims))
    return t


_norm = Op("norm", _norm_fwd, _norm_vjp, save_output=True, contiguous=True, onnx=_onnx_norm,
           backward_name="LinalgVectorNormBackward0")


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """``torch.linalg.vector_norm``: the ord-norm of ``x`` flattened over ``dim``."""
    try:
        kind = x._data.dtype.kind
    except AttributeError:
        refuse_non_tensors("linalg_vector_norm", x)
        raise
    if kind not in INEXACT_KINDS:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {x.dtype.name.capitalize()}")
    if dtype is not None:
        x = x.to(dtype)
    dims = _dims(x, dim, "linalg.vector_norm")
    if ord in (_INF, -_INF):
        _nonempty(x, dims, "linalg.vector_norm")
    return apply(_norm, x, ord=float(ord), dims=dims, keepdim=keepdim)


def norm(input, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """``torch.norm``: vector norms (p a number, or 'fro' = the 2-norm over ``dim``)."""
    if p == "fro" or p is None:
        p = 2
    elif isinstance(p, str):
        raise NotImplementedError(f"norm(): p={p!r} is not supported by tapelab (use 'fro' or a number)")
    if type(input._data) is COOArray and dim is None:   # torch.norm's sparse path: the norm of the summed entries
        return vector_norm(input.coalesce().values(), p, None, keepdim, dtype=dtype)
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


# ---------------------------------------------------------------- scans
def _scan(xp, fn, x, dim: int, dtype):
    """``fn`` (``xp.cumsum`` or ``xp.cumprod``) of ``x`` cast to ``dtype`` first, as PyTorch casts.

    PyTorch's scans accumulate float16 and bfloat16 in float32, and on the CPU float32 and complex64
    in double, rounding each output once; a float32 running product drifts from that by ulps that
    cancellation then amplifies (diffusers' ``alphas_cumprod`` into Euler's sigmas)."""
    if dtype is not None:
        x = x.astype(dtype, copy=False)
    if x.dtype.kind == "b" and _backend.is_numpy(xp):
        raise NotImplementedError(f"\"{fn.__name__}_out_cpu\" not implemented for 'Bool'")
    if x.ndim == 0:
        return x.copy()
    wide = _SCAN_ACC.get(x.dtype) if _backend.is_numpy(xp) else _HALF_ACC.get(x.dtype)
    if wide is None:
        # in the dtype asked for (numpy's own scan widens small integers to int64 and wraps nothing)
        return fn(x, axis=dim, dtype=x.dtype)
    return fn(x.astype(wide), axis=dim).astype(x.dtype)


_HALF_ACC = {np.dtype(np.float16): np.float32, np.dtype(BFLOAT16_NP): np.float32}
_SCAN_ACC = {**_HALF_ACC, np.dtype(np.float32): np.float64, np.dtype(np.complex64): np.complex128}


def _cumsum_fwd(xp, x, *, dim, reverse, dtype):
    if reverse and x.ndim:
        return xp.flip(_scan(xp, xp.cumsum, xp.flip(x, dim), dim, dtype), dim)
    return _scan(xp, xp.cumsum, x, dim, dtype)


_cumsum = Op("cumsum", _cumsum_fwd,
             lambda g, out, x, *, dim, reverse, dtype: (apply(_cumsum, g, dim=dim, reverse=not reverse,
                                                              dtype=None).to(x.dtype),),
             saves=NONE, contiguous=True, onnx=_onnx_cumsum)


def _cumprod_fwd(xp, x, *, dim, dtype):
    return _scan(xp, xp.cumprod, x, dim, dtype)


def _cumprod_vjp(g, out, x, *, dim, dtype):
    if x.ndim == 0:
        return (g,)
    if not (x._data == 0).any():
        return (apply(_cumsum, g * out, dim=dim, reverse=True, dtype=None) / x,)
    if not GRAD.enabled:  # first order only: O(n), like PyTorch
        return (apply(_cumprod_grad_zeros, x, g, out, dim=dim),)
    # a graph of the gradient is wanted: dx[k] = sum_{i>=k} g[i] * prod_{j<=i, j!=k} x[j], built
    # on an n x n stack whose row k has x[k] replaced by 1 (exact, so it differentiates again)
    xl = x.transpose(dim, -1)
    n = xl.shape[-1]
    e = eye(n, dtype=x.dtype, device=x.device)
    upper = e.cumsum(1)
    rows = (xl.unsqueeze(-2) * (1 - e) + e).cumprod(-1)
    gx = (g.transpose(dim, -1).unsqueeze(-2) * rows * upper).sum(-1)
    return (gx.transpose(dim, -1),)


def _cumprod_grad_zeros_fwd(xp, x, g, y, *, dim):
    """The cumprod gradient where slices hold zeros. Before a slice's first zero z it is the
    usual reversed cumsum of g*y over x; at z it is y[z-1] * sum_{i>=z} g[i] * prod_{z<j<=i} x[j];
    after z it is 0."""
    x, g, y = (xp.moveaxis(a, dim, -1) for a in (x, g, y))
    n = x.shape[-1]
    zero = x == 0
    z = xp.where(zero.any(-1, keepdims=True), xp.argmax(zero, -1, keepdims=True), n)
    pos = xp.arange(n)
    before = pos < z
    rev = xp.flip(xp.cumsum(xp.flip(g * y, -1), -1), -1)
    grad = xp.where(before, rev / xp.where(before, x, 1), 0)
    tail = xp.cumprod(xp.where(pos > z, x, 1), -1)
    left = xp.where(z > 0, xp.take_along_axis(y, xp.maximum(z - 1, 0), -1), 1)
    at_z = left * xp.where(pos >= z, g * tail, 0).sum(-1, keepdims=True)
    return xp.moveaxis(xp.where(pos == z, at_z, grad), -1, dim)


_cumprod = Op("cumprod", _cumprod_fwd, _cumprod_vjp, save_output=True, contiguous=True)
_cumprod_grad_zeros = Op("cumprod_grad_zeros", _cumprod_grad_zeros_fwd)


def cumsum(input, dim: int | None = None, *, dtype=None, axis=None):
    d = norm_dims(dim_or_axis("cumsum", dim, axis), input.ndim, "cumsum")[0]
    return apply(_cumsum, input, dim=d, reverse=False, dtype=_int_acc(input, dtype))


def cumprod(input, dim: int | None = None, *, dtype=None, axis=None):
    d = norm_dims(dim_or_axis("cumprod", dim, axis), input.ndim, "cumprod")[0]
    return apply(_cumprod, input, dim=d, dtype=_int_acc(input, dtype))


# ---------------------------------------------------------------- logical tests, counting
def _logical(reduce_name: str, onnx=None):
    def fwd(xp, x, *, dims, keepdim):
        r = getattr(xp, reduce_name)(x, axis=dims, keepdims=keepdim)
        return r.astype(x.dtype) if x.dtype == xp.uint8 else r  # uint8 stays uint8, as in torch
    return Op(reduce_name, fwd, onnx=onnx, contiguous=True)


_all, _any = _logical("all", onnx=_onnx_all_any("ReduceMin")), _logical("any", onnx=_onnx_all_any("ReduceMax"))
_count_nonzero = Op("count_nonzero", lambda xp, x, *, dims: xp.asarray(xp.count_nonzero(x, axis=dims),
                                                                       dtype=xp.int64),
                    onnx=_onnx_count_nonzero, contiguous=True)


def all(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("all", dim, keepdim, axis, keepdims)
    return apply(_all, input, dims=_dims(input, dim, "all"), keepdim=keepdim)


def any(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("any", dim, keepdim, axis, keepdims)
    return apply(_any, input, dims=_dims(input, dim, "any"), keepdim=keepdim)


def count_nonzero(input, dim=None, *, axis=None):
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        given = {k: v for k, v in (("dim", dim), ("axis", axis)) if v is not None}
        return handle_torch_function(count_nonzero, (input,), input, **given)
    if axis is not None:
        dim, _ = numpy_names("count_nonzero", dim, False, axis, None)
    return apply(_count_nonzero, input, dims=_dims(input, dim, "count_nonzero"))


METHODS = ("sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std",
           "logsumexp", "norm", "cumsum", "cumprod", "all", "any", "count_nonzero")
