"""``torch.cuda.nvtx``: NVTX ranges and marks for Nsight, through cupy's ``cupy.cuda.nvtx``.

With a GPU the ranges go to cupy's NVTX when its build has it, else they are counted and dropped
(so instrumented code runs either way); ``range_start``/``range_end`` (ranges across threads, which
cupy does not bind) hand out and take back handles without emitting. Without cupy and a GPU the
calls fail as PyTorch's build without CUDA: ``RuntimeError`` ("NVTX functions not installed"), and
``AttributeError`` from ``range_start``/``range_end``.
"""
from __future__ import annotations

import contextlib
import itertools
import threading

from ..base.device import cuda_available

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]

_NOT_INSTALLED = "NVTX functions not installed. Are you sure you have a CUDA build?"


class _Depth(threading.local):
    depth = 0      # NVTX's push/pop stack is per thread


_DEPTH = _Depth()
_IDS = itertools.count(1)
_OPEN: dict = {}    # range_start handle -> message


def _nvtx():
    """cupy's nvtx module, None where cupy's build lacks it (a no-op), PyTorch's error without a GPU."""
    if not cuda_available():
        raise RuntimeError(_NOT_INSTALLED)
    try:
        from cupy.cuda import nvtx
    except Exception:
        return None
    return nvtx if getattr(nvtx, "available", True) else None


def range_push(msg: str) -> int:
    """Push a range onto this thread's stack of nested ranges; returns its zero-based depth."""
    nv = _nvtx()
    if nv is not None:
        nv.RangePush(msg)
    level = _DEPTH.depth
    _DEPTH.depth += 1
    return level


def range_pop() -> int:
    """Pop the innermost range; returns the zero-based depth of the range ended (-1: none was open)."""
    nv = _nvtx()
    if _DEPTH.depth == 0:
        return -1
    if nv is not None:
        nv.RangePop()
    _DEPTH.depth -= 1
    return _DEPTH.depth


def range_start(msg: str) -> int:
    """Start a range that may end on another thread; returns its handle for ``range_end``."""
    if not cuda_available():
        raise AttributeError("'_NVTXStub' object has no attribute 'rangeStartA'")
    handle = next(_IDS)
    _OPEN[handle] = msg
    return handle


def range_end(range_id: int) -> None:
    """End the range ``range_start`` returned ``range_id`` for."""
    if not cuda_available():
        raise AttributeError("'_NVTXStub' object has no attribute 'rangeEnd'")
    _OPEN.pop(range_id, None)


def mark(msg: str) -> None:
    """An instantaneous event."""
    nv = _nvtx()
    if nv is not None:
        nv.Mark(msg)


@contextlib.contextmanager
def range(msg: str, *args, **kwargs):
    """Context manager and decorator: a range around the block; ``msg.format(*args, **kwargs)``."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
