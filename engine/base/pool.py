"""tapelab's own intra-op thread pool: GEMM blocks and fused-loop blocks run on it, with the BLAS
under numpy held at one thread (``runtime.intra_op_threads``). A product MKL's GEMM takes runs on
MKL's own OpenMP threads instead, which spin between calls (``kernels/mkl.py``, ``gemm.py``);
``in_block`` tells it when the calling thread is already one of a split's.

One pool for every parallel piece of an op, as PyTorch keeps one OpenMP pool: with numpy's
OpenBLAS also threading its GEMMs, two pools took turns on the cores and OpenBLAS's idle threads
spun (yielding) for ~0.13 s after each call, so a loop split right after a GEMM found its core
taken (bench/README.md, issue 17). Workers wait on a semaphore, never spin, and a split's blocks
go to whichever thread is free first (the caller takes any block a late worker has not), so a
busy machine costs a parallel op little more than the work itself. A hand-off is a semaphore
release and a wake-up, about 15 us on the project machine, a quarter of ``concurrent.futures``' round trip.

The pool is taken without waiting: a second thread calling in while it works (a DataLoader
thread, a user's own threads), or a block that itself asks for the pool, runs its blocks on
the calling thread alone, so nesting and concurrency never deadlock.

Where the pool may use every CPU of the process, each worker keeps to a CPU of its own, off the
calling thread's (``cpus.py``): left to the scheduler, worker and caller shared one CPU for tens of
milliseconds after each pause, and a split then ran its blocks one after the other.

Whether splitting pays is measured, not assumed. On the project machine a hand-off round trip
costs 20-60 us (a futex wake of an idle virtual CPU, then the GIL), a 2^16-element relu took
26 us whole and 81 us in two blocks, and its two virtual CPUs gave two independent BLAS threads
1.35x one thread's throughput, not 2x (bench/README.md, issue 17). So a caller that names the
kind of work (``key``, with its size in ``work``) gets both ways timed: per kind and power-of-two
size class, each call runs split or on the calling thread, whichever has the lower time per
unit of work so far, and now and then the other way is timed again for a few calls in a row, so
the choice follows the machine's load. Both ways run the same blocks, so the result does not
depend on it. A way's first call after the other's is not counted: a worker left idle sleeps, and
its virtual CPU halts, so a single split call after many whole ones measured slower than the
warm splits that follow it, and a one-call re-timing kept the pool on the calling thread.

numba's OpenMP threading layer forks and joins a ``prange`` region in ~1.6 us (libgomp spinning;
27 us with ``OMP_WAIT_POLICY=PASSIVE``, a futex wake without the GIL), against this pool's ~57 us.
With ``kernels.native()`` (``TAPELAB_NATIVE_POOL``; by default where MKL runs on GNU OpenMP) our
float32 GEMM's products run their parts there (``kernels/sgemm.py``, chosen per size class by
``timed``), and a fused numba loop's blocks run as one region (``kernels/regions.py``,
``run_blocks(region=)``, timed as the pool's split). Without MKL's GEMMs on libgomp, its spin is
bounded (``GOMP_SPINCOUNT``; its default spin beside this pool's pinned workers made whole steps
0.72-0.83x, and the A/Bs of sessions 19 and 23 on a loaded host did not prove the regions), and
the regions stay off; with them, the regions measured 1.01-1.13x on the two-thread steps but
ResNet's 0.97x (bench/README.md, issue 17, session 26).
"""
from __future__ import annotations

import itertools
import os
import threading
import time

from . import cpus, runtime

__all__ = ["run_blocks", "timed", "ranges", "timings", "in_block"]


class _Worker:
    """One thread that helps with the latest job each time ``go`` is released (a semaphore: a
    hand-off it wakes for too late, the job already done, costs it one empty pass)."""

    __slots__ = ("go", "job", "cpu", "tid")

    def __init__(self, index: int, cpu: int | None):
        self.cpu, self.tid = cpu, None      # the CPU it keeps to (cpus.py), its thread's id
        self.go = threading.Semaphore(0)
        self.job = None
        threading.Thread(target=self._loop, daemon=True, name=f"tapelab-intraop-{index}").start()

    def _loop(self) -> None:
        _LOCAL.worker = True
        self.tid = threading.get_native_id()
        cpus.pin(self.cpu)
        while True:
            self.go.acquire()
            job = self.job
            if job is not None:
                job.work()
            job = None                  # the blocks' arrays are not kept alive while it waits


class _Job:
    """One split call's blocks: the caller runs block 0, then each thread takes the next block not
    yet taken until none is left, so a worker that wakes late (its CPU busy, or halted) leaves its
    block to the caller instead of holding the call up. The blocks are the same whichever thread
    runs them, so the result is too. ``finished`` is released when the last block is done."""

    __slots__ = ("fn", "blocks", "next", "left", "lock", "finished", "error")

    def __init__(self, fn, blocks: list):
        self.fn, self.blocks = fn, blocks
        self.next = iter(range(1, len(blocks)))    # next() on it is atomic: one taker per block
        self.left = len(blocks)
        self.lock = threading.Lock()
        self.finished = threading.Lock()
        self.finished.acquire()
        self.error = None

    def work(self, first: bool = False) -> None:
        for i in itertools.chain((0,) if first else (), self.next):
            try:
                self.fn(*self.blocks[i])
            except BaseException as exc:    # handed to the caller, who raises it
                self.error = self.error or exc
            with self.lock:
                self.left -= 1
                if self.left == 0:
                    self.finished.release()


class _Local(threading.local):
    """Per thread: a pool worker's thread, a caller whose split runs now. False unless set: a class
    default is read at once, where ``getattr(local, name, False)`` raised and caught inside on an unset
    name: ``in_block``, asked on every product MKL takes, 0.79 -> 0.09 us."""
    worker = False
    splitting = False


_LOCAL = _Local()
_WORKERS: list = []
_BUSY = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child has none of the parent's threads (a DataLoader worker): start afresh."""
    global _BUSY
    _WORKERS.clear()
    _BUSY = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


class _Timings:
    """One kind of work in one size class: seconds per unit of work split (index 1) and on the
    calling thread (index 0), a running average of each. A way's first call after the other's is
    not counted: it pays for waking that way up (a sleeping worker, a loop's compilation). The
    slower way is timed again after ``retry`` calls, for ``_STREAK`` calls in a row, its figure
    then taken afresh from those calls (the old one may date from another load); each time
    it is still the slower, ``retry`` doubles (up to ``_RETRY_MAX``), so a choice that holds
    costs ever less to confirm."""

    __slots__ = ("per_unit", "calls", "retry", "next_retry", "streak", "streak_way", "last", "fresh")

    def __init__(self):
        self.per_unit = [None, None]
        self.calls = 0
        self.retry = self.next_retry = _RETRY
        self.streak = 0
        self.streak_way = self.last = None
        self.fresh = False

    def faster(self) -> int:
        whole, split = self.per_unit
        if split is None or whole is None:
            return 1 if split is None else 0
        return 1 if split < whole else 0

    def choose(self) -> int:
        """1 to split this call, 0 to run it on the calling thread: each way is timed first
        (split first), then the faster so far, and now and then a streak of the other."""
        self.calls += 1
        if self.streak:
            self.streak -= 1
            return self.streak_way
        way = self.faster()
        if self.calls >= self.next_retry and None not in self.per_unit:
            self.streak, self.streak_way, self.fresh = _STREAK - 1, 1 - way, True
            return 1 - way
        return way

    def record(self, way: int, seconds: float, work: int) -> None:
        warm, self.last = self.last == way, way
        if not warm:
            return
        per_unit, old = seconds / work, self.per_unit[way]
        if self.fresh and way == self.streak_way:    # a re-timing starts afresh: the old figure is stale
            old, self.fresh = None, False
        self.per_unit[way] = per_unit if old is None else old + 0.25 * (per_unit - old)
        if self.streak == 0 and way == self.streak_way:      # a re-timing streak ends here
            held = self.faster() != way
            self.retry = min(2 * self.retry, _RETRY_MAX) if held else _RETRY
            self.next_retry, self.streak_way = self.calls + self.retry, None


_RETRY, _RETRY_MAX, _STREAK = 16, 1024, 3
_TIMINGS: dict = {}


def timings(key) -> dict:
    """What the pool measured for ``key``: ``{size_class: {"whole": s, "split": s, "calls": n}}``,
    seconds per unit of work each way (size class: ``work.bit_length()``)."""
    return {k[1]: {"whole": t.per_unit[0], "split": t.per_unit[1], "calls": t.calls}
            for k, t in _TIMINGS.items() if k[0] == key}


def run_blocks(fn, blocks, key=None, work: int = 1, whole: tuple | None = None, region=None) -> None:
    """``fn(*args)`` for each ``args`` in ``blocks`` (a list, or a function that returns it when
    the call runs split), the first on the calling thread and the rest
    on the pool's workers at the same time; returns when all are done and raises the first
    error any block raised. Runs them one after another on the calling thread when the pool is
    busy or the caller is one of its workers.

    ``region``, when given, runs the same blocks at once in one call (an OpenMP region on numba's
    threads, ``kernels/regions.py``) and takes the workers' place in a split call; the pool is held
    meanwhile, so a second caller or a nested block still runs whole.

    When ``key`` names the kind of work (``work`` its size: elements, multiply-adds), the call
    runs split or whole (``fn(*whole)`` on the calling thread, or the blocks one after another
    when ``whole`` is None), whichever has measured faster for that size class."""
    if _LOCAL.worker or not _BUSY.acquire(blocking=False):
        _run_whole(fn, blocks, whole)
        return
    timing = None if key is None else _timings(key, work)
    way = 1 if timing is None else timing.choose()
    start = time.perf_counter()
    if way:
        _LOCAL.splitting = True
        try:
            if region is not None:
                region()
            else:
                _run_split(fn, blocks() if callable(blocks) else blocks)
        finally:
            _LOCAL.splitting = False
            _BUSY.release()
    else:
        _BUSY.release()         # another thread may use the pool meanwhile
        _run_whole(fn, blocks, whole)
    if timing is not None:
        timing.record(way, time.perf_counter() - start, work)


def in_block() -> bool:
    """Whether the calling thread runs a split's block now (a worker, or a caller whose split runs):
    another library's threads started from here would share the CPUs the split already uses."""
    return _LOCAL.worker or _LOCAL.splitting


def timed(key, work: int, split, whole):
    """``split()`` or ``whole()``, whichever has measured faster for ``key`` (a kind of work) and
    ``work``'s size class, timed as ``run_blocks`` times its two ways: for work whose split runs
    elsewhere than this pool (our GEMM's parts on numba's OpenMP threads, ``kernels/sgemm.py``).
    Both must give the same result."""
    timing = _timings(key, work)
    way = timing.choose()
    start = time.perf_counter()
    result = split() if way else whole()
    timing.record(way, time.perf_counter() - start, work)
    return result


def _timings(key, work: int) -> "_Timings":
    """The two ways' timings of ``key``'s work in ``work``'s size class (a power of two)."""
    timing = _TIMINGS.get((key, work.bit_length()))
    if timing is None:
        timing = _TIMINGS[(key, work.bit_length())] = _Timings()
    return timing


def _run_whole(fn, blocks, whole: tuple | None) -> None:
    if whole is not None:
        fn(*whole)
        return
    for args in blocks() if callable(blocks) else blocks:
        fn(*args)


def _run_split(fn, blocks: list) -> None:
    """The blocks at once, the first on the calling thread (which holds ``_BUSY``), the rest taken
    by whichever thread is free first (``_Job``)."""
    if len(blocks) < 2:
        _run_whole(fn, blocks, None)
        return
    if len(_WORKERS) < len(blocks) - 1:
        places = cpus.for_workers(max(len(blocks), runtime.intra_op_threads()))
        while len(_WORKERS) < len(blocks) - 1:
            index = len(_WORKERS)
            _WORKERS.append(_Worker(index, places[index % len(places)] if places else None))
    if any(w.cpu is not None for w in _WORKERS):
        cpus.keep_off(_WORKERS)
    job = _Job(fn, blocks)
    for worker in _WORKERS[:len(blocks) - 1]:
        worker.job = job
        worker.go.release()
    job.work(first=True)
    job.finished.acquire()
    for worker in _WORKERS:
        worker.job = None               # the blocks' arrays are not kept alive by a worker
    if job.error is not None:
        raise job.error


def ranges(size: int, parts: int) -> list:
    """``0:size`` cut into ``min(parts, size)`` (at least one) contiguous ``(lo, hi)`` ranges of
    near-equal length: the rows, columns or images each block takes."""
    parts = max(1, min(parts, size))
    edges = [size * i // parts for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))
