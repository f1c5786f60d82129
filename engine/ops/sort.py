"""Sorting and order statistics: sort, argsort, topk, kthvalue, median, mode, unique, searchsorted.

Each differentiable one finds its indices with the (non-differentiable) ``argsort`` op and
reads the values through a named gather (``reduce.pick``), so the gradient is scattered
back to the positions the values came from.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..base import backend as _backend
from ..base.dispatch_state import STATE as _DISPATCH
from ..base.dtype import BFLOAT16_NP
from ..core.overrides import handle_torch_function, has_tensor_like
from ..core.arguments import refuse_non_tensors
from ..core.dispatch import _refuse_complex, apply
from ._util import numpy_names
from .reduce import picker, take_along, pick
from .. import return_types
from ..core.registry import ALL, Op, kernel_refusal
from ._util import Tensor, _wrap_dim

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "mode", "unique", "searchsorted"]

_sort_t, _topk_t = return_types.sort, return_types.topk
_kthvalue_t, _median_t, _mode_t = return_types.kthvalue, return_types.median, return_types.mode


def _libstdcxx_keys(xp, x, dim):
    """``x`` as the keys of ATen's libstdc++ sorts, one row per slice along ``dim``: floats as they are,
    half floats in float32, integers and bools in float64 (exact below 2**53); None where the stable
    order is ATen's too (a dim of stride 0 is left in place; a large 1-d integer tensor is radix
    sorted) or the values do not fit."""
    if xp is not np or not kernels.enabled() or x.shape[dim] < 2 or x.strides[dim] == 0:
        return None
    kind = x.dtype.kind
    if kind in "iub":
        if x.ndim == 1 and x.shape[0] >= 32768 and kind != "b":
            return None
        if kind != "b" and x.size and max(abs(int(x.max())), abs(int(x.min()))) >= 2 ** 53:
            return None
        x = x.astype(np.float64)
    elif x.dtype is BFLOAT16_NP or x.dtype == np.float16:   # numba computes in neither; float32 holds both
        x = x.astype(np.float32)
    elif kind != "f":
        return None
    rows = _dim_last(xp, x, dim)
    return rows.reshape(-1, rows.shape[-1])


def _dim_last(xp, x, dim: int):
    """``x`` with ``dim`` moved last (``moveaxis`` cost ~5 us a call, three a small ``topk``)."""
    return x if dim == x.ndim - 1 else xp.moveaxis(x, dim, -1)


def _laid_out(xp, x, idx, whole: bool):
    """``idx`` in the layout ATen's kernels give their results: a whole sort's (``sort``, ``argsort``) like
    the input's (``empty_like``: a permuted input keeps its strides), a selection's (``topk``, ``kthvalue``)
    contiguous. The libstdc++ loops sort rows along the last axis, so their order comes back as a moved
    axis view, and numpy's argsort and a slice of it are neither."""
    if not whole:
        return xp.ascontiguousarray(idx)
    out = xp.empty_like(x, dtype=idx.dtype)
    if idx.strides == out.strides:
        return idx
    out[...] = idx
    return out


def _argsort_fwd(xp, x, *, dim, descending, start, stop, heap=False, unstable=False, selected=False):
    idx = _argsort_idx(xp, x, dim, descending, start, stop, heap, unstable, selected)
    return idx if x.ndim < 2 else _laid_out(xp, x, idx, stop is None and not start)


def _argsort_idx(xp, x, dim, descending, start, stop, heap, unstable, selected):
    """Stable order along ``dim`` (nan last, or first when descending), sliced to [start, stop); with
    ``heap`` (topk where ATen partially sorts) the first ``stop`` in its heap's order of ties; with
    ``unstable`` ATen's order of ties: ``std::sort``'s (``sort(stable=False)``, ``argsort``), or for
    ``topk`` (``stop`` set) ``std::nth_element``'s then ``std::sort``'s of the first ``stop - 1``; with
    ``selected`` (``topk(sorted=False)``) ``std::nth_element``'s alone."""
    if x.ndim == 0:
        return xp.zeros((), xp.int64)
    if heap or unstable or selected:
        keys = _libstdcxx_keys(xp, x, dim)
        if keys is not None:
            loops = kernels.loops("heapselect")
            if heap:
                idx = loops.topk_rows(keys, stop, descending)
            elif stop is not None:
                idx = loops.select_rows(keys, stop, descending, not selected)
            else:
                idx = loops.sort_rows(keys, descending)
            idx = idx.reshape(_dim_last(xp, x, dim).shape[:-1] + (idx.shape[-1],))
            return idx if dim == x.ndim - 1 else xp.moveaxis(idx, -1, dim)
    if descending:
        # reversing, sorting stably and reversing back keeps equal elements in input order
        idx = x.shape[dim] - 1 - xp.flip(xp.argsort(xp.flip(x, dim), axis=dim, kind="stable"), dim)
    else:
        idx = xp.argsort(x, axis=dim, kind="stable")
    if start or stop is not None:
        idx = idx[(slice(None),) * dim + (slice(start, stop),)]
    return idx


def _sort_refusal(what: str) -> tuple:
    return RuntimeError, f" {what} does not support complex dtypes on CPU"


_argsort = Op("argsort", _argsort_fwd, complex_error=_sort_refusal("Sort"))
_sort, _topk = picker("sort", aliases=("msort",)), picker("topk", complex_error=_sort_refusal("topk"))
_kthvalue = picker("kthvalue", complex_error=kernel_refusal("kthvalue"))
_median = picker("median", complex_error=kernel_refusal("median"), backward_name="MedianBackward1")


def _median_all_fwd(xp, x, idx):
    return x.reshape(-1)[idx]


def _median_all_vjp(g, out, x, idx):
    """ATen's ``evenly_distribute_backward``: the gradient shared by every element equal to the median
    (every NaN when it is NaN), as ``max()`` and ``min()`` share theirs."""
    mask = (x == out) | (x.isnan() & out.isnan())
    return mask * (g / mask.sum()), None


# ``median()`` of all elements, at the flat index the sort chose (PyTorch's MedianBackward0)
_median_all = Op("median_all", _median_all_fwd, _median_all_vjp, saves=ALL, save_output=True,
                 complex_error=kernel_refusal("median"), backward_name="MedianBackward0")


def _order(input: Tensor, dim: int, descending: bool = False, start: int = 0, stop=None, of: Op = _argsort,
           **algo) -> Tensor:
    """The ``argsort`` op for the values op ``of``, whose refusal of complex input PyTorch gives."""
    try:
        cplx = of is not _argsort and input.is_complex()
    except AttributeError:
        refuse_non_tensors(of.name, input)
        raise
    if cplx:
        _refuse_complex(of, (input,), {}, input.device)
    return apply(_argsort, input, dim=dim, descending=descending, start=start, stop=stop, **algo)


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False, *, axis=None):
    """Values and indices in order along ``dim``: ties in input order with ``stable``, else in the order
    ATen's ``std::sort`` leaves them (on the cpu; a recommender's argsort of scores or labels picks by it)."""
    dim = dim if axis is None else axis
    try:
        d = _wrap_dim(dim, input.ndim, "sort")
    except AttributeError:
        refuse_non_tensors("sort", input)
        raise
    extra = {} if stable else {"unstable": True}
    return _sort_t(*pick(_sort, input, _order(input, d, descending, **extra), d, True))


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False, *, axis=None):
    extra = {} if stable else {"unstable": True}
    return _order(input, _wrap_dim(dim if axis is None else axis, input.ndim, "argsort"), descending, **extra)


def msort(input):
    return sort(input, 0).values


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *, axis=None):
    dim = dim if axis is None else axis
    d = _wrap_dim(dim, input.ndim, "topk")
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"selected index k out of range (topk with k={k} on dim {d} of size {n})")
    # ATen partially sorts (std::partial_sort, whose order of ties the heap gives) where k * 64 <= n
    # elsewhere it selects (std::nth_element) and sorts the first k - 1 (std::sort) when ``sorted``
    algo = {"heap": True} if 0 < k and k * 64 <= n else {"unstable": True} if sorted else {"selected": True}
    return _topk_t(*pick(_topk, input, _order(input, d, largest, 0, k, _topk, **algo), d, True))


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False, *, axis=None):
    """The k-th smallest element (1-based) along ``dim`` and its index."""
    dim = dim if axis is None else axis
    d = _wrap_dim(dim, input.ndim, "kthvalue")
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d} "
                           f"(k={k}, size {n})")
    return _kthvalue_t(*pick(_kthvalue, input, _order(input, d, False, k - 1, k, _kthvalue), d, keepdim))


def median(input, dim: int | None = None, keepdim: bool = False, *, axis=None, keepdims=None):
    """Lower median: of all elements (a value), or along ``dim`` (values and indices)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("median", dim, keepdim, axis, keepdims)
    if dim is None:
        flat = input.reshape(-1)
        n = flat.shape[0]
        if n == 0:
            return flat.sum() * float("nan")
        k = (n - 1) // 2
        index = _nan_first(flat, 0, _order(flat, 0, False, k, k + 1, _median)).reshape(())
        return apply(_median_all, input, index)
    d = _wrap_dim(dim, input.ndim, "median")
    n = input.shape[d] if input.ndim else 1
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    k = (n - 1) // 2
    return _median_t(*pick(_median, input, _nan_first(input, d, _order(input, d, False, k, k + 1, _median)), d,
                           keepdim))


def _nan_first(input: Tensor, d: int, index: Tensor) -> Tensor:
    """``index`` (the median's position along ``d``, kept dim) where a slice holds a NaN replaced by its
    first NaN's: ``median`` propagates NaN as ATen's does (``nanmedian`` skips them)."""
    if input.dtype.is_floating_point and input.ndim:   # no host read: the meta device and capture run it too
        nan = input.isnan()
        return nan.int().argmax(d, keepdim=True).where(nan.any(d, keepdim=True), index)
    return index


def _mode_index_fwd(xp, x, *, dim):
    """Index (kept dim) of the last occurrence of the most frequent value, the smallest on ties."""
    if x.ndim == 0:
        return xp.zeros((), xp.int64)
    order = xp.argsort(x, axis=dim, kind="stable")
    s = xp.moveaxis(xp.take_along_axis(x, order, dim), dim, -1)
    new_run = xp.concatenate([xp.ones(s.shape[:-1] + (1,), bool), s[..., 1:] != s[..., :-1]], -1).ravel()
    # each row starts a run, so runs never cross rows: number them over the flat array (cumsum,
    # non-decreasing); an element's run starts at the first element of its number (searchsorted),
    # and its run length so far is its distance from there (cupy has no maximum.accumulate)
    run = xp.cumsum(new_run)
    run_len = (xp.arange(run.size) - xp.searchsorted(run, run, side="left") + 1).reshape(s.shape)
    # run lengths grow along each run, so the first maximum closes the smallest most frequent value
    best = xp.moveaxis(xp.argmax(run_len, -1, keepdims=True), -1, dim)
    return xp.take_along_axis(order, best, dim)


_mode_index = Op("mode_index", _mode_index_fwd, complex_error=kernel_refusal("mode"))
_mode = picker("mode")


def mode(input, dim: int = -1, keepdim: bool = False, *, axis=None):
    """The most frequent value along ``dim`` (the smallest on ties) and its last index."""
    dim = dim if axis is None else axis
    d = _wrap_dim(dim, input.ndim, "mode")
    if input.ndim and input.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    return _mode_t(*pick(_mode, input, apply(_mode_index, input, dim=d), d, keepdim))


# ---------------------------------------------------------------- unique, searchsorted
def _unique_fwd(xp, x, *, dim):
    # ATen's flat unique keeps every NaN apart (NaN != NaN), sorted last; numpy merges them by default
    nan = {"equal_nan": False} if dim is None and x.dtype.kind in "fc" and _backend.is_numpy(xp) else {}
    vals, inverse, counts = xp.unique(x, return_inverse=True, return_counts=True, axis=dim, **nan)
    return vals, inverse.reshape(x.shape if dim is None else -1), counts


_unique = Op("unique", _unique_fwd, n_extra=2, data_dependent="unique()",
             complex_error=(NotImplementedError, "\"unique\" not implemented for '{dtype}'"))


def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None):
    """Distinct values (always sorted), optionally with inverse indices and counts."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(unique, (input,), input, sorted=sorted, return_inverse=return_inverse,
                                     return_counts=return_counts, dim=dim)
    d = None if dim is None else _wrap_dim(dim, input.ndim, "unique")
    vals, inverse, counts = apply(_unique, input, dim=d)
    if not (return_inverse or return_counts):
        return vals
    return (vals, *([inverse] if return_inverse else []), *([counts] if return_counts else []))


def _searchsorted_fwd(xp, seq, values, *, side, dtype):
    if seq.ndim == 1:
        return xp.searchsorted(seq, values, side=side).astype(dtype, copy=False)
    rows = seq.reshape(-1, seq.shape[-1])
    vals = values.reshape(rows.shape[0], -1)
    out = xp.empty(vals.shape, dtype)
    for i in range(rows.shape[0]):
        out[i] = xp.searchsorted(rows[i], vals[i], side=side)
    return out.reshape(values.shape)


_searchsorted = Op("searchsorted", _searchsorted_fwd, complex_error=kernel_refusal("searchsorted_out"))


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False, side=None,
                 sorter=None):
    """Insertion points of ``input`` in the innermost dim of ``sorted_sequence``."""
    if not isinstance(input, Tensor):
        input = sorted_sequence.new_tensor(input)
    seq_shape, val_shape = tuple(sorted_sequence.shape), tuple(input.shape)
    if len(seq_shape) != 1 and seq_shape[:-1] != val_shape[:-1]:
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           f"dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq_shape)} and input value tensor {list(val_shape)}")
    if side is not None:
        if side not in ("left", "right") or (right and side == "left"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' and must agree with "
                               f"right={right}, got side={side!r}")
    if sorter is not None:
        sorted_sequence = apply(take_along, sorted_sequence, sorter, dim=sorted_sequence.ndim - 1, keepdim=True)
    return apply(_searchsorted, sorted_sequence, input, side=side or ("right" if right else "left"),
                 dtype="int32" if out_int32 else "int64")


METHODS = ("sort", "argsort", "msort", "topk", "kthvalue", "median", "mode", "unique")
