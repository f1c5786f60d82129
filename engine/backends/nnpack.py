"""``torch.backends.nnpack``: tapelab has no NNPACK; the switch is kept and changes nothing."""
from __future__ import annotations

from contextlib import contextmanager

__all__ = ["is_available", "flags", "set_flags"]

_enabled = True


def is_available() -> bool:
    """False: tapelab's convolutions are its own."""
    return False


def set_flags(_enabled_new):
    """Set whether NNPACK is enabled; returns the old ``(enabled,)``."""
    global _enabled
    orig = (_enabled,)
    _enabled = bool(_enabled_new)
    return orig


@contextmanager
def flags(enabled=False):
    """NNPACK enabled or not inside the block."""
    orig = set_flags(enabled)
    try:
        yield
    finally:
        set_flags(orig[0])
