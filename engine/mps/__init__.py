"""``torch.mps``: Apple's Metal backend, as PyTorch's build without it answers.

tapelab has no Metal backend, so this is the module of a PyTorch built without MPS: ``is_available()``
is False, ``device_count()`` 0, ``manual_seed`` does nothing (``torch.manual_seed`` may call it on any
machine), and every call that needs the backend raises PyTorch's ``RuntimeError``
(``Cannot execute deviceSynchronize() without MPS backend.``).
"""
from __future__ import annotations

from . import profiler
from .event import Event

__all__ = ["compile_shader", "load_metallib", "device_count", "get_rng_state", "manual_seed", "seed", "set_rng_state",
           "synchronize", "empty_cache", "set_per_process_memory_fraction", "current_allocated_memory",
           "driver_allocated_memory", "Event", "profiler", "recommended_max_memory", "is_available"]


def _without(what: str) -> RuntimeError:
    return RuntimeError(f"Cannot execute {what}() without MPS backend.")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def synchronize() -> None:
    raise _without("deviceSynchronize")


def get_rng_state(device="mps"):
    raise _without("getDefaultGenerator")


def set_rng_state(new_state, device="mps") -> None:
    raise _without("getDefaultGenerator")


def manual_seed(seed: int) -> None:
    """Nothing to seed without the backend (PyTorch returns before reading ``seed``)."""


def seed() -> None:
    raise _without("getDefaultGenerator")


def empty_cache() -> None:
    raise _without("emptyCache")


def set_per_process_memory_fraction(fraction) -> None:
    raise _without("setMemoryFraction")


def current_allocated_memory() -> int:
    raise _without("getCurrentAllocatedMemory")


def driver_allocated_memory() -> int:
    raise _without("getDriverAllocatedMemory")


def recommended_max_memory() -> int:
    raise _without("getRecommendedMaxMemory")


def compile_shader(source: str):
    raise RuntimeError("MPS is not available")


def load_metallib(source):
    raise RuntimeError("MPS is not available")
