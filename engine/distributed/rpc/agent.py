"""The RPC agent: one per rank, serving requests and matching replies on its MPI communicator.

Requests and replies are pickled tuples sent with ``isend``; the agent's thread polls with
``Iprobe`` and sleeps a millisecond when idle (a blocking receive would spin a core in MPICH).
``shutdown()`` keeps serving until every rank has called it (a non-blocking barrier). A call
with a timeout (its own, or ``rpc_backend_options.rpc_timeout``, 60 s by default; 0: none) fails
with PyTorch's RuntimeError once it has waited that long; a reply that comes later is dropped.
"""
from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ..._c10d.mpi import mpi
from ..._c10d.work import Future
from .constants import DEFAULT_INIT_METHOD, DEFAULT_NUM_WORKER_THREADS, DEFAULT_RPC_TIMEOUT_SEC, UNSET_RPC_TIMEOUT

__all__ = ["init_rpc", "rpc_sync", "rpc_async", "remote", "RRef", "WorkerInfo", "get_worker_info", "shutdown",
           "is_available", "TensorPipeRpcBackendOptions", "UNSET_RPC_TIMEOUT", "DEFAULT_RPC_TIMEOUT_SEC"]

_REQUEST, _REPLY = 1, 2


class TensorPipeRpcBackendOptions:
    """``init_rpc``'s options (PyTorch's names); only ``rpc_timeout`` (seconds, 0: none) matters here,
    the agent being MPI's: the others are kept as given."""

    def __init__(self, *, num_worker_threads: int = DEFAULT_NUM_WORKER_THREADS,
                 rpc_timeout: float = DEFAULT_RPC_TIMEOUT_SEC, init_method: str = DEFAULT_INIT_METHOD,
                 device_maps=None, devices=None) -> None:
        self.num_worker_threads, self.rpc_timeout, self.init_method = num_worker_threads, rpc_timeout, init_method
        self.device_maps, self.devices = device_maps or {}, devices or []


@dataclass(frozen=True)
class WorkerInfo:
    """A worker's name and id (its rank)."""
    name: str
    id: int


class _Agent:
    def __init__(self, name: str, timeout: float = DEFAULT_RPC_TIMEOUT_SEC) -> None:
        MPI = mpi()
        self.timeout = timeout
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        names = self.comm.allgather(name)
        if len(set(names)) != len(names):
            raise RuntimeError(f"init_rpc: worker names must be unique, got {names}")
        self.workers = [WorkerInfo(n, i) for i, n in enumerate(names)]
        self.pending: dict[int, Future] = {}
        self.owned: dict[str, Any] = {}   # RRef id -> value, for the RRefs this worker owns
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.sends: list = []
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, name="tapelab-rpc", daemon=True)
        self.thread.start()

    def info(self, to) -> WorkerInfo:
        if isinstance(to, WorkerInfo):
            return to
        for w in self.workers:
            if to in (w.name, w.id):
                return w
        raise ValueError(f"Unknown destination worker {to!r}; the workers are {[w.name for w in self.workers]}")

    def _send(self, obj, dest: int, tag: int) -> None:
        with self.lock:
            self.sends = [r for r in self.sends if not r.Test()]
            self.sends.append(self.comm.isend(obj, dest=dest, tag=tag))

    def call(self, to, func, args, kwargs, timeout: float = UNSET_RPC_TIMEOUT) -> Future:
        dest = self.info(to).id
        call_id = next(self.ids)
        fut = Future()
        self.pending[call_id] = fut
        limit = self.timeout if timeout is None or timeout < 0 else timeout
        if limit > 0:
            timer = threading.Timer(limit, self._expire, (call_id, limit))
            timer.daemon = True
            timer.start()
        self._send((call_id, func, args, kwargs or {}), dest, _REQUEST)
        return fut

    def _expire(self, call_id: int, limit: float) -> None:
        fut = self.pending.pop(call_id, None)
        if fut is not None:
            fut.set_exception(RuntimeError(f"RPC ran for more than set timeout ({round(limit * 1000)} ms) and will "
                                           "now be marked with an error"))

    def _serve(self) -> None:
        MPI = mpi()
        status = MPI.Status()
        while not self.stopping:
            if not self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
                time.sleep(0.001)
                continue
            src, tag = status.Get_source(), status.Get_tag()
            msg = self.comm.recv(source=src, tag=tag)
            if tag == _REQUEST:
                threading.Thread(target=self._run, args=(src, msg), daemon=True).start()
            else:
                call_id, ok, value = msg
                fut = self.pending.pop(call_id, None)
                if fut is not None:         # (None: it timed out)
                    fut.set_result(value) if ok else fut.set_exception(value)

    def _run(self, src: int, msg) -> None:
        call_id, func, args, kwargs = msg
        try:
            reply = (call_id, True, func(*args, **kwargs))
        except BaseException as e:   # the caller raises it
            reply = (call_id, False, e)
        self._send(reply, src, _REPLY)

    def shutdown(self) -> None:
        done = self.comm.Ibarrier()   # the agent keeps serving until every rank is here
        while not done.Test():
            time.sleep(0.001)
        self.stopping = True
        self.thread.join()
        with self.lock:
            for r in self.sends:
                r.Wait()
        self.comm.Free()


_state: dict = {"agent": None}


def _agent() -> _Agent:
    a = _state["agent"]
    if a is None:
        raise RuntimeError("RPC has not been initialized. Call torch.distributed.rpc.init_rpc first.")
    return a


def is_available() -> bool:
    return True


def init_rpc(name: str, backend=None, rank: int = -1, world_size: int | None = None,
             rpc_backend_options=None) -> None:
    """Start this rank's agent under ``name`` (a collective: every rank calls it)."""
    if _state["agent"] is not None:
        raise RuntimeError("RPC is already initialized")
    comm = mpi().COMM_WORLD
    if world_size is not None and world_size != comm.Get_size() or rank not in (-1, comm.Get_rank()):
        raise ValueError(f"init_rpc: rank={rank}, world_size={world_size} disagree with MPI's rank "
                         f"{comm.Get_rank()} of {comm.Get_size()}")
    _state["agent"] = _Agent(name, getattr(rpc_backend_options, "rpc_timeout", DEFAULT_RPC_TIMEOUT_SEC))


def shutdown(graceful: bool = True, timeout=None) -> None:
    """Wait until every worker has called ``shutdown`` (serving requests meanwhile), then stop."""
    a = _agent()
    a.shutdown()
    _state["agent"] = None


def get_worker_info(worker_name: str | None = None) -> WorkerInfo:
    a = _agent()
    return a.workers[a.rank] if worker_name is None else a.info(worker_name)


def rpc_async(to, func, args: tuple | None = None, kwargs: dict | None = None,
              timeout: float = UNSET_RPC_TIMEOUT) -> Future:
    """Run ``func(*args, **kwargs)`` on worker ``to``; a Future of its result (or exception), or of
    a RuntimeError after ``timeout`` seconds (-1: the agent's ``rpc_timeout``; 0: no timeout)."""
    return _agent().call(to, func, tuple(args or ()), kwargs, timeout)


def rpc_sync(to, func, args: tuple | None = None, kwargs: dict | None = None, timeout: float = UNSET_RPC_TIMEOUT):
    """``rpc_async(...).wait()``."""
    return rpc_async(to, func, args, kwargs, timeout).wait()


# ---------------------------------------------------------------- remote references
def _create(key: str, func, args, kwargs) -> None:
    _agent().owned[key] = func(*args, **kwargs)


def _value(key: str):
    return _agent().owned[key]


def _call_method(key: str, name: str, args, kwargs):
    return getattr(_agent().owned[key], name)(*args, **kwargs)


class RRef:
    """A reference to a value owned by one worker. ``RRef(value)`` owns a local value;
    ``remote(...)`` makes one owned by the callee."""

    def __init__(self, value=None, *, _owner: int | None = None, _key: str | None = None, _ready: Future | None = None):
        if _key is None:
            a = _agent()
            _key, _owner = uuid.uuid4().hex, a.rank
            a.owned[_key] = value
        self._owner, self._key, self._ready = _owner, _key, _ready

    def __reduce__(self):
        return (_rebuild_rref, (self._owner, self._key))

    def owner(self) -> WorkerInfo:
        return _agent().workers[self._owner]

    def owner_name(self) -> str:
        return self.owner().name

    def is_owner(self) -> bool:
        return _agent().rank == self._owner

    def confirmed_by_owner(self) -> bool:
        return self._ready is None or self._ready.done()

    def _wait(self) -> None:
        if self._ready is not None:
            self._ready.wait()

    def local_value(self):
        if not self.is_owner():
            raise RuntimeError(f"Call it on {self.owner_name()} to get its value: local_value() is for the owner")
        self._wait()
        return _agent().owned[self._key]

    def to_here(self, timeout=None):
        """A copy of the value on this worker."""
        self._wait()
        return _value(self._key) if self.is_owner() else rpc_sync(self._owner, _value, (self._key,))

    def rpc_sync(self, timeout=None) -> "_Proxy":
        return _Proxy(self, rpc_sync)

    def rpc_async(self, timeout=None) -> "_Proxy":
        return _Proxy(self, rpc_async)

    def __repr__(self) -> str:
        return f"RRef(owner={self._owner}, key={self._key[:8]})"


def _rebuild_rref(owner: int, key: str) -> RRef:
    return RRef(_owner=owner, _key=key)


class _Proxy:
    """``rref.rpc_sync().method(*args)``: call a method of the referenced value on its owner."""

    def __init__(self, rref: RRef, call) -> None:
        self._rref, self._call = rref, call

    def __getattr__(self, name: str):
        def method(*args, **kwargs):
            self._rref._wait()
            return self._call(self._rref._owner, _call_method, (self._rref._key, name, args, kwargs))
        return method


def remote(to, func, args: tuple | None = None, kwargs: dict | None = None, timeout: float = UNSET_RPC_TIMEOUT) -> RRef:
    """Run ``func`` on worker ``to`` and keep the result there; returns an RRef to it at once."""
    a = _agent()
    owner = a.info(to).id
    key = uuid.uuid4().hex
    ready = rpc_async(owner, _create, (key, func, tuple(args or ()), kwargs or {}), timeout=timeout)
    return RRef(_owner=owner, _key=key, _ready=ready)
