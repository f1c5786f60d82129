"""tapelab's own intra-op thread pool: GEMM blocks and fused-loop blocks run on it, with the BLAS
under numpy held at one thread (``runtime.intra_op_threads``).

One pool for every parallel piece of an op, as PyTorch keeps one OpenMP pool: with numpy's
OpenBLAS also threading its GEMMs, two pools took turns on the cores and OpenBLAS's idle threads
spun (yielding) for ~0.13 s after each call, so a loop split right after a GEMM found its core
taken (bench/README.md, issue 17). Workers wait on a lock, never spin, so a busy machine costs
a parallel op no more than the work itself. A hand-off is a lock release and a wake-up, about
15 us on the project machine, a quarter of ``concurrent.futures``' round trip.

The pool is taken without waiting: a second thread calling in while it works (a DataLoader
thread, a user's own threads), or a block that itself asks for the pool, runs its blocks on
the calling thread alone, so nesting and concurrency never deadlock.
"""
from __future__ import annotations

import os
import threading

__all__ = ["run_blocks", "ranges"]


class _Worker:
    """One thread that runs one job each time ``go`` is released and releases ``done`` after it."""

    __slots__ = ("go", "done", "job", "error")

    def __init__(self, index: int):
        self.go = threading.Lock()
        self.go.acquire()
        self.done = threading.Lock()
        self.done.acquire()
        self.job = None
        self.error = None
        threading.Thread(target=self._loop, daemon=True, name=f"tapelab-intraop-{index}").start()

    def _loop(self) -> None:
        _LOCAL.worker = True
        while True:
            self.go.acquire()
            fn, args = self.job
            self.job = None
            try:
                fn(*args)
            except BaseException as exc:    # handed to the caller, who raises it
                self.error = exc
            self.done.release()


_LOCAL = threading.local()
_WORKERS: list = []
_BUSY = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child has none of the parent's threads (a DataLoader worker): start afresh."""
    global _BUSY
    _WORKERS.clear()
    _BUSY = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def run_blocks(fn, blocks: list) -> None:
    """``fn(*args)`` for each ``args`` in ``blocks``, the first on the calling thread and the rest
    on the pool's workers at the same time; returns when all are done and raises the first
    error any block raised. Runs them one after another on the calling thread when the pool is
    busy or the caller is one of its workers."""
    if len(blocks) < 2 or getattr(_LOCAL, "worker", False) or not _BUSY.acquire(blocking=False):
        for args in blocks:
            fn(*args)
        return
    try:
        while len(_WORKERS) < len(blocks) - 1:
            _WORKERS.append(_Worker(len(_WORKERS)))
        started = []
        for worker, args in zip(_WORKERS, blocks[1:]):
            worker.job = (fn, args)
            worker.go.release()
            started.append(worker)
        error = None
        try:
            fn(*blocks[0])
        except BaseException as exc:
            error = exc
        for worker in started:
            worker.done.acquire()
            if worker.error is not None:
                error, worker.error = error or worker.error, None
        if error is not None:
            raise error
    finally:
        _BUSY.release()


def ranges(size: int, parts: int) -> list:
    """``0:size`` cut into ``min(parts, size)`` (at least one) contiguous ``(lo, hi)`` ranges of
    near-equal length: the rows, columns or images each block takes."""
    parts = max(1, min(parts, size))
    edges = [size * i // parts for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))
