"""DataLoader: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` each worker gets batch tasks on its own queue and returns results
on a shared one; the main process hands batches out in task order, whatever order they
finish in. Results travel pickled between the loader's own processes (never from files).
A worker's exception comes back with its traceback and is re-raised in the main process.
With ``persistent_workers`` the workers (and their random streams, and the worker seed drawn
at the first pass) outlive a pass: each pass is numbered, and a result of an earlier pass
abandoned midway is dropped.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import random
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator

from ...base.device import cuda_available
from ...base.runtime import set_num_threads
from ...core.random import Generator, manual_seed
from ._collate import default_collate, default_convert
from .fetch import _IterableDatasetFetcher, _MapDatasetFetcher
from .dataset import Dataset, IterableDataset, T_co, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, _draw_seed
from .worker import _generate_state

__all__ = ["DataLoader", "get_worker_info", "WorkerInfo"]

# PyTorch's annotation aliases, which libraries import from here (opacus' DPDataLoader)
_worker_init_fn_t = Callable[[int], None]
_collate_fn_t = Callable[[list], Any]



class _DatasetKind:
    """PyTorch's two kinds of dataset a loader reads (``loader._dataset_kind``), and the fetcher
    that reads each."""
    Map = 0
    Iterable = 1

    @staticmethod
    def create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
        cls = _MapDatasetFetcher if kind == _DatasetKind.Map else _IterableDatasetFetcher
        return cls(dataset, auto_collation, collate_fn, drop_last)


class _InfiniteConstantSampler(Sampler):
    """``None`` forever: the index sampler of a loader over an iterable dataset."""

    def __iter__(self):
        while True:
            yield None


_STATUS_POLL_S = 0.5  # how often a waiting main process checks that its workers are alive
_SHUTDOWN_GRACE_S = 5.0  # how long a normal shutdown lets a worker finish its current batch


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in (optionally shuffled) mini-batches, like ``torch.utils.data.DataLoader``."""

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler: Sampler | None = None,
                 num_workers: int = 0, collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable | None = None,
                 multiprocessing_context=None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        _check_options(num_workers, timeout, prefetch_factor, persistent_workers)
        self.dataset, self.num_workers, self.timeout = dataset, num_workers, timeout
        self.worker_init_fn, self.generator, self.pin_memory = worker_init_fn, generator, pin_memory
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = 2 if num_workers > 0 and prefetch_factor is None else prefetch_factor
        self.persistent_workers, self.in_order = persistent_workers, in_order
        self._workers: _Workers | None = None    # the persistent workers, once started
        self.pin_memory_device = pin_memory_device
        self._iterable = isinstance(dataset, IterableDataset)
        self._IterableDataset_len_called = None
        if self._iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, "
                                     f"but got {name}={value}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        auto = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn if collate_fn is not None else (default_collate if auto else default_convert)
        self.check_worker_number_rationality()
        self.__initialized = True

    __initialized = False
    _FROZEN = frozenset(("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"))

    def __setattr__(self, attr: str, val: Any) -> None:
        # PyTorch's: what decides the batches is fixed once the loader is made (a pass already made
        # its batch sampler from them)
        if attr in DataLoader._FROZEN and self.__initialized:
            raise ValueError(f"{attr} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def multiprocessing_context(self):
        return self.__dict__.get("_mp_context")

    @multiprocessing_context.setter
    def multiprocessing_context(self, context) -> None:
        """PyTorch's checks: only with workers; a start method's name becomes its context object."""
        if context is not None:
            if self.num_workers <= 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{methods!r}, but got multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={context}")
        self.__dict__["_mp_context"] = context

    def check_worker_number_rationality(self) -> None:
        """PyTorch's warning when ``num_workers`` exceeds the CPUs this process may use (given at
        construction and at each pass with workers, as PyTorch's; programs print it)."""
        if not self.num_workers:
            return
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if cpus is not None and self.num_workers <= cpus:
            return
        if cpus is None:
            suggestion = "DataLoader is not able to compute a suggested max number of worker in current system."
        else:
            cpuset = "" if hasattr(os, "sched_getaffinity") else " (`cpuset` is not taken into account)"
            suggestion = (f"Our suggested max number of worker in current system is {cpus}{cpuset}, which is "
                          "smaller than what this DataLoader is going to create.")
        warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. {suggestion} "
                      "Please be aware that excessive worker creation might get DataLoader running slow or even "
                      "freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
                      stacklevel=2)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    @property
    def _dataset_kind(self) -> int:
        return _DatasetKind.Iterable if self._iterable else _DatasetKind.Map

    @property
    def _index_sampler(self):
        """What PyTorch's iterators draw each batch's index from: the batch sampler when batching
        (an iterable dataset's: batches of ``None``), else the sampler."""
        if self._iterable:
            sampler = _InfiniteConstantSampler()
            return BatchSampler(sampler, self.batch_size, self.drop_last) if self.batch_size is not None else sampler
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self) -> "_BaseDataLoaderIter":
        return self._get_iterator()

    def _get_iterator(self) -> "_BaseDataLoaderIter":
        """One pass's iterator, the method PyTorch's ``__iter__`` calls: a subclass that overrides
        ``__iter__`` calls it to keep one iterator across epochs (ultralytics' ``InfiniteDataLoader``
        over a batch sampler that repeats forever)."""
        # as PyTorch's iterator: the sampler's iterator first, then the pass's worker seed drawn from
        # the loader's generator (with no workers too), so the draws that follow are PyTorch's numbers
        # (persistent workers keep the first pass's seed: later passes draw only the sampler's)
        indices = None if self._iterable else iter(self.batch_sampler if self.batch_sampler is not None
                                                    else self.sampler)
        workers = self._workers if self.persistent_workers else None
        base_seed = _draw_seed(self.generator) if workers is None else None
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self, self._single_process(indices))
        self.check_worker_number_rationality()
        if workers is None:
            workers = _Workers(self, base_seed)
            if self.persistent_workers:
                self._workers = workers
        return _MultiProcessingDataLoaderIter(self, self._multi_process(workers, indices))

    def _multi_process(self, workers: "_Workers", indices: Iterator | None) -> Iterator[Any]:
        """One pass over ``workers``; they stop after it unless persistent (and on any failure)."""
        grace, keep = 0.0, self.persistent_workers   # an error (a timeout, a dead worker) stops them at once
        try:
            yield from workers.run(self, indices)
            grace = _SHUTDOWN_GRACE_S
        except GeneratorExit:
            grace = _SHUTDOWN_GRACE_S   # the consumer stopped early: workers finish their current batch
            raise
        except BaseException as e:
            keep = keep and getattr(e, "_tapelab_from_worker", False)   # a dataset's error leaves them usable
            raise
        finally:
            if not keep:
                if self._workers is workers:
                    self._workers = None
                workers.shutdown(grace)

    def __del__(self) -> None:
        workers = self.__dict__.get("_workers")
        if workers is not None:
            workers.shutdown(0.0)

    def _job(self) -> "_Job":
        return _Job(self.dataset, self.collate_fn, self._auto_collation, self.batch_size, self.drop_last,
                    self._iterable)

    def _single_process(self, indices: Iterator | None) -> Iterator[Any]:
        job = self._job()
        if self._iterable:
            for batch in _stream(self.dataset, job):
                yield job.collate_fn(batch)
        else:
            for index in indices:
                yield job.fetch(index)


class _BaseDataLoaderIter:
    """What ``iter(loader)`` returns: one pass over the batches. PyTorch's iterator types, which
    libraries test with ``isinstance`` (Lightning's CombinedLoader), over tapelab's generators.

    Made as PyTorch's, ``_SingleProcessDataLoaderIter(loader)`` (no ``batches``), the pass reads
    PyTorch's loader attributes (``dataset``, ``_dataset_kind``, ``_index_sampler``,
    ``_auto_collation``, ``collate_fn``, ``drop_last``, ``generator``, ``num_workers``...), so a
    library's own loader-like object drives it (fastai's ``DataLoader`` does)."""

    def __init__(self, loader: DataLoader, batches: Iterator[Any] | None = None) -> None:
        if batches is None:
            batches = self._pass(loader)
        self._dataset, self._batches, self._num_yielded = loader.dataset, batches, 0
        self._loader = loader
        _warn_pin_memory(loader)

    def _pass(self, loader) -> Iterator[Any]:
        # PyTorch's order: the index sampler's iterator, then the pass's worker seed from the generator
        indices = iter(loader._index_sampler)
        base_seed = _draw_seed(loader.generator)
        kind = loader._dataset_kind
        if loader.num_workers == 0:
            return _fetched(_DatasetKind.create_fetcher(kind, loader.dataset, loader._auto_collation,
                                                        loader.collate_fn, loader.drop_last), indices)
        iterable = kind == _DatasetKind.Iterable
        job = _Job(loader.dataset, loader.collate_fn, loader._auto_collation,
                   getattr(loader, "batch_size", None) if iterable else None, loader.drop_last, iterable)
        return _one_pass(loader, _Workers(loader, base_seed, job), None if iterable else indices)

    def __iter__(self) -> "_BaseDataLoaderIter":
        return self

    def __next__(self) -> Any:
        batch = next(self._batches)
        self._num_yielded += 1
        return batch

    def __len__(self) -> int:
        length = getattr(type(self._loader), "__len__", None)
        return length(self._loader) if length is not None else len(self._loader._index_sampler)

    def close(self) -> None:
        """Stop the pass early (workers, if any, finish their current batch and exit)."""
        self._batches.close()


def _fetched(fetcher, indices: Iterator) -> Iterator[Any]:
    for index in indices:
        try:
            batch = fetcher.fetch(index)
        except StopIteration:
            return
        yield batch


def _one_pass(loader, workers: "_Workers", indices: Iterator | None) -> Iterator[Any]:
    """A pass over workers started for it alone (a loader-like object keeps none between passes)."""
    grace = 0.0
    try:
        yield from workers.run(loader, indices)
        grace = _SHUTDOWN_GRACE_S
    except GeneratorExit:
        grace = _SHUTDOWN_GRACE_S
        raise
    finally:
        workers.shutdown(grace)


def _warn_pin_memory(loader: DataLoader) -> None:
    """PyTorch's warnings at the start of each pass (programs print them: imagenet asks for pinned memory)."""
    if loader.pin_memory and getattr(loader, "pin_memory_device", ""):
        warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                      f"ignore pin_memory_device='{loader.pin_memory_device}'.", stacklevel=3)
    if loader.pin_memory and not cuda_available():
        warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                      "then device pinned memory won't be used.", stacklevel=3)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """The batches loaded in this process (``num_workers=0``)."""


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """The batches loaded by worker processes."""

    def _shutdown_workers(self) -> None:
        self.close()


def _check_options(num_workers, timeout, prefetch_factor, persistent_workers) -> None:
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                         "multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing.let "
                         "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
    if prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")


@dataclass
class _Job:
    """What a process needs to turn a task into a batch."""
    dataset: Any
    collate_fn: Callable
    auto_collation: bool
    batch_size: int | None
    drop_last: bool
    iterable: bool

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if type(self.dataset) is TensorDataset and self.collate_fn is default_collate and index:
            batch = self.dataset._collated(index)
            if batch is not None:
                return batch
        getitems = getattr(self.dataset, "__getitems__", None)
        samples = getitems(index) if getitems is not None else [self.dataset[i] for i in index]
        return self.collate_fn(samples)


def _stream(dataset, job: _Job) -> Iterator[Any]:
    """An iterable dataset's samples, grouped into lists of ``batch_size`` when batching."""
    if job.batch_size is None:
        yield from dataset
        return
    batch = []
    for sample in dataset:
        batch.append(sample)
        if len(batch) == job.batch_size:
            yield batch
            batch = []
    if batch and not job.drop_last:
        yield batch


# ---------------------------------------------------------------- workers
@dataclass(frozen=True)
class WorkerInfo:
    """Inside a worker process: which worker this is, how many there are, its seed and dataset copy;
    ``rng`` and ``worker_method`` as PyTorch's (its thread workers' generators; tapelab's workers are
    processes)."""
    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Any = None
    worker_method: str | None = "multiprocessing"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's WorkerInfo, or None in the main process (use it to shard an IterableDataset)."""
    return _worker_info


class _WorkerError:
    """An exception raised in a worker, carried to the main process as its type and traceback text."""

    def __init__(self, worker_id: int):
        exc_type, exc, tb = sys.exc_info()
        self.text = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = f"in DataLoader worker process {worker_id}"
        try:  # a class the main process cannot import (defined in a function) becomes RuntimeError
            pickle.loads(pickle.dumps(exc_type))
            self.exc_type = exc_type
        except Exception:
            self.exc_type = RuntimeError

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.text}"
        try:
            exc = self.exc_type(msg)
        except Exception:
            exc = None
        if exc is None:
            exc = RuntimeError(msg)
        exc._tapelab_from_worker = True   # the loader's workers themselves are fine
        raise exc


class _End:
    """An iterable-dataset worker has no more batches."""


def _pack(result) -> bytes:
    """Pickle in the worker, so an unpicklable batch becomes an error rather than a lost message."""
    try:
        return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps(_WorkerError(_worker_info.id if _worker_info else -1))


def _worker_loop(job: _Job, tasks, results, worker_id: int, num_workers: int, seed: int,
                 init_fn: Callable | None, stop=None) -> None:
    global _worker_info
    import numpy as np
    set_num_threads(1)     # as PyTorch's workers: N worker processes, each one intra-op thread
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(_generate_state(seed - worker_id, worker_id))
    _worker_info = WorkerInfo(worker_id, num_workers, seed, job.dataset)
    failed = stream = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
    except Exception:
        failed = _WorkerError(worker_id)
    current = None
    while True:
        task = tasks.get()
        if task is None or (stop is not None and stop.is_set()):
            break   # shutting down: prefetched tasks behind this one are never computed
        epoch, tid, index = task
        if epoch != current:   # a new pass (persistent workers): an iterable dataset starts over
            current, stream = epoch, None
        if failed is not None:
            results.put((epoch, tid, _pack(failed)))
            continue
        try:
            if job.iterable:
                if stream is None:
                    stream = _stream(job.dataset, job)
                out = job.collate_fn(next(stream))
            else:
                out = job.fetch(index)
        except StopIteration:
            out = _End()
        except Exception:
            out = _WorkerError(worker_id)
        results.put((epoch, tid, _pack(out)))
    results.cancel_join_thread()  # exit promptly even if the main process stopped reading


class _Workers:
    """A loader's worker processes, their task queues and the shared result queue."""

    def __init__(self, loader: DataLoader, base_seed: int, job: _Job | None = None) -> None:
        ctx = loader.multiprocessing_context
        ctx = multiprocessing.get_context(ctx) if ctx is None or isinstance(ctx, str) else ctx
        n, job = loader.num_workers, job if job is not None else loader._job()
        self.results, self.stop = ctx.Queue(), ctx.Event()
        self.task_queues = [ctx.Queue() for _ in range(n)]
        self.processes = [ctx.Process(target=_worker_loop, daemon=True,
                                      args=(job, self.task_queues[w], self.results, w, n, base_seed + w,
                                            loader.worker_init_fn, self.stop))
                          for w in range(n)]
        for w in self.processes:
            w.start()
        self.epoch = 0
        self.closed = False

    def run(self, loader: DataLoader, indices: Iterator | None) -> Iterator[Any]:
        """One pass: keep ``prefetch_factor`` tasks per worker in flight; yield results in task order."""
        self.epoch += 1
        epoch, processes, n = self.epoch, self.processes, len(self.processes)
        active = list(range(n))  # workers still producing (iterable datasets run dry one by one)
        pending: dict[int, int] = {}  # task id -> worker
        done: dict[int, Any] = {}
        next_task = next_out = 0

        def send() -> None:
            nonlocal next_task
            if not active:
                return
            if indices is None:
                index = None
            else:
                index = next(indices, _End)
                if index is _End:
                    active.clear()
                    return
            worker = active[next_task % len(active)]
            self.task_queues[worker].put((epoch, next_task, index))
            pending[next_task] = worker
            next_task += 1

        for _ in range(max(loader.prefetch_factor, 1) * n):
            send()
        while pending:
            while next_out not in done:
                tag, tid, payload = _receive(self.results, processes, loader.timeout)
                if tag == epoch:   # else a result of an earlier pass that stopped midway
                    done[tid] = pickle.loads(payload)
            out, worker = done.pop(next_out), pending.pop(next_out)
            next_out += 1
            if isinstance(out, _End):
                if worker in active:
                    active.remove(worker)
            else:
                send()
                if isinstance(out, _WorkerError):
                    out.reraise()
                yield out
            if not pending:
                send()

    def shutdown(self, grace: float) -> None:
        if not self.closed:
            self.closed = True
            _shutdown(self.processes, self.task_queues, self.results, self.stop, grace)


def _receive(results, workers, timeout: float):
    start = time.monotonic()
    while True:
        wait = _STATUS_POLL_S if not timeout else min(_STATUS_POLL_S, max(timeout - (time.monotonic() - start), 0.01))
        try:
            return results.get(timeout=wait)
        except queue.Empty:
            if timeout and time.monotonic() - start >= timeout:
                raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None
            dead = [str(w.pid) for w in workers if not w.is_alive()]
            if dead:
                raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(dead)}) exited unexpectedly "
                                   f"(exit codes {[w.exitcode for w in workers if not w.is_alive()]})") from None


def _shutdown(workers, task_queues, results, stop=None, grace: float = _SHUTDOWN_GRACE_S) -> None:
    """Stop the workers: each exits after its current batch (``stop`` makes it skip the batches
    prefetched behind it); one still busy after ``grace`` seconds is terminated (then killed).

    The error path passes ``grace=0``: a timed-out or failed loader raises at once, as
    ``timeout`` promises, instead of waiting for a slow ``__getitem__`` to return.
    """
    if stop is not None:
        stop.set()
    for q in task_queues:
        q.put(None)
    deadline = time.monotonic() + grace
    for w in workers:
        if grace > 0:
            w.join(timeout=max(deadline - time.monotonic(), 0.0))
        if w.is_alive():
            w.terminate()
    for w in workers:
        w.join(timeout=1.0)
        if w.is_alive():
            w.kill()
            w.join()
    for q in (*task_queues, results):
        q.cancel_join_thread()
        q.close()
