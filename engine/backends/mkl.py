"""``torch.backends.mkl``: tapelab is not built against oneMKL (its optional ``[mkl]`` extra loads
MKL's vector math at run time for a few float32 functions), so ``is_available`` is False and
``verbose`` is a block that asks for nothing, as PyTorch's does for ``VERBOSE_OFF``."""
from __future__ import annotations

__all__ = ["is_available", "verbose", "VERBOSE_OFF", "VERBOSE_ON"]

VERBOSE_OFF = 0
VERBOSE_ON = 1


def is_available() -> bool:
    """False: tapelab is not built with MKL."""
    return False


class verbose:
    """On-demand oneMKL verbose output for the block; tapelab has none to turn on."""

    def __init__(self, enable):
        self.enable = enable

    def __enter__(self):
        if self.enable == VERBOSE_OFF:
            return None
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        return False
