"""``tapelab.accelerator`` (``torch.accelerator``): the device-generic API, over tapelab's one
accelerator, CUDA through cupy (every call goes to :mod:`tapelab.cuda`).

As in PyTorch, ``current_accelerator()`` answers what the installation supports (CUDA when cupy
is installed, else None) and ``is_available()`` whether a device is usable now. Without one,
the calls that need a device raise PyTorch's ``RuntimeError``.
"""
from __future__ import annotations

from . import cpu, cuda
from .backends.cuda import is_built
from .base.device import device as _device

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "set_device_index",
           "device_index", "synchronize", "empty_cache", "memory_allocated", "max_memory_allocated",
           "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats"]

_NONE_AVAILABLE = "Cannot access accelerator device when none is available."


def current_accelerator(check_available: bool = False) -> _device | None:
    """``tapelab.device("cuda")`` when cupy is installed (and, with ``check_available``, a GPU is usable)."""
    if not is_built() or (check_available and not cuda.is_available()):
        return None
    return _device("cuda")


def is_available() -> bool:
    return cuda.is_available() and current_accelerator() is not None


def device_count() -> int:
    return cuda.device_count() if current_accelerator() is not None else 0


def _require() -> None:
    if not is_available():
        raise RuntimeError(_NONE_AVAILABLE)


def _index(device, optional: bool) -> int:
    """A device index from an int, a device name or a device of the accelerator's type."""
    if isinstance(device, int):
        return device
    if device is None:
        if not optional:
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        return current_device_index()
    dev = _device(device)
    acc = current_accelerator()
    if acc is None:
        raise RuntimeError("Accelerator expected")
    if dev.type != acc.type:
        raise ValueError(f"{dev.type} doesn't match the current accelerator {acc}.")
    return dev.index


def current_device_index() -> int:
    _require()
    return cuda.current_device()


def set_device_index(device, /) -> None:
    """Make ``device`` (an index, ``"cuda:1"`` or a device) the current one."""
    index = _index(device, optional=False)
    _require()
    cuda.set_device(index)


class device_index:
    """``with tapelab.accelerator.device_index(1):`` runs the block with device 1 current (None: no change)."""

    def __init__(self, device: int | None, /):
        self.idx = device
        self._ctx = None

    def __enter__(self):
        if self.idx is not None:
            _require()
            self._ctx = cuda.device(self.idx)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


def synchronize(device=None, /) -> None:
    """Wait for all work queued on ``device`` (default: the current one)."""
    _require()
    cuda.synchronize(_index(device, optional=True))


def empty_cache() -> None:
    cuda.empty_cache()


def memory_allocated(device=None, /) -> int:
    _require()
    return cuda.memory_allocated(_index(device, optional=True))


def max_memory_allocated(device=None, /) -> int:
    _require()
    return cuda.max_memory_allocated(_index(device, optional=True))


def memory_reserved(device=None, /) -> int:
    _require()
    return cuda.memory_reserved(_index(device, optional=True))


def max_memory_reserved(device=None, /) -> int:
    _require()
    return cuda.max_memory_reserved(_index(device, optional=True))


def reset_peak_memory_stats(device=None, /) -> None:
    _require()
    cuda.reset_peak_memory_stats(_index(device, optional=True))


# ---------------------------------------------------------------- torch.Stream and torch.Event
def _stream_device(device) -> _device:
    """The device of a generic stream or event: the accelerator's when none is named, as PyTorch's."""
    if device is None:
        return current_accelerator(check_available=True) or _device("cpu")
    return _device(device)


_DEVICE_TYPE = {"cpu": 0, "cuda": 1, "meta": 9}


class Stream:
    """``torch.Stream``: a device-generic stream. On a cuda device it is a ``tapelab.cuda.Stream``;
    on the cpu work runs in the order it is issued, so the stream is always done and has no events
    (PyTorch's cpu backend refuses them too)."""

    def __new__(cls, device=None, priority: int = 0):
        dev = _stream_device(device)
        if dev.type == "cuda":
            return cuda.Stream(dev, priority)
        self = object.__new__(cls)
        self.device = dev
        return self

    device_type = property(lambda self: _DEVICE_TYPE[self.device.type])   # c10's DeviceType number, as PyTorch's
    device_index = property(lambda self: -1 if self.device.index is None else self.device.index)
    stream_id = 0

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait_event(self, event: "Event") -> None:
        return None

    def record_event(self, event: "Event | None" = None) -> "Event":
        raise RuntimeError(f"{self.device.type} backend doesn't support events.")

    wait_stream = record_event   # waits by recording an event on the other stream

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.device == self.device

    def __hash__(self) -> int:
        return hash(self.device)

    def __repr__(self) -> str:
        return f"torch.Stream device_type={self.device.type}, device_index={self.device_index}, stream_id=0"


class Event:
    """``torch.Event``: a device-generic event; a ``tapelab.cuda.Event`` on a cuda device. The cpu
    has no events: making one works, recording or waiting on it raises, as in PyTorch."""

    def __new__(cls, device=None, *, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False):
        dev = _stream_device(device)
        if dev.type == "cuda":
            with cuda.device(dev.index):
                return cuda.Event(enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)
        self = object.__new__(cls)
        self.device, self.enable_timing = dev, enable_timing
        return self

    def _refuse(self, *_):
        raise RuntimeError(f"{self.device.type} backend doesn't support events.")

    record = _refuse

    def wait(self, stream: Stream | None = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: "Event") -> float:
        if not (self.enable_timing and end.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        self._refuse()

    def __repr__(self) -> str:
        return (f"torch.Event device_type={self.device.type}, device_index=-1, "
                f"event_flag={int(self.enable_timing)}, event_id=0")


def get_device_module(device=None):
    """``torch.get_device_module``: the module of a device type (``tapelab.cpu``, ``tapelab.cuda``);
    with no device, the current accelerator's, else the cpu's."""
    if device is not None and not isinstance(device, (str, _device)):
        raise RuntimeError(f"Invalid value of device '{device}', expect torch.device, str, or None")
    kind = _stream_device(device).type if device is None or isinstance(device, _device) else \
        device.partition(":")[0]
    modules = {"cpu": cpu, "cuda": cuda}
    if kind not in modules:
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered as 'torch.{kind}'.")
    return modules[kind]
