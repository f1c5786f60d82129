"""The factory ops: tensors made from params alone (``full``, ``arange``) or from host data.

Declared below the dispatcher because the dispatcher itself makes tensors from array-like
operands (``add(t, [1, 2])``); the public functions that apply them are in ``creation.py``,
the random ops in ``random.py``. ``host_array`` turns Python data into the host array a
``TENSOR`` op places on a device, with PyTorch's dtype inference.
"""
from __future__ import annotations

import math
from itertools import chain

import numpy as np

from ..base import dtype as _dtype
from ..base.meta import has_data
from ..base.runtime import fills_uninitialized
from .cpu_stream import fma
from ..base.dtype import from_np, get_default_dtype
from .registry import Op
from .tensor import Tensor

__all__ = ["FULL", "EMPTY", "ARANGE", "LINSPACE", "LOGSPACE", "EYE", "TENSOR", "FROM_DLPACK", "host_array"]


def _onnx_arange(g, *, start, end, step, dtype, device):
    """``Range``: ints (and sizes that follow dynamic axes) in int64, floats in float64, then ``dtype``."""
    bounds = (start, end, step)
    if any(isinstance(b, float) for b in bounds):
        return g.cast(g.op("Range", *[g.const(float(b), "float64") for b in bounds]), dtype)
    return g.cast(g.op("Range", *[g.scalar_dim(b) for b in bounds]), dtype)


def _full(xp, *, size, fill_value, dtype, device):
    if type(fill_value) is int and not fill_value:
        return xp.zeros(size, dtype.np)  # calloc'd: several times faster than a fill (zeros_like runs in vjps)
    dt = dtype.np
    if xp is np and dt.kind == "f" and (type(fill_value) is int or type(fill_value) is float):
        out = np.empty(size, dt)   # numpy's full is a Python wrapper: ~2 us more for a small tensor
        out.fill(fill_value)
        return out
    return xp.full(size, fill_value, dt)


def _arange(xp, *, start, end, step, dtype, device):
    if dtype.is_floating_point:  # PyTorch's float ranges: start + i * step, computed in double
        return (xp.arange(max(0, math.ceil((end - start) / step)), dtype="float64") * step + start).astype(dtype.np)
    return xp.arange(start, end, step, dtype=dtype.np)


def _full_aten(shapes, params) -> str:
    """PyTorch's factory for a fill of ``fill_value``: ``zeros``, ``ones`` or ``full``."""
    v = params.get("fill_value")
    return "zeros(empty, zero_)" if v == 0 else "ones(empty, fill_)" if v == 1 else "full(empty, fill_)"


FULL = Op("full", _full, kind="factory",
          onnx=lambda g, *, size, fill_value, dtype, device: g.full(size, fill_value, dtype), aten=_full_aten)
def _empty(xp, *, size, dtype, device):
    """Uninitialised memory; under ``use_deterministic_algorithms(True)`` PyTorch's known fill instead
    (``torch.utils.deterministic.fill_uninitialized_memory``): NaN for floating and complex dtypes (a
    zero imaginary part), the maximum of an integer dtype, True for bool."""
    if not fills_uninitialized():
        return xp.empty(size, dtype.np)
    if dtype.is_floating_point or dtype.is_complex:
        value = math.nan
    else:
        value = True if dtype.np == np.bool_ else np.iinfo(dtype.np).max
    return xp.full(size, value, dtype.np)


EMPTY = Op("empty", _empty, kind="factory",
           onnx=lambda g, *, size, dtype, device: g.full(size, 0, dtype))
ARANGE = Op("arange", _arange, kind="factory", onnx=_onnx_arange)
def _linspace(xp, *, start, end, steps, dtype, device):
    """PyTorch's float ``linspace``: a step in the dtype, the first half ``start + step * i`` and the
    second ``end - step * (steps - 1 - i)``, each an FMA (``cpu_stream.fma``), so the points
    are PyTorch's bit for bit; other dtypes from a double ``linspace``."""
    dt = np.dtype(dtype.np)
    if dt not in (np.float32, np.float64) or steps < 2 or not has_data(xp):
        return xp.linspace(start, end, steps, dtype="float64").astype(dt)
    first, last = dt.type(start), dt.type(end)
    step = (last - first) / dt.type(steps - 1)
    i = np.arange(steps)
    down = i >= steps // 2
    return xp.asarray(fma(np.where(down, -step, step), np.where(down, steps - 1 - i, i).astype(dt),
                          np.where(down, last, first)))


LINSPACE = Op("linspace", _linspace, kind="factory")
LOGSPACE = Op("logspace", lambda xp, *, start, end, steps, base, dtype, device:
              xp.logspace(start, end, steps, base=base, dtype="float64").astype(dtype.np), kind="factory")
EYE = Op("eye", lambda xp, *, n, m, dtype, device: xp.eye(n, m, dtype=dtype.np), kind="factory")
# host data (an array the public function prepared) placed on the device, shared where it can be
TENSOR = Op("tensor", lambda xp, *, data, device: xp.asarray(data), kind="factory", aten="lift_fresh")
FROM_DLPACK = Op("from_dlpack", lambda xp, *, ext, device: xp.from_dlpack(ext), kind="factory")


def host_array(data, dtype) -> np.ndarray:
    """A host copy of ``data`` (nested lists, numbers, numpy arrays, tensors) in ``dtype``, or in
    PyTorch's dtype for it when ``dtype`` is None."""
    data = _to_array(data)
    try:
        arr = (np.array(data, copy=True) if dtype is None else
               _dtype.astype(np.array(data, dtype=np.float64 if dtype is _dtype.bfloat16 else dtype.np), dtype))
    except (ValueError, TypeError) as e:
        ragged = _ragged(data) if isinstance(e, ValueError) else None
        if ragged is not None:
            raise ragged from None
        raise (ValueError if isinstance(e, ValueError) else TypeError)(f"tensor(): {e}") from None
    if dtype is None and not isinstance(data, np.ndarray):
        arr = _inferred(arr, data)
    if arr.dtype not in _dtype._BY_NP:
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        elif arr.dtype.kind == "U" or arr.dtype.kind == "O":
            raise TypeError(f"tensor(): can't convert data of numpy dtype {arr.dtype}")
    from_np(arr.dtype)
    return arr


_SEQ = (list, tuple, np.ndarray)


def _ragged(data) -> Exception | None:
    """PyTorch's error for nested data of no one shape, None if it has one. As PyTorch, the shape
    is taken from the first element at each depth and every element is checked against it."""
    shape = []
    x = data
    while isinstance(x, _SEQ):
        shape.append(len(x))
        if not len(x):
            break
        x = x[0]

    def check(x, d):
        if d == len(shape):
            if isinstance(x, _SEQ):
                return TypeError(f"tensor(): a sequence at dim {d} where a number was expected "
                                 f"(the first elements give shape {shape})")
            return None
        if not isinstance(x, _SEQ):
            return TypeError(f"tensor(): not a sequence: {type(x).__name__} at dim {d} "
                             f"(the first elements give shape {shape})")
        if len(x) != shape[d]:
            return ValueError(f"tensor(): expected sequence of length {shape[d]} at dim {d} (got {len(x)})")
        for e in x:
            err = check(e, d + 1)
            if err is not None:
                return err
        return None

    return check(data, 0)


def _inferred(arr: np.ndarray, data) -> np.ndarray:
    """PyTorch's dtype for Python data (numpy's guess ``arr``): floats -> default, complex -> the
    default's complex dtype, ints -> int64."""
    kind = arr.dtype.kind
    if kind == "f" or kind == "c":
        return arr.astype(_floating_dtype(data, kind).np, copy=False)
    if kind in "iu":
        # numpy guesses uint64 past int64's range: converting again raises as PyTorch does
        return arr if arr.dtype == np.int64 else np.array(data, dtype=np.int64)
    if kind == "O":
        flat = data
        while isinstance(flat, (list, tuple)) and flat:
            flat = flat[0]
        raise TypeError(f"tensor(): could not infer a dtype for {type(flat).__name__} elements")
    return arr


_PY_NUMBERS = frozenset((float, int, bool, complex))
_NESTED = frozenset((list, tuple))


def _carried(data, found: list) -> bool:
    """Append to ``found`` the dtype each item of nested ``data`` carries (numpy scalars and arrays,
    tensors, array-likes such as a pandas Series); True when a Python number is among the items.
    Walked a depth at a time, so nests of one kind of item cost a type set per depth."""
    level, plain = (data if type(data) in _NESTED else [data]), False
    while level:
        types = set(map(type, level))
        if types <= _NESTED:
            level = list(chain.from_iterable(level))
            continue
        if types <= _PY_NUMBERS:
            return True
        deeper = []
        for x in level:
            t = type(x)
            if t in _NESTED:
                deeper.extend(x)
            elif t in _PY_NUMBERS:
                plain = True
            else:
                found.append(from_np(x._data.dtype if isinstance(x, Tensor) else np.asarray(x).dtype))
        level = deeper
    return plain


def _floating_dtype(data, kind: str):
    """PyTorch's dtype for floating (``kind`` "f") or complex ("c") data, as its ``infer_scalar_type``:
    a Python number takes the default dtype, a numpy scalar or array or a tensor keeps its own (a
    pandas Series' float64 values, ``np.float64`` metrics), and the items' dtypes promote."""
    found: list = []
    plain = _carried(data, found)
    default = get_default_dtype() if kind == "f" else _dtype.default_complex_dtype()
    if not found:
        return default
    result = default if plain else found[0]
    for d in found:
        result = _dtype.promote_types(result, d)
    if kind == "c" and not result.is_complex:   # a Python complex among floating numpy items
        result = _dtype.promote_types(result, default)
    return result


def _to_array(data):
    if isinstance(data, Tensor):
        return data.__array__()
    if type(data) in _NESTED and _holds_tensor(data):
        return _numbers(data)
    return data


def _holds_tensor(data) -> bool:
    """Whether nested lists/tuples hold a tensor at any depth, walked a depth at a time (a type set each)."""
    level = data
    while level:
        types = set(map(type, level))
        if any(issubclass(t, Tensor) for t in types):
            return True
        level = list(chain.from_iterable(x for x in level if type(x) in _NESTED))
    return False


def _numbers(data):
    """Nested data with each tensor in it read as one number, as PyTorch reads a tensor among a list's items
    (``torch.tensor([torch.ones(2), torch.zeros(2)])`` is its ValueError, not a stack)."""
    if isinstance(data, Tensor):
        if data.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return data.__array__().reshape(())
    if type(data) in _NESTED:
        return [_numbers(x) for x in data]
    return data
