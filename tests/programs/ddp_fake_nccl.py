"""Stand-ins for ``cupy`` and ``cupy.cuda.nccl`` so that the nccl backend (engine/_c10d/nccl.py)
runs on CPU, between real MPI ranks, with the calls it makes on a GPU.

``FakeCupy`` is the simulated cuda device's array namespace (numpy behind ``SimArray``s, which
refuse to mix with host arrays as cupy's do; ``.data.ptr`` is the address of their memory) plus
``cuda.Device`` (a current device per thread, as CUDA keeps it) and ``cuda.get_current_stream()``.
``FakeNccl`` has NCCL's type and op codes and a ``NcclCommunicator(ndev, commId, rank)`` whose
methods take what cupy's take, raw pointers, element counts, a type code, an op code, a root and
a stream pointer, read and write the memory at those addresses, and carry the collective out over
MPI (``COMM_WORLD``, one rank or several). Each call checks what NCCL would: the communicator is
used on its own device from the calling thread, the codes are known, the stream is a pointer.
Every call is logged in ``NcclCommunicator.calls`` as (name, count, type code).

``installed()`` puts both under the names ``cupy``, ``cupy.cuda`` and ``cupy.cuda.nccl`` in
``sys.modules`` while ``init_process_group("nccl")`` imports them, and takes them out again, so
tapelab's own device code never meets them.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import types

import ml_dtypes
import numpy as np

from tapelab._simarray import _SimNamespace

# NCCL's codes (nccl.h): ncclDataType_t and ncclRedOp_t
NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32, NCCL_INT64, NCCL_UINT64 = 0, 1, 2, 3, 4, 5
NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64, NCCL_BFLOAT16 = 6, 7, 8, 9
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = 0, 1, 2, 3, 4

_TYPES = {NCCL_INT8: np.int8, NCCL_UINT8: np.uint8, NCCL_INT32: np.int32, NCCL_UINT32: np.uint32,
          NCCL_INT64: np.int64, NCCL_UINT64: np.uint64, NCCL_FLOAT16: np.float16, NCCL_FLOAT32: np.float32,
          NCCL_FLOAT64: np.float64, NCCL_BFLOAT16: ml_dtypes.bfloat16}
_OPS = {NCCL_SUM: np.add, NCCL_PROD: np.multiply, NCCL_MAX: np.maximum, NCCL_MIN: np.minimum}

_current = threading.local()     # the current device of each thread (CUDA's default: 0)


def _device() -> int:
    return getattr(_current, "index", 0)


class _Device:
    def __init__(self, index: int = 0) -> None:
        self.id = index

    def use(self) -> None:
        _current.index = self.id

    def __enter__(self):
        self._prev = _device()
        _current.index = self.id
        return self

    def __exit__(self, *exc) -> None:
        _current.index = self._prev

    def synchronize(self) -> None:
        pass


class _Stream:
    ptr = 0          # the legacy default stream

    def synchronize(self) -> None:
        pass


class FakeCupy(_SimNamespace):
    """cupy on the simulated device: its arrays, ``asnumpy``, ``cuda.Device`` and streams."""

    def __init__(self) -> None:
        super().__init__()
        self.__name__ = "cupy"
        self.cuda = types.SimpleNamespace(Device=_Device, get_current_stream=lambda: _Stream(),
                                          is_available=lambda: True, nccl=FakeNccl)


def _at(ptr: int, count: int, code: int) -> np.ndarray:
    """The ``count`` elements of type ``code`` at address ``ptr``, as a writable numpy view."""
    dtype = np.dtype(_TYPES[code])
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dtype, count=count)


def _reduce(parts: list, op: int) -> np.ndarray:
    if op == NCCL_AVG:
        return (np.sum(parts, axis=0) / len(parts)).astype(parts[0].dtype)
    out = parts[0].copy()
    for p in parts[1:]:
        _OPS[op](out, p, out=out)
    return out


class NcclCommunicator:
    """One rank's communicator: NCCL's calls, carried out over MPI between the ranks."""

    def __init__(self, ndev: int, commId: tuple, rank: int) -> None:
        from mpi4py import MPI
        self.comm = MPI.COMM_WORLD.Dup()    # like NCCL's init: a collective of every rank
        if (ndev, rank) != (self.comm.Get_size(), self.comm.Get_rank()):
            raise RuntimeError(f"NcclCommunicator(ndev={ndev}, rank={rank}) in a world of {self.comm.Get_size()} "
                               f"where this process is rank {self.comm.Get_rank()}")
        if len(set(self.comm.allgather(tuple(commId)))) != 1:
            raise RuntimeError("NcclCommunicator: the ranks were given different unique ids")
        self.dev = _device()
        self.calls: list = []
        _communicators.append(self)

    def _check(self, name: str, count: int, code: int, stream: int, op: int | None = None) -> None:
        if _device() != self.dev:
            raise RuntimeError(f"{name}: the communicator of device {self.dev} used while device {_device()} is "
                               "current on this thread (ncclInvalidUsage)")
        if code not in _TYPES or (op is not None and op not in (*_OPS, NCCL_AVG)):
            raise RuntimeError(f"{name}: unknown type code {code} or op code {op} (ncclInvalidArgument)")
        if type(stream) is not int or type(count) is not int or count < 0:
            raise TypeError(f"{name}: count and stream must be ints (a size_t and a cudaStream_t pointer)")
        self.calls.append((name, count, code))

    def allReduce(self, sendbuf: int, recvbuf: int, count: int, datatype: int, op: int, stream: int) -> None:
        self._check("allReduce", count, datatype, stream, op)
        parts = self.comm.allgather(_at(sendbuf, count, datatype).copy())
        _at(recvbuf, count, datatype)[:] = _reduce(parts, op)

    def reduce(self, sendbuf: int, recvbuf: int, count: int, datatype: int, op: int, root: int, stream: int) -> None:
        self._check("reduce", count, datatype, stream, op)
        parts = self.comm.gather(_at(sendbuf, count, datatype).copy(), root=root)
        if parts is not None:
            _at(recvbuf, count, datatype)[:] = _reduce(parts, op)

    def bcast(self, buff: int, count: int, datatype: int, root: int, stream: int) -> None:
        self._check("bcast", count, datatype, stream)
        mine = _at(buff, count, datatype)
        mine[:] = self.comm.bcast(mine.copy() if self.comm.Get_rank() == root else None, root=root)

    def allGather(self, sendbuf: int, recvbuf: int, count: int, datatype: int, stream: int) -> None:
        self._check("allGather", count, datatype, stream)
        parts = self.comm.allgather(_at(sendbuf, count, datatype).copy())
        _at(recvbuf, count * len(parts), datatype)[:] = np.concatenate(parts)

    def reduceScatter(self, sendbuf: int, recvbuf: int, recvcount: int, datatype: int, op: int,
                      stream: int) -> None:
        self._check("reduceScatter", recvcount, datatype, stream, op)
        n, r = self.comm.Get_size(), self.comm.Get_rank()
        whole = _reduce(self.comm.allgather(_at(sendbuf, recvcount * n, datatype).copy()), op)
        _at(recvbuf, recvcount, datatype)[:] = whole[r * recvcount:(r + 1) * recvcount]


_communicators: list = []


def get_unique_id() -> tuple:
    return tuple(int(b) for b in os.urandom(128))


FakeNccl = types.ModuleType("cupy.cuda.nccl")
for _name, _value in list(globals().items()):
    if _name.startswith("NCCL_"):
        setattr(FakeNccl, _name, _value)
FakeNccl.NcclCommunicator, FakeNccl.get_unique_id = NcclCommunicator, get_unique_id


def communicator() -> NcclCommunicator:
    """The communicator the backend made last (to read its ``calls``)."""
    return _communicators[-1]


@contextlib.contextmanager
def installed():
    """``cupy`` and ``cupy.cuda.nccl`` are the stand-ins within the block (e.g. around
    ``init_process_group("nccl")``), and whatever they were before afterwards."""
    cupy = FakeCupy()
    names = {"cupy": cupy, "cupy.cuda": cupy.cuda, "cupy.cuda.nccl": FakeNccl}
    saved = {k: sys.modules.get(k) for k in names}
    sys.modules.update(names)
    try:
        yield cupy
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
