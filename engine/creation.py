"""Tensor creation: from data, filled, ranges and random."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _dtype
from ._dtype import from_np, get_default_dtype
from .device import CPU, device as Device
from .dispatch import STATE as _DISPATCH
from ._runtime import DEFAULT_DEVICE
from .random import rng
from .tensor import Tensor

__all__ = ["tensor", "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones", "full", "empty",
           "zeros_like", "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace",
           "eye", "rand", "randn", "randint", "randperm", "normal", "bernoulli", "rand_like",
           "randn_like", "randint_like", "scalar_tensor"]


def _infer_np_dtype(data):
    """PyTorch's inference: floats -> default dtype, ints -> int64, bools -> bool."""
    if isinstance(data, np.ndarray):
        return None
    flat = data
    while isinstance(flat, (list, tuple)) and flat:
        flat = flat[0]
    arr = np.asarray(data)
    if arr.dtype.kind == "f":
        return get_default_dtype().np
    if arr.dtype.kind in "iu":
        return np.int64
    if arr.dtype.kind == "O":
        raise TypeError(f"tensor(): could not infer a dtype for {type(flat).__name__} elements")
    return None


def _place(arr, dev: Device) -> Tensor:
    if dev is not CPU:
        arr = dev.xp.asarray(arr)
    return Tensor._wrap(arr, False, None, 0, [0], dev)


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _to_array(data, dtype):
    if isinstance(data, Tensor):
        return data.detach().__array__()
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
        data = [_to_array(x, None) for x in data]
    return data


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Copy ``data`` (nested lists, numbers, numpy arrays, tensors) into a new tensor."""
    data = _to_array(data, dtype)
    np_dtype = dtype.np if dtype is not None else _infer_np_dtype(data)
    try:
        arr = np.array(data, dtype=np_dtype, copy=True)
    except (ValueError, TypeError) as e:
        raise (ValueError if isinstance(e, ValueError) else TypeError)(f"tensor(): {e}") from None
    if arr.dtype not in _dtype._BY_NP:
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        elif arr.dtype.kind == "U" or arr.dtype.kind == "O":
            raise TypeError(f"tensor(): can't convert data of numpy dtype {arr.dtype}")
    from_np(arr.dtype)
    return _finish(_place(arr, _dev(device)), requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Share memory with ``data`` where possible (numpy arrays, tensors)."""
    if isinstance(data, Tensor):
        return data.to(*(a for a in (device, dtype) if a is not None))
    if isinstance(data, np.ndarray) and _dev(device) is CPU:
        arr = data if dtype is None else data.astype(dtype.np, copy=False)
        from_np(arr.dtype)
        return Tensor._wrap(arr, False, None, 0, [0], CPU)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr: np.ndarray) -> Tensor:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    from_np(arr.dtype)
    return Tensor._wrap(arr, False, None, 0, [0], CPU)


def from_dlpack(ext) -> Tensor:
    """Zero-copy import of any DLPack-capable array (numpy, cupy, PyTorch, JAX)."""
    dev_type = ext.__dlpack_device__()[0] if hasattr(ext, "__dlpack_device__") else 1
    if dev_type == 1:
        arr = np.from_dlpack(ext)
        return Tensor._wrap(arr, False, None, 0, [0], CPU)
    dev = Device("cuda", ext.__dlpack_device__()[1])
    return Tensor._wrap(dev.xp.from_dlpack(ext), False, None, 0, [0], dev)


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:
        if not isinstance(s, numbers.Integral):
            raise TypeError(f"size must be a sequence of ints, got element {s!r} of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return tuple(int(s) for s in size)


def _dev(device) -> Device:
    return Device(device) if device is not None else DEFAULT_DEVICE[0]


def _fill(size, value, dtype, device, requires_grad):
    dev = _dev(device)
    dt = dtype or get_default_dtype()
    return _finish(Tensor._wrap(dev.xp.full(_size(size), value, dt.np), False, None, 0, [0], dev), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    return _fill(size, 0, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    return _fill(size, 1, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    dev = _dev(device)
    dt = dtype or get_default_dtype()
    return _finish(Tensor._wrap(dev.xp.empty(_size(size), dt.np), False, None, 0, [0], dev), requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if dtype is None:
        dtype = _dtype.scalar_dtype(fill_value)
    return _fill((size,) if isinstance(size, int) else tuple(size), fill_value, dtype, device, requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return full((), s, dtype=dtype or get_default_dtype(), device=device, requires_grad=requires_grad)


def _like(x: Tensor, dtype, device):
    return (dtype or x.dtype), (device if device is not None else x.device)


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return _fill(input.shape, 0, dt, dev, requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return _fill(input.shape, 1, dt, dev, requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return _fill(input.shape, fill_value, dt, dev, requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return empty(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    vals = [float(v) if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    if dtype is None:
        dtype = get_default_dtype() if any(isinstance(v, float) for v in vals) else _dtype.int64
    start, end, step = vals
    n = max(0, math.ceil((end - start) / step))
    dev = _dev(device)
    arr = (dev.xp.arange(n, dtype=np.float64) * step + start).astype(dtype.np) if dtype.is_floating_point \
        else dev.xp.arange(start, end, step, dtype=dtype.np)
    return _finish(Tensor._wrap(arr, False, None, 0, [0], dev), requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt = dtype or get_default_dtype()
    dev = _dev(device)
    arr = dev.xp.linspace(float(start), float(end), int(steps), dtype=np.float64).astype(dt.np)
    return _finish(Tensor._wrap(arr, False, None, 0, [0], dev), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    dt = dtype or get_default_dtype()
    dev = _dev(device)
    arr = dev.xp.logspace(float(start), float(end), int(steps), base=base, dtype=np.float64).astype(dt.np)
    return _finish(Tensor._wrap(arr, False, None, 0, [0], dev), requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    dt = dtype or get_default_dtype()
    dev = _dev(device)
    return _finish(Tensor._wrap(dev.xp.eye(n, m, dtype=dt.np), False, None, 0, [0], dev), requires_grad)


def _random_hook(name: str, generator) -> None:
    # a capture (tapelab.graphs) rejects draws its replay would repeat; nothing to do otherwise
    if _DISPATCH.modes:
        for mode in _DISPATCH.modes:
            hook = getattr(mode, "random_op", None)
            if hook is not None:
                hook(name, generator)


def _random(draw, shape, dtype, device, requires_grad):
    """``draw()`` (host numbers of ``shape``) on ``device``; meta tensors draw nothing, as PyTorch's."""
    dt, dev = dtype or get_default_dtype(), _dev(device)
    if dev.type == "meta":
        return _finish(Tensor._wrap(dev.xp.empty(tuple(shape), dt.np), False, None, 0, [0], dev), requires_grad)
    return _finish(_place(np.asarray(draw()).astype(dt.np, copy=False), dev), requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    _random_hook("rand", generator)
    shape = _size(size)
    return _random(lambda: rng(generator).random(shape), shape, dtype, device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    _random_hook("randn", generator)
    shape = _size(size)
    return _random(lambda: rng(generator).standard_normal(shape), shape, dtype, device, requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    _random_hook("randint", generator)
    shape = _size((size,) if isinstance(size, int) else tuple(size))
    return _random(lambda: rng(generator).integers(low, high, shape), shape, dtype or _dtype.int64, device,
                   requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    _random_hook("randperm", generator)
    return _random(lambda: rng(generator).permutation(int(n)), (int(n),), dtype or _dtype.int64, device,
                   requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Samples of N(mean, std); mean and std may be tensors (broadcast) or numbers."""
    if size is None:
        size = np.broadcast_shapes(tuple(np.shape(mean)), tuple(np.shape(std)))
    ref = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    if dtype is None and ref is not None:
        dtype = ref.dtype
    if device is None and ref is not None:
        device = ref.device
    _random_hook("normal", generator)
    shape = _size(tuple(size))

    def draw():
        m = mean.detach().__array__() if isinstance(mean, Tensor) else mean
        s = std.detach().__array__() if isinstance(std, Tensor) else std
        if np.any(np.asarray(s) < 0):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        return rng(generator).normal(m, s, shape)
    return _random(draw, shape, dtype, device, requires_grad)


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    _random_hook("bernoulli (dropout)", generator)

    def draw():
        probs = input.detach().__array__() if p is None else np.full(input.shape, p)
        if np.any((probs < 0) | (probs > 1)):
            raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
        return rng(generator).random(probs.shape) < probs
    return _random(draw, tuple(input.shape), input.dtype, input.device, False)


def rand_like(input, *, dtype=None, device=None, requires_grad: bool = False, generator=None) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return rand(input.shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad: bool = False, generator=None) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return randn(input.shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


def randint_like(input, low, high=None, *, dtype=None, device=None, generator=None) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dt, device=dev)
