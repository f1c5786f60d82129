"""``tapelab.multiprocessing`` (``torch.multiprocessing``): Python's multiprocessing API, plus
``spawn`` and the sharing-strategy switches PyTorch adds.

tapelab tensors cross process boundaries by pickling (a copy), except tensors moved into shared
memory (``Tensor.share_memory_``, ``Module.share_memory``: hogwild training): a forked process
inherits their mapping, and multiprocessing's pickler (``Process`` arguments under ``spawn``,
queues) sends their file descriptor, so both processes write one array. There is no sharing
strategy to choose; the setting is kept for scripts that set it.
"""
from __future__ import annotations

import multiprocessing
import pickle
from multiprocessing import *  # noqa: F401,F403  (Process, Queue, get_context, set_start_method, Pool, ...)
from multiprocessing.reduction import DupFd, ForkingPickler

import numpy as np

from .base import shared
from .core.creation import from_numpy
from .core.tensor import Tensor

__all__ = [*multiprocessing.__all__, "spawn", "ProcessContext", "ProcessExitedException",
           "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies"]

_STRATEGIES = {"file_descriptor", "file_system"}
_SHARING = ["file_descriptor"]


def get_all_sharing_strategies() -> set[str]:
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return _SHARING[0]


def set_sharing_strategy(new_strategy: str) -> None:
    if new_strategy not in _STRATEGIES:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}; one of {sorted(_STRATEGIES)}")
    _SHARING[0] = new_strategy


class ProcessExitedException(Exception):
    """A process started by :func:`spawn` exited with a non-zero code."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int):
        super().__init__(msg)
        self.error_index, self.pid, self.exit_code = error_index, error_pid, exit_code


class ProcessContext:
    """The processes :func:`spawn` started; ``join()`` waits for them."""

    def __init__(self, processes: list):
        self.processes = processes

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """True once every process has exited; raises if one failed (the others are terminated)."""
        for p in self.processes:
            p.join(timeout)
        for i, p in enumerate(self.processes):
            if p.exitcode not in (0, None):
                for other in self.processes:
                    if other.is_alive():
                        other.terminate()
                raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}",
                                             error_index=i, error_pid=p.pid, exit_code=p.exitcode)
        return all(p.exitcode is not None for p in self.processes)


def spawn(fn, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:
    """Run ``fn(i, *args)`` in ``nprocs`` new processes (``i`` = 0 .. nprocs-1).

    With ``join`` wait for all of them (raising :class:`ProcessExitedException` if one fails) and
    return None; otherwise return their :class:`ProcessContext`.
    """
    ctx = multiprocessing.get_context(start_method)
    processes = [ctx.Process(target=fn, args=(i, *args), daemon=daemon) for i in range(nprocs)]
    for p in processes:
        p.start()
    context = ProcessContext(processes)
    if not join:
        return context
    while not context.join():
        pass
    return None


def _reduce_tensor(t: Tensor):
    """multiprocessing's pickling of a Tensor: a shared one travels as its descriptor, others copied.
    (A Parameter pickles as its detached Tensor, so it arrives here too.)"""
    where = shared.handle(t._data) if type(t._data) is np.ndarray else None
    if where is None:
        return t.__reduce_ex__(pickle.DEFAULT_PROTOCOL)
    fd, *layout = where
    return _rebuild_shared, (DupFd(fd), *layout, t.requires_grad)


def _rebuild_shared(fd, nbytes, dtype, shape, strides, offset, requires_grad) -> Tensor:
    fd = fd.detach() if hasattr(fd, "detach") else fd   # a queue's DupFd; spawn passes the number
    return from_numpy(shared.attach(fd, nbytes, dtype, shape, strides, offset)).requires_grad_(requires_grad)


ForkingPickler.register(Tensor, _reduce_tensor)
