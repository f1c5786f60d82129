"""Arrays in memory shared with forked processes: what ``Tensor.share_memory_`` moves data into.

An anonymous ``MAP_SHARED`` mapping survives ``fork``: a child writes the very pages the parent
reads, which hogwild training relies on (``model.share_memory()``, then ``mp.Process`` workers
that step the parameters in place). Processes started with ``spawn`` receive pickled copies.
"""
from __future__ import annotations

import mmap

import numpy as np

__all__ = ["shared_copy", "is_shared"]


def shared_copy(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``arr`` in an anonymous shared mapping."""
    buf = mmap.mmap(-1, max(arr.nbytes, 1))   # mmap refuses a zero length
    out = np.frombuffer(buf, arr.dtype, arr.size).reshape(arr.shape)
    out[...] = arr
    return out


def is_shared(arr) -> bool:
    """Whether ``arr`` (or the array it views) lives in a shared mapping made by ``shared_copy``."""
    while isinstance(arr, np.ndarray):
        arr = arr.base
    return isinstance(arr, memoryview) and isinstance(arr.obj, mmap.mmap)
