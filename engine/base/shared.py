"""Arrays in memory shared between processes: what ``Tensor.share_memory_`` moves data into.

The data lives in an anonymous ``memfd`` mapped ``MAP_SHARED`` (an anonymous mapping where the
platform has no memfd): a forked child writes the very pages the parent reads, and a process
started with ``spawn`` or ``forkserver`` maps the same file from the descriptor its pickled
tensor carries (``handle`` / ``attach``, used by ``tapelab.multiprocessing``'s reducer). Hogwild
training relies on this: ``model.share_memory()``, then workers that step the parameters in place.
"""
from __future__ import annotations

import mmap
import os
import weakref

import numpy as np

__all__ = ["shared_copy", "is_shared", "handle", "attach"]

_FDS: dict[int, int] = {}   # id(mapping) -> its memfd, closed when the mapping is collected


def _close(key: int) -> None:
    os.close(_FDS.pop(key))


def _map(fd: int | None, nbytes: int) -> mmap.mmap:
    buf = mmap.mmap(-1 if fd is None else fd, nbytes)
    if fd is not None:
        _FDS[id(buf)] = fd
        weakref.finalize(buf, _close, id(buf))
    return buf


def shared_copy(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``arr`` in a shared mapping."""
    nbytes = max(arr.nbytes, 1)   # mmap refuses a zero length
    fd = None
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("tapelab-shared")
        os.ftruncate(fd, nbytes)
    out = np.frombuffer(_map(fd, nbytes), arr.dtype, arr.size).reshape(arr.shape)
    out[...] = arr
    return out


def _mapping(arr: np.ndarray):
    """The mmap under ``arr`` and the array made directly on it, or (None, None)."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    base = root.base
    if isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap):
        return base.obj, root
    return None, None


def is_shared(arr: np.ndarray) -> bool:
    """Whether ``arr`` (or the array it views) lives in a mapping made by ``shared_copy``."""
    return _mapping(arr)[0] is not None


def handle(arr: np.ndarray) -> tuple | None:
    """``(fd, nbytes, dtype, shape, strides, offset)``: what another process needs to map ``arr``;
    None when the mapping has no descriptor (only forked children can share it)."""
    buf, root = _mapping(arr)
    fd = _FDS.get(id(buf))
    if fd is None:
        return None
    offset = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return fd, len(buf), arr.dtype, arr.shape, arr.strides, offset


def attach(fd: int, nbytes: int, dtype, shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """The array ``handle`` described, mapped from ``fd`` (which this process now owns)."""
    raw = np.frombuffer(_map(fd, nbytes), np.uint8)
    return np.ndarray(shape, dtype, buffer=raw, offset=offset, strides=strides)
