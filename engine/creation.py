"""Tensor creation: from data, filled, ranges and random.

Every function here ends in ``apply`` of a factory op (``kind="factory"``: ``full``,
``empty``, ``arange``, ``tensor`` ...) or a random op (``kind="random"``: ``rand``,
``randn``, ``bernoulli`` ...), so modes see tensors being born. Their params carry the
``dtype`` and ``device`` (see ``dispatch``); random forwards draw on the host from the
param ``generator`` and draw nothing on the meta device, as PyTorch's.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .base import dtype as _dtype
from .base.dtype import from_np, get_default_dtype
from .base.meta import has_data
from .base.runtime import DEFAULT_DEVICE
from .base.device import CPU, device as Device
from .dispatch import apply
from .ops.registry import Op
from .random import rng
from .tensor import Tensor

__all__ = ["tensor", "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones", "full", "empty",
           "zeros_like", "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace",
           "eye", "rand", "randn", "randint", "randperm", "normal", "bernoulli", "rand_like",
           "randn_like", "randint_like", "scalar_tensor"]


# ---------------------------------------------------------------- the factory and random ops
def _full(xp, *, size, fill_value, dtype, device):
    if type(fill_value) is int and not fill_value:
        return xp.zeros(size, dtype.np)  # calloc'd: several times faster than a fill (zeros_like runs in vjps)
    return xp.full(size, fill_value, dtype.np)


def _arange(xp, *, start, end, step, dtype, device):
    if dtype.is_floating_point:  # PyTorch's float ranges: start + i * step, computed in double
        return (xp.arange(max(0, math.ceil((end - start) / step)), dtype="float64") * step + start).astype(dtype.np)
    return xp.arange(start, end, step, dtype=dtype.np)


def _draw(xp, draw, size, dtype):
    """``draw()`` (host numbers of ``size``) on ``xp``'s device; the meta device draws nothing."""
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    return xp.asarray(draw().astype(dtype.np, copy=False))


def _normal(xp, mean, std, *, size, dtype, device, generator):
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    if bool((xp.asarray(std) < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    # numpy's normal(mean, std) is exactly mean + std * standard_normal(), in double
    return (mean + std * xp.asarray(rng(generator).standard_normal(size))).astype(dtype.np)


def _bernoulli(xp, probs, *, p, generator):
    if not has_data(xp):
        return xp.empty(probs.shape, probs.dtype)
    if p is None and bool(((probs < 0) | (probs > 1)).any()):
        raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
    return (xp.asarray(rng(generator).random(probs.shape)) < (probs if p is None else p)).astype(probs.dtype)


FULL = Op("full", _full, kind="factory")
EMPTY = Op("empty", lambda xp, *, size, dtype, device: xp.empty(size, dtype.np), kind="factory")
ARANGE = Op("arange", _arange, kind="factory")
LINSPACE = Op("linspace", lambda xp, *, start, end, steps, dtype, device:
              xp.linspace(start, end, steps, dtype="float64").astype(dtype.np), kind="factory")
LOGSPACE = Op("logspace", lambda xp, *, start, end, steps, base, dtype, device:
              xp.logspace(start, end, steps, base=base, dtype="float64").astype(dtype.np), kind="factory")
EYE = Op("eye", lambda xp, *, n, m, dtype, device: xp.eye(n, m, dtype=dtype.np), kind="factory")
# host data (an array the public function prepared) placed on the device, shared where it can be
TENSOR = Op("tensor", lambda xp, *, data, device: xp.asarray(data), kind="factory")
FROM_DLPACK = Op("from_dlpack", lambda xp, *, ext, device: xp.from_dlpack(ext), kind="factory")

RAND = Op("rand", lambda xp, *, size, dtype, device, generator:
          _draw(xp, lambda: rng(generator).random(size), size, dtype), kind="random")
RANDN = Op("randn", lambda xp, *, size, dtype, device, generator:
           _draw(xp, lambda: rng(generator).standard_normal(size), size, dtype), kind="random")
RANDINT = Op("randint", lambda xp, *, low, high, size, dtype, device, generator:
             _draw(xp, lambda: rng(generator).integers(low, high, size), size, dtype), kind="random")
RANDPERM = Op("randperm", lambda xp, *, n, dtype, device, generator:
              _draw(xp, lambda: rng(generator).permutation(n), (n,), dtype), kind="random")
NORMAL = Op("normal", _normal, kind="random")
BERNOULLI = Op("bernoulli", _bernoulli, kind="random")


# ---------------------------------------------------------------- the public functions
def _inferred(arr: np.ndarray, data) -> np.ndarray:
    """PyTorch's dtype for Python data (numpy's guess ``arr``): floats -> default, ints -> int64."""
    kind = arr.dtype.kind
    if kind == "f":
        return arr.astype(get_default_dtype().np, copy=False)
    if kind in "iu":
        # numpy guesses uint64 past int64's range: converting again raises as PyTorch does
        return arr if arr.dtype == np.int64 else np.array(data, dtype=np.int64)
    if kind == "O":
        flat = data
        while isinstance(flat, (list, tuple)) and flat:
            flat = flat[0]
        raise TypeError(f"tensor(): could not infer a dtype for {type(flat).__name__} elements")
    return arr


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _to_array(data):
    if isinstance(data, Tensor):
        return data.__array__()
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
        data = [_to_array(x) for x in data]
    return data


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Copy ``data`` (nested lists, numbers, numpy arrays, tensors) into a new tensor."""
    data = _to_array(data)
    try:
        arr = np.array(data, dtype=None if dtype is None else dtype.np, copy=True)
    except (ValueError, TypeError) as e:
        raise (ValueError if isinstance(e, ValueError) else TypeError)(f"tensor(): {e}") from None
    if dtype is None and not isinstance(data, np.ndarray):
        arr = _inferred(arr, data)
    if arr.dtype not in _dtype._BY_NP:
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        elif arr.dtype.kind == "U" or arr.dtype.kind == "O":
            raise TypeError(f"tensor(): can't convert data of numpy dtype {arr.dtype}")
    from_np(arr.dtype)
    return _finish(apply(TENSOR, data=arr, device=_dev(device)), requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Share memory with ``data`` where possible (numpy arrays, tensors)."""
    if isinstance(data, Tensor):
        return data.to(*(a for a in (device, dtype) if a is not None))
    if isinstance(data, np.ndarray) and _dev(device) is CPU:
        arr = data if dtype is None else data.astype(dtype.np, copy=False)
        from_np(arr.dtype)
        return apply(TENSOR, data=arr, device=CPU)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr: np.ndarray) -> Tensor:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    from_np(arr.dtype)
    return apply(TENSOR, data=arr, device=CPU)


def from_dlpack(ext) -> Tensor:
    """Zero-copy import of any DLPack-capable array (numpy, cupy, PyTorch, JAX)."""
    dev_type = ext.__dlpack_device__()[0] if hasattr(ext, "__dlpack_device__") else 1
    dev = CPU if dev_type == 1 else Device("cuda", ext.__dlpack_device__()[1])
    return apply(FROM_DLPACK, ext=ext, device=dev)


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:
        if type(s) is not int and not isinstance(s, numbers.Integral):
            raise TypeError(f"size must be a sequence of ints, got element {s!r} of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return tuple(map(int, size))


def _dev(device) -> Device:
    return Device(device) if device is not None else DEFAULT_DEVICE[0]


def _fill(size: tuple, value, dtype, dev: Device, requires_grad: bool) -> Tensor:
    return _finish(apply(FULL, size=size, fill_value=value, dtype=dtype or get_default_dtype(), device=dev),
                   requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    return _fill(_size(size), 0, dtype, _dev(device), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    return _fill(_size(size), 1, dtype, _dev(device), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    return _finish(apply(EMPTY, size=_size(size), dtype=dtype or get_default_dtype(), device=_dev(device)),
                   requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if dtype is None:
        dtype = _dtype.scalar_dtype(fill_value)
    return _fill(_size((size,) if isinstance(size, int) else tuple(size)), fill_value, dtype, _dev(device),
                 requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return full((), s, dtype=dtype or get_default_dtype(), device=device, requires_grad=requires_grad)


def _like(x: Tensor, dtype, device) -> tuple:
    """``x``'s shape, and the dtype and device of a tensor like it (no size checks: x's shape is valid)."""
    return x._data.shape, (dtype or x.dtype), (x._device if device is None else Device(device))


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    size, dt, dev = _like(input, dtype, device)
    return _fill(size, 0, dt, dev, requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    size, dt, dev = _like(input, dtype, device)
    return _fill(size, 1, dt, dev, requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    size, dt, dev = _like(input, dtype, device)
    return _fill(size, fill_value, dt, dev, requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    size, dt, dev = _like(input, dtype, device)
    return _finish(apply(EMPTY, size=size, dtype=dt, device=dev), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    vals = [float(v) if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    if dtype is None:
        dtype = get_default_dtype() if any(isinstance(v, float) for v in vals) else _dtype.int64
    start, end, step = vals
    return _finish(apply(ARANGE, start=start, end=end, step=step, dtype=dtype, device=_dev(device)), requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(apply(LINSPACE, start=float(start), end=float(end), steps=int(steps),
                         dtype=dtype or get_default_dtype(), device=_dev(device)), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    return _finish(apply(LOGSPACE, start=float(start), end=float(end), steps=int(steps), base=base,
                         dtype=dtype or get_default_dtype(), device=_dev(device)), requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(apply(EYE, n=n, m=m, dtype=dtype or get_default_dtype(), device=_dev(device)), requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(apply(RAND, size=_size(size), dtype=dtype or get_default_dtype(), device=_dev(device),
                         generator=generator), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(apply(RANDN, size=_size(size), dtype=dtype or get_default_dtype(), device=_dev(device),
                         generator=generator), requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return _finish(apply(RANDINT, low=low, high=high, size=_size((size,) if isinstance(size, int) else tuple(size)),
                         dtype=dtype or _dtype.int64, device=_dev(device), generator=generator), requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(apply(RANDPERM, n=int(n), dtype=dtype or _dtype.int64, device=_dev(device), generator=generator),
                   requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Samples of N(mean, std); mean and std may be tensors (broadcast) or numbers."""
    if size is None:
        size = np.broadcast_shapes(tuple(np.shape(mean)), tuple(np.shape(std)))
    ref = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    if dtype is None and ref is not None:
        dtype = ref.dtype
    dev = _dev(device if device is not None or ref is None else ref.device)
    # tensor parameters are inputs of the op (its device is theirs), values only: no graph
    mean, std = (a.detach().to(dev) if isinstance(a, Tensor) else a for a in (mean, std))
    return _finish(apply(NORMAL, mean, std, size=_size(tuple(size)), dtype=dtype or get_default_dtype(), device=dev,
                         generator=generator), requires_grad)


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    if p is not None and (p < 0 or p > 1):
        raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
    return apply(BERNOULLI, input, p=p, generator=generator)


def rand_like(input, *, dtype=None, device=None, requires_grad: bool = False, generator=None) -> Tensor:
    size, dt, dev = _like(input, dtype, device)
    return _finish(apply(RAND, size=size, dtype=dt, device=dev, generator=generator), requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad: bool = False, generator=None) -> Tensor:
    size, dt, dev = _like(input, dtype, device)
    return _finish(apply(RANDN, size=size, dtype=dt, device=dev, generator=generator), requires_grad)


def randint_like(input, low, high=None, *, dtype=None, device=None, generator=None) -> Tensor:
    size, dt, dev = _like(input, dtype, device)
    return randint(low, high, size, generator=generator, dtype=dt, device=dev)
