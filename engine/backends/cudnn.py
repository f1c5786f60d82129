"""``torch.backends.cudnn``: tapelab uses no cuDNN; the flags are kept and change nothing."""
from __future__ import annotations

from contextlib import contextmanager

__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "benchmark_limit", "is_available", "version",
           "flags", "set_flags"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """False: tapelab's convolutions are cupy/numpy kernels, never cuDNN's."""
    return False


def version() -> None:
    return None


def set_flags(_enabled=None, _benchmark=None, _benchmark_limit=None, _deterministic=None, _allow_tf32=None):
    """Set the given flags (None keeps one); returns the previous
    ``(enabled, benchmark, benchmark_limit, deterministic, allow_tf32)``."""
    global enabled, benchmark, benchmark_limit, deterministic, allow_tf32
    previous = (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)
    new = (_enabled, _benchmark, _benchmark_limit, _deterministic, _allow_tf32)
    enabled, benchmark, benchmark_limit, deterministic, allow_tf32 = (
        old if value is None else value for old, value in zip(previous, new))
    return previous


@contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """``with cudnn.flags(enabled=..., ...):`` sets the flags for the block, as PyTorch's."""
    previous = set_flags(enabled, benchmark, benchmark_limit, deterministic, allow_tf32)
    try:
        yield
    finally:
        set_flags(*previous)
