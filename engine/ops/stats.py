"""Statistics and counting: running max/min, log-cumsum-exp, NaN-ignoring reductions, quantiles,
histograms and bin counts, membership, covariance, differences and distances.

``cummax``/``cummin`` follow the value-and-index rule (a non-differentiable op finds the indices, a
gather reads the values); histograms and counts are non-differentiable primitives; the rest are
composites over existing ops, listed in ``COMPOSITES``.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from .. import return_types
from ..base import dtype as _dtype
from ..core import creation
from ..core.dispatch import apply
from ..core.registry import Op, kernel_refusal
from ..core.tensor import _wrap_dim
from ._util import Tensor, dim_or_axis, numpy_names
from .compare import isnan, where
from .movement import cat
from .sort import searchsorted, sort

__all__ = ["cummax", "cummin", "logcumsumexp", "nansum", "nanmean", "nanmedian", "quantile", "nanquantile",
           "histc", "histogram", "histogramdd", "bincount", "bucketize", "isin", "isreal", "aminmax", "cov", "corrcoef", "diff",
           "dist", "renorm", "unique_consecutive"]

_values_indices = {n: getattr(return_types, n) for n in ("cummax", "cummin", "nanmedian")}
_aminmax_t, _histogram_t, _histogramdd_t = return_types.aminmax, return_types.histogram, return_types.histogramdd


# ---------------------------------------------------------------- running extremes
def _running_index_fwd(xp, x, *, dim, largest):
    """Index of the running maximum (minimum) along ``dim``: a later equal value takes over, and a NaN
    takes over and stays, as PyTorch's ``cummax``/``cummin`` do."""
    x = xp.moveaxis(x, dim, 0)
    out = xp.zeros(x.shape, xp.int64)
    if x.shape[0] == 0:
        return xp.moveaxis(out, 0, dim)
    best, where_ = x[0].copy(), xp.zeros(x.shape[1:], xp.int64)
    for i in range(x.shape[0]):
        v = x[i]
        better = (v >= best) if largest else (v <= best)
        if x.dtype.kind == "f":
            better = (better & ~xp.isnan(best)) | xp.isnan(v)
        best = xp.where(better, v, best)
        where_ = xp.where(better, i, where_)
        out[i] = where_
    return xp.moveaxis(out, 0, dim)


_running_index = Op("cummax_indices", _running_index_fwd, complex_error=kernel_refusal("cummax"), contiguous=True)


def _running(input: Tensor, dim: int, largest: bool, name: str):
    d = _wrap_dim(dim, input.ndim, name) if input.ndim else 0
    if input.ndim == 0:
        return _values_indices[name](input.clone(), creation.zeros((), dtype=_dtype.int64, device=input.device))
    idx = apply(_running_index, input, dim=d, largest=largest)
    return _values_indices[name](input.gather(d, idx), idx)


def cummax(input: Tensor, dim: int | None = None, *, axis=None):
    """The running maximum along ``dim`` and where it was found."""
    if _DISPATCH.functions is not None and has_tensor_like((input, axis)):
        return handle_torch_function(cummax, (input, axis), input, dim=dim, axis=axis)
    return _running(input, dim_or_axis("cummax", dim, axis), True, "cummax")


def cummin(input: Tensor, dim: int | None = None, *, axis=None):
    """The running minimum along ``dim`` and where it was found."""
    if _DISPATCH.functions is not None and has_tensor_like((input, axis)):
        return handle_torch_function(cummin, (input, axis), input, dim=dim, axis=axis)
    return _running(input, dim_or_axis("cummin", dim, axis), False, "cummin")


def logcumsumexp(input: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim``, shifted by the maximum so it cannot overflow."""
    if _DISPATCH.functions is not None and has_tensor_like((input, axis)):
        return handle_torch_function(logcumsumexp, (input, axis), input, dim=dim, axis=axis)
    dim = dim_or_axis("logcumsumexp", dim, axis)
    d = _wrap_dim(dim, input.ndim, "logcumsumexp") if input.ndim else 0
    if input.numel() == 0:
        return input.clone()
    base = input.detach().real if input.is_complex() else input.detach()   # complex: shift by the real part
    shift = base.amax(d, keepdim=True) if input.ndim else base
    shift = where(shift.isfinite(), shift, 0.0)
    return (input - shift).exp().cumsum(d).log() + shift


# ---------------------------------------------------------------- NaN-ignoring reductions, quantiles
def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """``sum`` counting NaNs as zero."""
    if _DISPATCH.functions is not None and has_tensor_like((input, dim, axis, keepdims)):
        return handle_torch_function(nansum, (input, dim, axis, keepdims), input, dim=dim, keepdim=keepdim,
                                     dtype=dtype, axis=axis, keepdims=keepdims)
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("nansum", dim, keepdim, axis, keepdims)
    x = where(isnan(input), 0, input) if input.is_floating_point() else input
    return x.sum(dim, keepdim=keepdim, dtype=dtype) if dim is not None else x.sum(dtype=dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """``mean`` of the non-NaN elements."""
    if _DISPATCH.functions is not None and has_tensor_like((input, dim, axis, keepdims)):
        return handle_torch_function(nanmean, (input, dim, axis, keepdims), input, dim=dim, keepdim=keepdim,
                                     dtype=dtype, axis=axis, keepdims=keepdims)
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("nanmean", dim, keepdim, axis, keepdims)
    if not input.is_floating_point():
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{input.dtype.scalar_type}")
    count = (~isnan(input)).sum(dim, keepdim=keepdim) if dim is not None else (~isnan(input)).sum()
    return nansum(input, dim, keepdim, dtype=dtype) / count


def _sorted_count(input: Tensor, d: int, ignore_nan: bool):
    """Values sorted along ``d`` (NaNs last) and how many of them count in each slice."""
    ordered = sort(input, d, stable=True)   # ATen breaks ties by index (nanmedian's indices)
    n = input.shape[d]
    if ignore_nan:
        count = (~isnan(input)).sum(d, keepdim=True)
    else:
        count = creation.full(tuple(1 if i == d else s for i, s in enumerate(input.shape)), n, dtype=_dtype.int64,
                              device=input.device)
    return ordered, count


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None,
              keepdims=None):
    """The lower median of the non-NaN values (NaN where a slice has none)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, axis, keepdims)):
        return handle_torch_function(nanmedian, (input, axis, keepdims), input, dim=dim, keepdim=keepdim, axis=axis,
                                     keepdims=keepdims)
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("nanmedian", dim, keepdim, axis, keepdims)
    if dim is None:
        flat = input.reshape(-1)
        return nanmedian(flat, 0).values if flat.numel() else flat.sum() * float("nan")
    d = _wrap_dim(dim, input.ndim, "nanmedian") if input.ndim else 0
    x = input if input.ndim else input.reshape(1)
    if x.shape[d] == 0:
        raise IndexError(f"nanmedian(): Expected reduction dim {d} to have non-zero size.")
    (values, indices), count = _sorted_count(x, d, True)
    k = ((count - 1).clamp(min=0)) // 2
    v, i = values.gather(d, k), indices.gather(d, k)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    if input.ndim == 0:
        v, i = v.reshape(()), i.reshape(())
    return _values_indices["nanmedian"](v, i)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool, name: str) -> Tensor:
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                           f"Got {interpolation}")
    if not input.is_floating_point():
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q and not 0 <= float(q) <= 1:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    if not scalar_q:
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        if not bool(((q >= 0) & (q <= 1)).all()):
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    qs = creation.tensor([float(q)] if scalar_q else q.reshape(-1).tolist(), dtype=input.dtype, device=input.device)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, input.ndim, name)
    if x.ndim == 0:
        x, d = x.reshape(1), 0
    if x.shape[d] == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    (values, _), count = _sorted_count(x, d, ignore_nan)
    values = values.movedim(d, -1).unsqueeze(-2)                    # (..., 1, n)
    count = count.movedim(d, -1).to(input.dtype)                    # (..., 1)
    last = (count - 1).clamp(min=0)
    pos = qs * last                                                 # (..., nq)
    if interpolation == "lower":
        pos = pos.floor()
    elif interpolation == "higher":
        pos = pos.ceil()
    elif interpolation == "nearest":
        pos = pos.round()
    lo, hi = pos.floor(), pos.ceil()
    n = values.shape[-1]
    v_lo = values.expand(*pos.shape, n).gather(-1, lo.long().unsqueeze(-1)).squeeze(-1)
    v_hi = values.expand(*pos.shape, n).gather(-1, hi.long().unsqueeze(-1)).squeeze(-1)
    if interpolation == "midpoint":
        out = where(hi > lo, (v_lo + v_hi) / 2, v_lo)
    else:
        out = v_lo + (v_hi - v_lo) * (pos - lo)
    if ignore_nan:
        out = where(count == 0, float("nan"), out)
    else:
        has_nan = isnan(values).any(-1)
        out = where(has_nan, float("nan"), out)
    out = out.movedim(-1, 0)                                        # (nq, ...)
    if keepdim:
        out = out.unsqueeze(d + 1) if dim is not None else out.reshape((qs.shape[0],) + (1,) * input.ndim)
    # a number or a 0-d tensor q gives no quantile dim, as in PyTorch
    return out.squeeze(0) if scalar_q or q.ndim == 0 else out


def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q``-quantiles along ``dim`` (of all elements by default); NaN if a slice holds NaN."""
    if _DISPATCH.functions is not None and has_tensor_like((input, q)):
        return handle_torch_function(quantile, (input, q), input, q, dim=dim, keepdim=keepdim,
                                     interpolation=interpolation)
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """``quantile`` of the non-NaN values."""
    if _DISPATCH.functions is not None and has_tensor_like((input, q)):
        return handle_torch_function(nanquantile, (input, q), input, q, dim=dim, keepdim=keepdim,
                                     interpolation=interpolation)
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# ---------------------------------------------------------------- histograms and counting
def _histc_fwd(xp, x, *, bins, lo, hi):
    flat = x.reshape(-1)
    if lo == hi and flat.size:
        lo, hi = float(flat.min()), float(flat.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    keep = flat[(flat >= lo) & (flat <= hi)]
    counts, _ = xp.histogram(keep, bins=bins, range=(lo, hi))
    return counts.astype(x.dtype, copy=False)


_histc = Op("histc", _histc_fwd)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """Counts in ``bins`` equal bins over [min, max] (the data's range when both are 0)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(histc, (input,), input, bins=bins, min=min, max=max)
    if not input.is_floating_point():
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{str(input.dtype).split('.')[-1].title()}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for bins")
    if min > max:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {min} max {max}")
    return apply(_histc, input, bins=int(bins), lo=float(min), hi=float(max))


def _outer_edges(rows: Tensor, ranges) -> list:
    """Each dimension's first and last edge, in double, as ATen picks them: the given range, else
    the data's min and max (0 and 1 with no data), an empty range widened by 0.5 each way."""
    d = rows.shape[1]
    if ranges is not None:
        pairs = [(float(ranges[2 * k]), float(ranges[2 * k + 1])) for k in range(d)]
    elif rows.shape[0]:
        pairs = list(zip(rows.amin(0).tolist(), rows.amax(0).tolist()))
    else:
        pairs = [(0.0, 1.0)] * d
    out = []
    for k, (lo, hi) in enumerate(pairs):
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise RuntimeError(f"torch.histogramdd: dimension {k}'s range [{lo:g}, {hi:g}] is not finite")
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} "
                               f"for dimension {k}")
        out.append((lo - 0.5, hi + 0.5) if lo == hi else (lo, hi))
    return out


def _histogramdd_fwd(xp, x, *rest, has_weight):
    """The histogram of the rows of 2-d ``x`` between each dimension's edges: each value counted in
    the bin whose edges hold it (the last bin closed), values outside or NaN skipped, weights added
    in order in the dtype (ATen's order on one thread)."""
    edges = rest[:-1] if has_weight else rest
    dt = x.dtype
    keep = xp.ones(x.shape[0], bool)
    index = []
    for k, e in enumerate(edges):
        col = x[:, k]
        keep &= (col >= e[0]) & (col <= e[-1])
        index.append(xp.minimum(xp.searchsorted(e, col, side="right") - 1, e.shape[0] - 2))
    shape = tuple(e.shape[0] - 1 for e in edges)
    flat = xp.ravel_multi_index(tuple(i[keep] for i in index), shape)
    if has_weight:
        hist = xp.zeros(math.prod(shape), dt)
        xp.add.at(hist, flat, rest[-1][keep])
    else:
        hist = xp.bincount(flat, minlength=math.prod(shape)).astype(dt)
    return hist.reshape(shape)


_histogramdd = Op("histogramdd", _histogramdd_fwd)


def _histogram_dd(input: Tensor, bins, ranges, weight, density: bool, name: str) -> tuple:
    """``(hist, edges)`` of ``input``'s rows (its last dimension the histogram's dimensions): equal
    bins get PyTorch's ``linspace`` points in the input's dtype between ``_outer_edges``; ``density``
    divides as ATen does."""
    if not input.is_floating_point():
        raise RuntimeError(f"\"histogramdd\" not implemented for '{str(input.dtype).split('.')[-1].title()}'")
    d = input.shape[-1] if input.ndim else 1
    rows = input.reshape(-1, d)
    given = isinstance(bins, Tensor) or (isinstance(bins, (list, tuple)) and bins and isinstance(bins[0], Tensor))
    if given:
        edges = [bins] if isinstance(bins, Tensor) else list(bins)
    else:
        edges = [int(bins)] * d if isinstance(bins, (int, np.integer)) else [int(b) for b in bins]
    if len(edges) != d:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the input.")
    if ranges is not None and len(ranges) != 2 * d:
        raise RuntimeError(f"torch.histogramdd: for a {d}-dimensional histogram range should have {2 * d} elements, "
                           f"but got {len(ranges)}")
    if given:
        for k, e in enumerate(edges):
            if e.dtype != input.dtype:
                raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
                                   f"got input with dtype {input.dtype.cpp_name} and bins for dimension {k} with "
                                   f"dtype {e.dtype.cpp_name}")
    else:
        for k, b in enumerate(edges):
            if b <= 0:
                raise RuntimeError(f"{name}: bins must be > 0, but got {b} for dimension {k}")
        edges = [creation.linspace(lo, hi, b + 1, dtype=input.dtype, device=input.device)
                 for (lo, hi), b in zip(_outer_edges(rows, ranges), edges)]
    args = [rows, *edges] + ([weight.reshape(-1)] if weight is not None else [])
    hist = apply(_histogramdd, *args, has_weight=weight is not None)
    if density:   # ATen's: by the total, then by each dimension's bin lengths (the sums in its order)
        hist = hist / hist.sum()
        for k, e in enumerate(edges):
            hist = hist / e.diff().reshape([-1 if j == k else 1 for j in range(d)])
    return hist, edges


def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None, density: bool = False):
    """``(hist, bin_edges)``: counts (or a density) of ``input`` in ``bins`` bins or between given edges."""
    if _DISPATCH.functions is not None and has_tensor_like((input, bins, range, weight)):
        return handle_torch_function(histogram, (input, bins, range, weight), input, bins=bins, range=range,
                                     weight=weight, density=density)
    hist, edges = _histogram_dd(input.reshape(-1, 1), bins, range, weight, density, "torch.histogram()")
    return _histogram_t(hist, edges[0])


def histogramdd(input: Tensor, bins=10, *, range=None, weight: Tensor | None = None, density: bool = False):
    """``(hist, bin_edges)`` of the rows of ``input`` (its last dimension the histogram's): ``bins``
    equal bins per dimension (one number, or one each) or one edge tensor per dimension."""
    if _DISPATCH.functions is not None and has_tensor_like((input, bins, range, weight)):
        return handle_torch_function(histogramdd, (input, bins, range, weight), input, bins=bins, range=range,
                                     weight=weight, density=density)
    hist, edges = _histogram_dd(input, bins, range, weight, density, "torch.histogramdd()")
    return _histogramdd_t(hist, tuple(edges))


def _bincount_fwd(xp, x, *w, minlength):
    return xp.bincount(x, weights=w[0] if w else None, minlength=minlength)


_bincount = Op("bincount", _bincount_fwd, data_dependent="bincount()")


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each non-negative integer occurs (weighted sums with ``weights``)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, weights)):
        return handle_torch_function(bincount, (input, weights), input, weights=weights, minlength=minlength)
    if input.ndim != 1 or input.is_floating_point() or input.dtype == _dtype.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if input.numel() and int(input.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = apply(_bincount, input, *([weights] if weights is not None else []), minlength=int(minlength))
    if weights is not None and weights.dtype == _dtype.float32:
        return out.float()
    return out


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each value among sorted 1-d ``boundaries`` (``searchsorted`` with the roles swapped)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, boundaries)):
        return handle_torch_function(bucketize, (input, boundaries), input, boundaries, out_int32=out_int32,
                                     right=right)
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    value = input if isinstance(input, Tensor) else creation.tensor(input, device=boundaries.device)
    return searchsorted(boundaries, value, out_int32=out_int32, right=right)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` occurs in ``test_elements``."""
    if _DISPATCH.functions is not None and has_tensor_like((elements, test_elements)):
        return handle_torch_function(isin, (elements, test_elements), elements, test_elements,
                                     assume_unique=assume_unique, invert=invert)
    like = elements if isinstance(elements, Tensor) else test_elements
    e = elements if isinstance(elements, Tensor) else creation.tensor(elements, device=like.device)
    t = test_elements if isinstance(test_elements, Tensor) else creation.tensor(test_elements, device=like.device)
    if t.numel() == 0:
        hit = creation.zeros(tuple(e.shape), dtype=_dtype.bool, device=e.device)
    else:
        hit = (e.unsqueeze(-1) == t.reshape(-1)).any(-1)
    return ~hit if invert else hit


def isreal(input: Tensor) -> Tensor:
    """Where the imaginary part is 0 (a real tensor: everywhere)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(isreal, (input,), input)
    if input.is_complex():
        return input.imag == 0
    return creation.ones(tuple(input.shape), dtype=_dtype.bool, device=input.device)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False, axis=None):
    """``(min, max)`` of all elements, or along ``dim``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, axis)):
        return handle_torch_function(aminmax, (input, axis), input, dim=dim, keepdim=keepdim, axis=axis)
    dim = dim if axis is None else axis
    if input.numel() == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    if dim is None:
        lo, hi = input.amin(), input.amax()
        if keepdim:
            shape = (1,) * input.ndim
            lo, hi = lo.reshape(shape), hi.reshape(shape)
        return _aminmax_t(lo, hi)
    return _aminmax_t(input.amin(dim, keepdim=keepdim), input.amax(dim, keepdim=keepdim))


# ---------------------------------------------------------------- covariance, differences, norms
def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance of the variables in the rows of ``input`` (observations in columns)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, fweights, aweights)):
        return handle_torch_function(cov, (input, fweights, aweights), input, correction=correction,
                                     fweights=fweights, aweights=aweights)
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.is_floating_point():
        x = x.to(_dtype.get_default_dtype())
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = fweights.to(x.dtype)
    if aweights is not None:
        w = aweights.to(x.dtype) if w is None else w * aweights
    if w is None:
        total = creation.tensor(float(n), dtype=x.dtype, device=x.device)
        avg = x.mean(1)
    else:
        total = w.sum()
        avg = (x * w).sum(1) / total
    if w is None or correction == 0:
        norm = total - correction
    elif aweights is None:
        norm = total - correction
    else:
        norm = total - correction * (w * aweights).sum() / total
    if bool(norm <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", stacklevel=2)
        norm = norm.clamp(min=0)
    centered = x - avg.unsqueeze(1)
    weighted = centered if w is None else centered * w
    c = weighted.matmul(centered.t()) / norm
    return c.squeeze() if input.ndim < 2 else c


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of ``input``, clipped to [-1, 1]."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(corrcoef, (input,), input)
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    std = d.sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None, *, axis=None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (XOR for booleans)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, prepend, append, axis)):
        return handle_torch_function(diff, (input, prepend, append, axis), input, n=n, dim=dim, prepend=prepend,
                                     append=append, axis=axis)
    dim = dim if axis is None else axis
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _wrap_dim(dim, input.ndim, "diff")
    x = input
    if prepend is not None or append is not None:
        x = cat([p for p in (prepend, x, append) if p is not None], d)
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        hi, lo = x.narrow(d, 1, length - 1), x.narrow(d, 0, length - 1)
        x = (hi ^ lo) if x.dtype == _dtype.bool else hi - lo
    return x


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of ``input - other``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, other)):
        return handle_torch_function(dist, (input, other), input, other, p=p)
    return (input - other).norm(p)


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` rescaled so its p-norm is at most ``maxnorm``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(renorm, (input,), input, p, dim, maxnorm)
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = _wrap_dim(dim, input.ndim, "renorm")
    others = tuple(i for i in range(input.ndim) if i != d)
    norms = input.norm(p, others, keepdim=True) if others else input.abs() if p != 0 else input
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return input * factor


def _unique_consecutive_host(a: np.ndarray, dim):
    if dim is None:
        flat = a.reshape(-1)
        if flat.size == 0:
            return flat, np.zeros(a.shape, np.int64), np.zeros(0, np.int64)
        start = np.concatenate([[True], flat[1:] != flat[:-1]])
        groups = np.cumsum(start) - 1
        counts = np.diff(np.concatenate([np.flatnonzero(start), [flat.size]]))
        return flat[start], groups.reshape(a.shape), counts
    moved = np.moveaxis(a, dim, 0)
    n = moved.shape[0]
    if n == 0:
        return a, np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = moved.reshape(n, -1)
    start = np.concatenate([[True], (rows[1:] != rows[:-1]).any(1)])
    groups = np.cumsum(start) - 1
    counts = np.diff(np.concatenate([np.flatnonzero(start), [n]]))
    return np.moveaxis(moved[start], 0, dim), groups, counts


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """Collapse runs of equal consecutive elements (slices along ``dim``) to one."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(unique_consecutive, (input,), input, return_inverse=return_inverse,
                                     return_counts=return_counts, dim=dim)
    d = None if dim is None else _wrap_dim(dim, input.ndim, "unique_consecutive")
    values, inverse, counts = _unique_consecutive_host(input.detach().cpu().numpy(), d)
    out = creation.tensor(np.ascontiguousarray(values), dtype=input.dtype, device=input.device)
    extras = []
    if return_inverse:
        extras.append(creation.tensor(inverse, dtype=_dtype.int64, device=input.device))
    if return_counts:
        extras.append(creation.tensor(counts, dtype=_dtype.int64, device=input.device))
    return (out, *extras) if extras else out


METHODS = ("cummax", "cummin", "logcumsumexp", "nansum", "nanmean", "nanmedian", "quantile", "nanquantile", "histc",
           "histogram", "bincount", "isreal", "aminmax", "cov", "corrcoef", "diff", "dist", "renorm",
           "unique_consecutive")
OPERATORS = {"renorm_": lambda self, p, dim, maxnorm: self.copy_(renorm(self, p, dim, maxnorm))}

COMPOSITES = {
    "cummax": "cummax_indices, then gather", "cummin": "cummax_indices (largest=False), then gather",
    "logcumsumexp": "exp, cumsum and log around a detached shift", "nansum": "where and sum",
    "histogram": "histogramdd of the values as one column (linspace edges, the counting op, density by division)",
    "nanmean": "nansum over a count", "nanmedian": "sort and gather at the middle non-NaN position",
    "quantile": "sort and a lerp of gathered neighbours", "nanquantile": "quantile over the non-NaN count",
    "bucketize": "searchsorted", "isin": "eq against every test element and any", "isreal": "a ones factory, or imag == 0",
    "aminmax": "amin and amax", "cov": "means and a matmul", "corrcoef": "cov over the outer product of stds",
    "diff": "narrow and sub (xor for bool)", "dist": "sub and norm", "renorm": "norm, where and mul",
    "renorm_": "renorm, then copy_", "unique_consecutive": "runs found on the host, made into tensors",
}
