"""``torch.backends.mkldnn``: tapelab uses no oneDNN (MKL-DNN); the flag is kept and changes nothing."""
from __future__ import annotations

__all__ = ["enabled", "is_available"]

enabled = True


def is_available() -> bool:
    """False: tapelab's CPU kernels are numpy's."""
    return False
