"""Process groups: a backend's communicator plus one communication thread, and the default group.

Collectives of a group run one after another on its thread, in the order the program issued
them, which is the order every rank issues them: so the ranks always meet in the same
collective, whether the caller waits (``async_op=False``) or not. The calling thread keeps
computing meanwhile: DDP's bucket all-reduces overlap the rest of backward this way.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable

from ..base import events
from .work import Future, Work

__all__ = ["ProcessGroup", "world", "set_world", "add_group", "resolve", "env_int", "NO_GROUP"]

NO_GROUP = "Default process group has not been initialized, please make sure to call init_process_group."


class ProcessGroup:
    """``torch.distributed.ProcessGroup``: ``ranks`` are the members' global ranks, in group order."""

    def __init__(self, backend, ranks: list[int], name: str = "") -> None:
        self.backend, self.ranks, self.group_name = backend, list(ranks), name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def rank(self) -> int:
        return self.backend.rank()

    def size(self) -> int:
        return self.backend.size()

    def name(self) -> str:
        return self.backend.name

    def group_rank(self, global_rank: int, what: str) -> int:
        """The rank inside this group of ``global_rank`` (``what`` names the argument for the error)."""
        if global_rank not in self.ranks:
            raise ValueError(f"{what}={global_rank} is not part of the group (global ranks {self.ranks})")
        return self.ranks.index(global_rank)

    def submit(self, name: str, job: Callable[[], Any], nbytes: int = 0, finish: Callable | None = None,
               outputs: list | None = None, shape: tuple = (), dtype: str = "") -> Work:
        """Queue ``job`` (backend calls on arrays) on the communication thread; ``finish(result)`` runs at ``wait()``."""
        fut = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=f"tapelab-comm-{self.group_name or 'world'}",
                                                daemon=True)
                self._thread.start()
        self._jobs.put((name, job, nbytes, shape, dtype, fut))
        return Work(fut, finish, outputs)

    def _serve(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            name, job, nbytes, shape, dtype, fut = item
            start = time.perf_counter_ns()
            try:
                value = job()
            except BaseException as e:   # the caller sees it at wait()
                fut.set_exception(e)
                continue
            if events.has_subscribers("collective"):
                events.emit("collective", events.Collective(name, nbytes, start, time.perf_counter_ns() - start,
                                                            self.size(), threading.get_ident(), shape, dtype))
            fut.set_result(value)

    def shutdown(self) -> None:
        """Finish the queued collectives, stop the thread and free the communicator."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join()
        self.backend.close()

    def __repr__(self) -> str:
        return f"<tapelab.distributed.ProcessGroup backend={self.name()!r} ranks={self.ranks}>"


_state: dict = {"world": None, "groups": []}


def world() -> ProcessGroup | None:
    return _state["world"]


def set_world(group: ProcessGroup | None) -> None:
    if group is None:
        for g in reversed(_state["groups"]):
            g.shutdown()
        _state["groups"].clear()
    else:
        _state["groups"].append(group)
    _state["world"] = group


def add_group(group: ProcessGroup) -> None:
    _state["groups"].append(group)


def resolve(group) -> ProcessGroup:
    """``group`` or the default group; raises PyTorch's ``ValueError`` when there is none."""
    if group is None:
        group = _state["world"]
        if group is None:
            raise ValueError(NO_GROUP)
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a tapelab.distributed ProcessGroup (from new_group), got {type(group).__name__}")
    return group


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)
