"""``torch.backends.mps``: tapelab has no Metal backend, so it answers as a PyTorch built without MPS."""
from __future__ import annotations

__all__ = ["get_core_count", "get_name", "is_built", "is_available", "is_macos13_or_newer", "is_macos_or_newer"]


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    raise RuntimeError("Cannot execute isOnMacOSorNewer() without MPS backend.")


def is_macos13_or_newer(minor: int = 0) -> bool:
    return is_macos_or_newer(13, minor)


def get_core_count() -> int:
    raise AttributeError("module 'torch._C' has no attribute '_mps_get_core_count'")


def get_name() -> str:
    raise AttributeError("module 'torch._C' has no attribute '_mps_get_name'")
