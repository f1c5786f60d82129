"""Which CPU each of the intra-op pool's workers runs on (``pool.py``).

Left to the scheduler, a worker and the thread that hands it work end up on one CPU for tens of
milliseconds at a time, and then a split call's two blocks run one after the other. On the
project machine (2 vCPUs, KVM) this happened after every pause of ~0.1 s or more: for the next
~50 ms a forced split took as long as the whole product (MLP b512's 512x784x512 GEMM: 2.1e-11 s
per multiply-add either way, against 1.2e-11 split once the scheduler had moved them apart), and
the pool's timing then kept whole (bench/README.md, issue 17, session 14). The likely cause: the
scheduler wakes a thread on its waker's CPU when its own is not available, and a guest counts an
idle vCPU that the host has descheduled (``vcpu_is_preempted``) as not available.

So when the pool may use every CPU this process may run on, each worker keeps to one CPU of its
own, none of them the calling thread's; the calling thread is not pinned (it is the user's), and
when the scheduler moves it onto a worker's CPU, that worker moves to the CPU left free. With
fewer threads than CPUs (ranks or processes sharing a machine) the workers are not pinned, as
pinning every process's first worker to the same CPU would crowd it.
"""
from __future__ import annotations

import ctypes
import os

__all__ = ["current", "for_workers", "pin", "keep_off"]

_GETCPU = getattr(ctypes.CDLL(None), "sched_getcpu", None) if os.name == "posix" else None
_PINNABLE = _GETCPU is not None and hasattr(os, "sched_setaffinity")
_ALLOWED: list = []     # the CPUs the process might use when its workers were placed


def current() -> int | None:
    """The CPU the calling thread runs on now (None where the platform does not say)."""
    return _GETCPU() if _GETCPU is not None else None


def for_workers(n_threads: int) -> list:
    """The CPUs that workers 0, 1, ... keep to, in turn, for a pool of ``n_threads`` threads
    (the caller and ``n_threads - 1`` workers); empty where they are not pinned."""
    if not _PINNABLE:
        return []
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2 or n_threads < len(allowed):
        return []
    _ALLOWED[:] = allowed
    here = current()
    return [c for c in allowed if c != here]


def pin(cpu: int | None) -> None:
    """Keep the calling thread (a worker starting) to ``cpu``."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def keep_off(workers: list) -> None:
    """Move the pinned worker (``.cpu``, ``.tid``) that the calling thread now shares a CPU with,
    if any, to a CPU no worker keeps to."""
    here = current()
    for worker in workers:
        if worker.cpu == here and worker.tid is not None:
            taken = {w.cpu for w in workers} | {here}
            free = [c for c in _ALLOWED if c not in taken]
            if free:
                try:
                    os.sched_setaffinity(worker.tid, {free[0]})
                except OSError:         # the thread's CPU set was changed from outside: stop pinning it
                    worker.cpu = None
                else:
                    worker.cpu = free[0]
            return
