"""Dtype and device conversion (``Tensor.to``), differentiable across both."""
from __future__ import annotations

import numpy as np

from ..base import backend as _backend, dtype as _dtype
from ..base.grad_mode import no_grad
from ..core.creation import from_numpy
from ..base.device import device as Device
from ..core.dispatch import apply
from ..core.registry import NONE, Op
from ._util import Tensor

__all__ = ["to"]
METHODS = ()


def _cast_fwd(xp, x, *, dtype):
    return _dtype.astype(x, dtype)


def _cast_vjp(g, out, x, *, dtype):
    # complex to real keeps the real parts (PyTorch warns in the forward); a real input's gradient
    # is the real part of a complex one
    if g._data.dtype.kind == "c" and x._data.dtype.kind != "c":
        g = g.real
    return (g.to(x.dtype),)


cast = Op("cast", _cast_fwd, _cast_vjp, saves=NONE, elementwise=True, aliases=("to",),
          onnx=lambda g, x, *, dtype: g.cast(x, dtype), aten="to(_to_copy(empty_strided, copy_))")


def _move_fwd(xp, x, *, device):
    return _backend.transfer(x, device)


def _move(x: Tensor, dev: Device) -> Tensor:
    # the forward runs on the source device's namespace; the result lives on ``dev``
    if dev.type == "cuda" and x._data.dtype is _dtype.BFLOAT16_NP:
        raise _dtype.bfloat16_on_cuda(f"to({dev}) of a bfloat16 tensor of shape {list(x.shape)}")
    out = apply(move, x, device=dev)
    out._device = dev
    return out


move = Op("to_device", _move_fwd, lambda g, out, x, *, device: (g.to(x.device),), saves=NONE,
          onnx=lambda g, x, *, device: x, aten="to(_to_copy(empty_strided, copy_))")


def _parse_to_args(args, kwargs):
    dev = kwargs.pop("device", None)
    dt = _dtype.canonical(kwargs.pop("dtype", None))
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for i, a in enumerate(args):
        if a is None and i < 2:   # to(None) / to(None, dtype): the device (and dtype) left as they are
            continue
        if isinstance(a, _dtype.dtype) or (isinstance(a, type) and a in (bool, int, float, complex)):
            dt = _dtype.canonical(a)
        elif isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, (str, Device)) or (type(a) is int and i == 0):
            dev = Device(a)
        elif isinstance(a, bool):
            pass
        else:
            raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
    return (Device(dev) if dev is not None else None), dt, copy


def to(x: Tensor, *args, **kwargs) -> Tensor:
    """Return ``x`` on the requested device and dtype (``x`` itself when nothing changes)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], _dtype.dtype):  # the common .to(dtype)
        return x if args[0].np == x._data.dtype else apply(cast, x, dtype=args[0])
    dev, dt, copy = _parse_to_args(args, kwargs)
    out = x
    if dev is not None and dev is not x._device:
        out = _move(out, dev)
    if dt is not None and dt.np != out._data.dtype:
        out = apply(cast, out, dtype=dt)
    if out is x and copy:
        out = x.clone()
    return out


def apply_(x: Tensor, callable) -> Tensor:
    """``Tensor.apply_``: ``callable`` on each element, in place (cpu only, and slow, as PyTorch's)."""
    return _elementwise_python("apply_", x, callable)


def map_(x: Tensor, other: Tensor, callable) -> Tensor:
    """``Tensor.map_``: ``callable(a, b)`` for each element of ``x`` and of ``other`` broadcast to it,
    in place (cpu only)."""
    return _elementwise_python("map_", x, callable, other)


def _elementwise_python(name: str, x: Tensor, fn, *others) -> Tensor:
    if any(t.device.type != "cpu" for t in (x,) + others):
        raise TypeError(f"{name} is only implemented on CPU tensors")
    arr = x.numpy(force=True)
    args = [np.broadcast_to(o.numpy(force=True), arr.shape) for o in others]
    values = np.vectorize(fn, otypes=[arr.dtype])(arr, *args) if arr.size else arr
    with no_grad():
        x.copy_(from_numpy(np.ascontiguousarray(values)))
    return x


OPERATORS = {"to": to, "apply_": apply_, "map_": map_}
COMPOSITES = {"apply_": "a Python callable per element, then copy_", "map_": "a Python callable per element pair, then copy_"}   # Tensor.to: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``
