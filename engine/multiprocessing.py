"""``tapelab.multiprocessing`` (``torch.multiprocessing``): Python's multiprocessing API, plus
``spawn`` and the sharing-strategy switches PyTorch adds.

tapelab tensors cross process boundaries by pickling (a copy), except that a forked process
shares the data of tensors moved into shared memory beforehand (``Tensor.share_memory_``,
``Module.share_memory``: hogwild training); there is no sharing strategy to choose, and the
setting is kept for scripts that set it.
"""
from __future__ import annotations

import multiprocessing
from multiprocessing import *  # noqa: F401,F403  (Process, Queue, get_context, set_start_method, Pool, ...)

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
