"""Devices and their array namespaces: numpy for cpu, cupy for cuda, shapes only for meta.

Op forwards receive ``xp`` and never import numpy or cupy themselves; everything a
backend does differently lives on its ``Device`` object.
"""
from __future__ import annotations

import threading

import numpy as np

from .meta import META_XP

__all__ = ["device", "cuda_available", "cuda_device_count", "cuda_unavailable_reason", "require_cuda"]


# PyTorch's device types: each names a device (libraries compare with ``device("mps")``); tensors
# live on cpu, cuda and meta only, and the others refuse when one is made there
_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla",
          "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class device:
    """``tapelab.device('cpu')`` / ``device('cuda:0')``; interned, so compare with ``is``."""

    __slots__ = ("type", "index", "_xp", "_name")
    _interned: dict = {}

    def __new__(cls, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            return spec
        if isinstance(spec, int) and not isinstance(spec, bool):   # an index of the accelerator, as PyTorch's
            if spec < 0:
                raise RuntimeError(f"Device index must not be negative, got {spec}")
            if not cuda_available():
                raise RuntimeError("Cannot access accelerator device when none is available.")
            spec, index = "cuda", spec
        if not isinstance(spec, str):
            raise TypeError(f"device(): expected a string like 'cpu' or 'cuda:0', got {type(spec).__name__}")
        kind, _, idx = spec.partition(":")
        if idx:
            index = int(idx)
        if kind not in _TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of device string: {spec}")
        if kind == "cuda" and index is None:
            index = 0
        if kind in ("cpu", "meta"):
            index = None
        key = (kind, index)
        dev = cls._interned.get(key)
        if dev is None:
            dev = object.__new__(cls)
            dev.type, dev.index, dev._xp = kind, index, (np if kind == "cpu" else META_XP if kind == "meta" else None)
            dev._name = kind if index is None else f"{kind}:{index}"
            cls._interned[key] = dev
        return dev

    @property
    def xp(self):
        """The array namespace of this device (numpy or cupy)."""
        xp = self._xp
        if xp is None:
            if self.type == "xpu":   # as a PyTorch built without XPU answers every tensor made or moved there
                raise AssertionError("Torch not compiled with XPU enabled")
            if self.type != "cuda":
                raise NotImplementedError(f"tapelab has no {self.type} backend: tensors live on cpu, cuda or meta, "
                                          f"not on {self}")
            xp = self._xp = _load_cupy(self)
        return xp

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self._name

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:   # not a device type ("npu"): another device, as in PyTorch
                return False
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))

    # ``with tapelab.device('meta'):`` makes this the calling thread's default device of
    # factories and module construction inside the block, and restores the previous default on
    # exit (even on error), as ``torch.device``'s context manager does. The device objects are
    # interned, so the saved defaults live on a per-thread stack, not on the object: nested and
    # re-entered blocks restore in order.
    def __enter__(self):
        entered = DEFAULT.__dict__.setdefault("entered", [])
        entered.append(DEFAULT.device)
        DEFAULT.device = self
        return self

    def __exit__(self, exc_type, exc, tb):
        entered = DEFAULT.__dict__.get("entered")
        DEFAULT.device = entered.pop() if entered else CPU
        return None


# ---------------------------------------------------------------- cupy discovery (never raises)
_CUDA_STATE: list = []   # [(available, reason)] once probed


def _probe_cuda():
    """(available, reason): whether cupy imports and sees a CUDA device and driver."""
    if _CUDA_STATE:
        return _CUDA_STATE[0]
    try:
        import cupy
    except ImportError:
        state = (False, "cupy is not installed (pip install 'tapelab[cuda]' for CUDA 12, 'tapelab[cuda13]' for CUDA 13)")
    except Exception as e:  # a broken CUDA install can fail at import with other errors
        state = (False, f"importing cupy failed: {type(e).__name__}: {e}")
    else:
        try:
            ok = bool(cupy.cuda.is_available())
        except Exception as e:
            ok, why = False, f"{type(e).__name__}: {e}"
        else:
            why = "no CUDA device or driver was found (cupy.cuda.is_available() is False)"
        state = (True, "") if ok else (False, why)
    _CUDA_STATE.append(state)
    return state


def cuda_available() -> bool:
    """True when cupy is installed and a CUDA device and driver are present; never raises."""
    return _probe_cuda()[0]


def cuda_device_count() -> int:
    """Number of CUDA devices (0 without cupy or a GPU; never raises)."""
    if not cuda_available():
        return 0
    import cupy
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def cuda_unavailable_reason() -> str:
    """Why cuda is unavailable ('' when it is available)."""
    return _probe_cuda()[1]


def require_cuda():
    """The cupy module, or PyTorch's kind of error when there is no usable CUDA."""
    ok, why = _probe_cuda()
    if not ok:
        raise RuntimeError(f"tapelab.cuda needs cupy and a CUDA device: {why}")
    import cupy
    return cupy


def _load_cupy(dev: device):
    cupy = require_cuda()
    n = int(cupy.cuda.runtime.getDeviceCount())
    if dev.index >= n:
        raise RuntimeError(f"CUDA error: invalid device ordinal: {dev} requested, but only {n} CUDA "
                           f"device{'s' if n != 1 else ''} {'are' if n != 1 else 'is'} available")
    return cupy


CPU = device("cpu")
META = device("meta")


class _DefaultDevice(threading.local):
    """What factories use when no ``device=`` is given, per thread as in PyTorch (its default
    device is a TorchFunctionMode, and mode stacks are thread-local): a new thread starts on
    cpu whatever another thread set. The class attribute is every thread's starting value."""

    device = CPU


DEFAULT = _DefaultDevice()


def of_array(arr) -> device:
    """The device an array lives on."""
    if isinstance(arr, np.ndarray) or np.isscalar(arr):
        return CPU
    if type(arr).__name__ == "MetaArray":
        return META
    return device("cuda", int(arr.device.id))  # cupy (and the simulated device's) arrays
