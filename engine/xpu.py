"""``torch.xpu``: Intel GPUs, as a PyTorch built without XPU answers.

tapelab has no XPU backend, so ``is_available()`` is False and ``device_count()`` 0; the seeding
calls are queued until an initialisation that never comes (PyTorch's ``_lazy_call``), so they do
nothing; the memory statistics read zero or empty; and every call that needs the device
(``current_device``, ``synchronize``, ``get_device_properties``, ``init``, ...) raises PyTorch's
``AssertionError("Torch not compiled with XPU enabled")``. The stream and event classes are the
dummy classes of such a build: constructing one raises ``RuntimeError``.
"""
from __future__ import annotations

import collections
from typing import Any

from .base.device import device as _device

__all__ = ["Event", "Stream", "StreamContext", "can_device_access_peer", "current_device", "current_stream",
           "default_generators", "device", "device_of", "device_count", "empty_cache", "get_arch_list",
           "get_device_capability", "get_device_name", "get_device_properties", "get_gencode_flags",
           "get_per_process_memory_fraction", "get_rng_state", "get_rng_state_all", "init", "initial_seed",
           "is_available", "is_bf16_supported", "is_initialized", "is_tf32_supported", "manual_seed",
           "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
           "memory_reserved", "memory_snapshot", "memory_stats", "memory_stats_as_nested_dict",
           "reset_accumulated_memory_stats", "reset_peak_memory_stats", "seed", "seed_all", "set_device",
           "set_per_process_memory_fraction", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
           "synchronize"]

default_generators: tuple = ()


def _not_compiled() -> AssertionError:
    return AssertionError("Torch not compiled with XPU enabled")


def _index(dev, optional: bool = True) -> int | None:
    """PyTorch's ``_get_device_index`` for an xpu device, an index or None (no device is needed to read it)."""
    if dev is None or isinstance(dev, int):
        return dev
    dev = _device(dev)
    if dev.type != "xpu":
        raise ValueError(f"Expected a xpu device, but got: {dev}")
    return dev.index


def _is_compiled() -> bool:
    return False


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def init() -> None:
    raise _not_compiled()


def current_device() -> int:
    raise _not_compiled()


def set_device(device) -> None:
    raise _not_compiled()


def synchronize(device=None) -> None:
    raise _not_compiled()


def get_device_name(device=None) -> str:
    raise _not_compiled()


def get_device_properties(device=None):
    raise _not_compiled()


def get_device_capability(device=None) -> dict[str, Any]:
    raise _not_compiled()


def can_device_access_peer(device, peer) -> bool:
    raise _not_compiled()


def mem_get_info(device=None) -> tuple[int, int]:
    raise _not_compiled()


def get_per_process_memory_fraction(device=None) -> float:
    raise _not_compiled()


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    raise _not_compiled()


def current_stream(device=None):
    raise _not_compiled()


def get_arch_list() -> list[str]:
    return []


def get_gencode_flags() -> str:
    return ""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def is_tf32_supported() -> bool:
    return False


# ---------------------------------------------------------------- random numbers (queued, never run)
def manual_seed(seed: int) -> None:
    int(seed)   # PyTorch converts first (a bad seed raises), then queues the call until initialisation


def manual_seed_all(seed: int) -> None:
    int(seed)


def seed() -> None:
    pass


def seed_all() -> None:
    pass


def initial_seed() -> int:
    raise _not_compiled()


def get_rng_state(device="xpu"):
    raise _not_compiled()


def get_rng_state_all() -> list:
    return []


def set_rng_state(new_state, device="xpu") -> None:
    pass


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)


# ---------------------------------------------------------------- memory: nothing was ever allocated
def empty_cache() -> None:
    pass


def memory_allocated(device=None) -> int:
    return 0


def max_memory_allocated(device=None) -> int:
    return 0


def memory_reserved(device=None) -> int:
    return 0


def max_memory_reserved(device=None) -> int:
    return 0


def memory_stats_as_nested_dict(device=None) -> dict[str, Any]:
    return {}


def memory_stats(device=None) -> dict[str, Any]:
    return collections.OrderedDict()


def memory_snapshot(mempool_id=None) -> list:
    return []


def reset_peak_memory_stats(device=None) -> None:
    raise AttributeError("module 'torch._C' has no attribute '_xpu_resetPeakMemoryStats'")


def reset_accumulated_memory_stats(device=None) -> None:
    raise AttributeError("module 'torch._C' has no attribute '_xpu_resetAccumulatedMemoryStats'")


# ---------------------------------------------------------------- devices, streams and events
class device:
    """Context manager that selects an xpu device; entering it needs the backend."""

    def __init__(self, device) -> None:
        self.idx = _index(device)
        self.prev_idx = -1

    def __enter__(self):
        raise NotImplementedError("PyTorch was compiled without XPU support")

    def __exit__(self, *exc) -> bool:
        return False


class device_of(device):
    """``device`` of the given tensor's device (a cpu tensor selects none)."""

    def __init__(self, obj) -> None:
        self.idx = obj.get_device() if getattr(obj, "is_xpu", False) else -1
        self.prev_idx = -1


class Stream:
    """The dummy stream class of a build without XPU."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("Tried to instantiate dummy base class Stream")


class Event:
    """The dummy event class of a build without XPU."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("Tried to instantiate dummy base class Event")


class StreamContext:
    """Selects ``stream`` inside the block; with no stream (the only kind there can be here) it does nothing."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.idx = -1

    def __enter__(self):
        if self.stream is not None:
            raise _not_compiled()

    def __exit__(self, *exc) -> bool:
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)


def set_stream(stream) -> None:
    if stream is not None:
        raise _not_compiled()
