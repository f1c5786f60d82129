"""Helpers shared by op declarations."""
from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np

from ..core.tensor import Tensor, _wrap_dim, sum_to, unbroadcast

__all__ = ["unbroadcast", "sum_to", "norm_dims", "numpy_names", "numpy_kwargs", "accepts_axis", "along_key", "Tensor",
           "warn_once"]

_warned: set = set()


def warn_once(message: str, stacklevel: int = 3) -> None:
    """ATen's ``TORCH_WARN_ONCE``: a UserWarning given the first time only, per process (the deprecated
    linalg names, stft's defaults)."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, UserWarning, stacklevel=stacklevel)


def numpy_names(op: str, dim, keepdim, axis, keepdims) -> tuple:
    """``(dim, keepdim)`` from PyTorch's numpy spellings too: ``axis=`` for ``dim``, ``keepdims=`` for
    ``keepdim`` (``x.sum(axis=0)``, ``x.all(axis=-1)``, ``mean(x, 0, keepdims=True)``)."""
    if axis is not None:
        if dim is not None and dim != ():
            raise TypeError(f"{op}() got multiple values for argument 'dim' (also given as 'axis')")
        dim = axis
    return dim, keepdim if keepdims is None else keepdims


def dim_or_axis(op: str, dim, axis):
    """``dim``, or its numpy spelling ``axis=``, which PyTorch takes wherever a function has a ``dim``
    (``torch.stack(xs, axis=0)``, ``x.softmax(axis=-1)``, ``x.cumsum(axis=0)``); a ``dim`` left out
    without an ``axis`` is PyTorch's missing-argument TypeError."""
    if axis is not None:
        return axis
    if dim is None:
        raise TypeError(f"{op}() missing 1 required positional arguments: \"dim\"")
    return dim


def numpy_kwargs(op: str, kwargs: dict, keepdim: bool) -> dict:
    """``kwargs`` with PyTorch's numpy spellings renamed, as its argument parser takes them for every
    native function with a ``dim``: ``axis=`` for ``dim``, ``keepdims=`` for ``keepdim`` (``keepdim``
    says whether the function has one)."""
    if "axis" in kwargs:
        if "dim" in kwargs:
            raise TypeError(f"{op}() got an unexpected keyword argument 'axis'")
        kwargs["dim"] = kwargs.pop("axis")
    if keepdim and "keepdims" in kwargs:
        if "keepdim" in kwargs:
            raise TypeError(f"{op}() got an unexpected keyword argument 'keepdims'")
        kwargs["keepdim"] = kwargs.pop("keepdims")
    return kwargs


def takes_numpy_names(fn) -> tuple:
    """``(whether fn has a dim but no axis parameter, whether it has a keepdim)``."""
    params = inspect.signature(fn).parameters
    return "dim" in params and "axis" not in params, "keepdim" in params


def accepts_axis(fn):
    """``fn`` taking ``axis=``/``keepdims=`` too (``numpy_kwargs``): ``torch.fft.fftshift(x, axis=0)``."""
    _, keepdim = takes_numpy_names(fn)

    @functools.wraps(fn)
    def with_numpy_names(*args, **kwargs):
        return fn(*args, **numpy_kwargs(fn.__name__, kwargs, keepdim))
    return with_numpy_names


def norm_dims(dim, ndim: int, op: str) -> tuple | None:
    """Normalise an int / sequence / None ``dim`` argument to a sorted tuple of axes."""
    if dim is None:
        return None
    if isinstance(dim, int):
        return (_wrap_dim(dim, ndim, op),)
    dims = tuple(_wrap_dim(d, ndim, op) for d in dim)
    seen: set = set()
    for d in dims:   # ATen's dim_list_to_bitset names the first wrapped dim seen twice
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return tuple(sorted(dims))


def along_key(xp, index, dim: int) -> tuple:
    """The advanced key that reads ``x[..., index[i, j, ...], ...]`` at position (i, j, ...)."""
    nd = index.ndim
    key = []
    for d, n in enumerate(index.shape):
        key.append(index if d == dim else _grid(xp, n, nd - d - 1))
    return tuple(key)


_GRIDS: dict = {}   # (n, trailing ones) -> a read-only numpy arange column, shared by every call


def _grid(xp, n: int, ones: int):
    """``arange(n)`` shaped to broadcast along one dim of an index; on numpy cached (at most 256),
    since a small gather's own arange and reshape cost more than its fancy indexing (0.65 vs 1.0 us)."""
    if xp is not np:
        return xp.arange(n).reshape((-1,) + (1,) * ones)
    grid = _GRIDS.get((n, ones))
    if grid is None:
        if len(_GRIDS) >= 256:
            _GRIDS.clear()
        grid = np.arange(n).reshape((-1,) + (1,) * ones)
        grid.flags.writeable = False
        _GRIDS[(n, ones)] = grid
    return grid


def channels_last_order(shape: tuple, strides: tuple) -> tuple | None:
    """The dims in memory order (outermost first) when a 4-D or 5-D array's strides make PyTorch's
    ``suggest_memory_format`` say channels-last (``is_channels_last_strides_2d``/``_3d``: the channel
    stride smallest, then the spatial dims inner to outer, then the batch; ambiguous size-1 cases
    count as contiguous), else None. Ops whose result takes its inputs' memory format (``cat``) read it."""
    nd = len(shape)
    if nd not in (4, 5) or strides[1] == 0:
        return None
    order = (1, 3, 2, 0) if nd == 4 else (1, 4, 3, 2, 0)
    low = 0
    for d in order:
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return None
        low = strides[d] * shape[d] if shape[d] > 1 else strides[d]
    return order[::-1]
