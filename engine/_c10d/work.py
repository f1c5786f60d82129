"""Work handles and futures: what an ``async_op=True`` collective returns.

A collective runs on its group's communication thread; the caller gets a :class:`Work` at once
and meets the result at ``wait()``. ``finish`` (writing the received values into the caller's
tensors) runs on the waiting thread, so tensors change only where the program says so.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["Future", "Work", "RequestWork"]


class Future:
    """``torch.futures.Future`` for communication: set once from any thread, ``wait()`` blocks.

    ``then(fn)`` is lazy: ``fn`` runs on the first thread that waits for the chained future, not
    on the communication thread that finished this one, so that thread spends no Python time
    (and no GIL) on the caller's work while backward is computing.
    """

    def __init__(self, _source: "Future | None" = None, _fn: Callable | None = None) -> None:
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable] = []
        self._lock = threading.Lock()
        self._source, self._fn = _source, _fn

    def done(self) -> bool:
        return self._done.is_set() or (self._source is not None and self._source.done())

    def set_result(self, value: Any) -> None:
        self._value = value
        self._finish()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def wait(self) -> Any:
        if self._source is not None and not self._done.is_set():
            self._source.wait_quietly()
            with self._lock:
                if not self._done.is_set():
                    try:
                        self._value = self._fn(self._source)
                    except BaseException as e:   # the error surfaces here, as from the callback
                        self._error = e
                    self._done.set()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value

    def wait_quietly(self) -> None:
        """Block until done, without raising (the chained callback sees the error)."""
        try:
            self.wait()
        except BaseException:
            pass

    def value(self) -> Any:
        return self.wait()

    def add_done_callback(self, callback: Callable[["Future"], None]) -> None:
        if self._source is not None:    # a chained future is done when it is waited for
            self.wait_quietly()
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback: Callable[["Future"], Any]) -> "Future":
        """A future of ``callback(self)``, computed by the first thread that waits for it."""
        return Future(self, callback)


class Work:
    """``torch.distributed.Work``: ``wait()`` blocks until the collective is done and its results
    are in the output tensors; ``is_completed()`` asks without blocking."""

    def __init__(self, future: Future, finish: Callable[[Any], Any] | None = None, outputs: list | None = None):
        self._future, self._finish, self._outputs = future, finish, outputs or []
        self._finished = False
        self._lock = threading.Lock()

    def is_completed(self) -> bool:
        return self._future.done()

    def is_success(self) -> bool:
        return self._future.done() and self._future._error is None

    def exception(self) -> BaseException | None:
        return self._future._error

    def wait(self, timeout=None) -> bool:
        value = self._future.wait()
        with self._lock:   # the finish runs once, on whichever thread waits first
            if not self._finished:
                self._finished = True
                if self._finish is not None:
                    self._finish(value)
        return True

    def get_future(self) -> Future:
        """A future of the output tensors, done once they hold the results (on the waiting thread)."""
        def outputs(_):
            self.wait()
            return self._outputs
        return Future(self._future, outputs)

    def result(self) -> list:
        self.wait()
        return self._outputs


class RequestWork(Work):
    """A Work over a backend's point-to-point request (mpi4py's ``Request``): it completes without
    the communication thread, so a rank can post a receive and a send and wait for both.
    ``source`` is the sender's rank in the group once a receive is done."""

    def __init__(self, request, finish: Callable[[Any], Any] | None, outputs: list, keep: Any = None) -> None:
        super().__init__(Future(), finish, outputs)
        self._request, self._keep, self.source = request, keep, -1   # keep: the send buffer stays alive

    def _complete(self, status) -> None:
        self.source = status.Get_source()
        self._future.set_result(None)

    def is_completed(self) -> bool:
        if not self._future.done():
            from mpi4py import MPI
            status = MPI.Status()
            if self._request.Test(status):
                self._complete(status)
        return self._future.done()

    def wait(self, timeout=None) -> bool:
        if not self._future.done():
            from mpi4py import MPI
            status = MPI.Status()
            self._request.Wait(status)
            self._complete(status)
        return super().wait(timeout)
