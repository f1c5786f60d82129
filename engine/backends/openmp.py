"""``torch.backends.openmp``: tapelab has no OpenMP build (its intra-op threads are its own pool)."""
from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    """False: tapelab is not built with OpenMP."""
    return False
