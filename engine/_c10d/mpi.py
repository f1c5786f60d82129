"""The MPI backend (mpi4py): collectives on numpy arrays of one communicator.

Every call here runs on the group's communication thread (``group.py``), in program order, so
the ranks meet in their collectives in the same order. 16-bit floats (float16, bfloat16) have no
MPI type: they travel as 16-bit words and are reduced by a user-defined operation that views them
as their numpy dtype, so the fp16/bf16 compression hooks really halve the bytes on the wire.
"""
from __future__ import annotations

import numpy as np

from .reduce_op import ReduceOp

__all__ = ["MPIBackend", "mpi"]


def mpi():
    """mpi4py's MPI module (the ``mpi`` extra), imported on first use: MPI starts only when asked."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("the 'mpi' backend needs mpi4py and an MPI library: pip install 'tapelab[mpi]' "
                           "(mpi4py, mpich)") from e
    return MPI


_NUMPY_OPS = {ReduceOp.SUM: np.add, ReduceOp.PRODUCT: np.multiply, ReduceOp.MIN: np.minimum,
              ReduceOp.MAX: np.maximum, ReduceOp.AVG: np.add}
_MPI_OPS = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD", ReduceOp.MIN: "MIN",
            ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND", ReduceOp.BOR: "BOR", ReduceOp.BXOR: "BXOR"}


class MPIBackend:
    """Collectives of one MPI communicator over contiguous numpy arrays."""

    name = "mpi"

    def __init__(self, comm) -> None:
        self.comm = comm
        self._user_ops: dict = {}

    # ------------------------------------------------------------------ buffers and operations
    def _buf(self, arr: np.ndarray):
        if arr.dtype.itemsize == 2 and arr.dtype.kind not in "iu":   # float16 / bfloat16
            return [arr.view(np.uint16), mpi().UINT16_T]
        if arr.dtype == np.bool_:
            return [arr.view(np.uint8), mpi().UINT8_T]
        return arr

    def _op(self, op: ReduceOp, dtype: np.dtype):
        MPI = mpi()
        if dtype.itemsize == 2 and dtype.kind not in "iu":
            key = (op, dtype.str, dtype.name)
            if key not in self._user_ops:
                ufunc = _NUMPY_OPS[op]

                def reduce16(inmem, inoutmem, datatype, ufunc=ufunc, dtype=dtype):
                    a = np.frombuffer(inmem, dtype=dtype)
                    b = np.frombuffer(inoutmem, dtype=dtype)
                    ufunc(a, b, out=b)
                self._user_ops[key] = MPI.Op.Create(reduce16, commute=True)
            return self._user_ops[key]
        if dtype == np.bool_:   # PyTorch: SUM and MAX of bools are OR, PRODUCT and MIN are AND
            return MPI.BOR if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR) else MPI.BAND
        return getattr(MPI, _MPI_OPS[op])

    def close(self) -> None:
        for op in self._user_ops.values():
            op.Free()
        self._user_ops.clear()

    def array(self, t) -> np.ndarray:
        """``t``'s values as a contiguous host array (cuda tensors are copied to the host)."""
        d = t.detach()
        if d.device.type != "cpu":
            d = d.cpu()
        return np.ascontiguousarray(d.numpy())

    # ------------------------------------------------------------------ collectives
    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def barrier(self) -> None:
        self.comm.Barrier()

    def allreduce(self, arr: np.ndarray, op: ReduceOp) -> np.ndarray:
        out = np.empty_like(arr)
        self.comm.Allreduce(self._buf(arr), self._buf(out), op=self._op(op, arr.dtype))
        return out

    def reduce(self, arr: np.ndarray, op: ReduceOp, root: int) -> np.ndarray:
        out = np.empty_like(arr)
        self.comm.Reduce(self._buf(arr), self._buf(out), op=self._op(op, arr.dtype), root=root)
        return out

    def broadcast(self, arr: np.ndarray, root: int) -> np.ndarray:
        arr = np.ascontiguousarray(arr).copy()
        self.comm.Bcast(self._buf(arr), root=root)
        return arr

    def allgather(self, arr: np.ndarray) -> np.ndarray:
        out = np.empty((self.size(),) + arr.shape, arr.dtype)
        self.comm.Allgather(self._buf(arr), self._buf(out))
        return out

    def gather(self, arr: np.ndarray, root: int) -> np.ndarray | None:
        out = np.empty((self.size(),) + arr.shape, arr.dtype) if self.rank() == root else None
        self.comm.Gather(self._buf(arr), self._buf(out) if out is not None else None, root=root)
        return out

    def scatter(self, stacked: np.ndarray | None, like: np.ndarray, root: int) -> np.ndarray:
        out = np.empty_like(like)
        self.comm.Scatter(self._buf(stacked) if stacked is not None else None, self._buf(out), root=root)
        return out

    def reduce_scatter(self, stacked: np.ndarray, op: ReduceOp) -> np.ndarray:
        out = np.empty(stacked.shape[1:], stacked.dtype)
        self.comm.Reduce_scatter_block(self._buf(stacked), self._buf(out), op=self._op(op, stacked.dtype))
        return out

    def alltoall(self, stacked: np.ndarray) -> np.ndarray:
        out = np.empty_like(stacked)
        self.comm.Alltoall(self._buf(stacked), self._buf(out))
        return out

    def alltoallv(self, flat: np.ndarray, send_counts: list[int], recv_counts: list[int]) -> np.ndarray:
        """Uneven all-to-all of flat arrays: ``send_counts[j]`` elements go to rank j."""
        out = np.empty(sum(recv_counts), flat.dtype)
        (sb, st), (rb, rt) = self._typed(flat), self._typed(out)
        self.comm.Alltoallv([sb, send_counts, st], [rb, recv_counts, rt])
        return out

    def _typed(self, arr: np.ndarray):
        buf = self._buf(arr)
        return buf if isinstance(buf, list) else (arr, mpi()._typedict[arr.dtype.char])

    def host(self, arr) -> np.ndarray:
        """``arr`` as a host array for MPI's own calls (already one here; a device array's copy in NCCL)."""
        return arr

    # ------------------------------------------------------------------ point to point (any thread)
    def isend(self, arr: np.ndarray, dst: int, tag: int):
        return self.comm.Isend(self._buf(arr), dest=dst, tag=tag)

    def irecv(self, arr: np.ndarray, src: int | None, tag: int):
        return self.comm.Irecv(self._buf(arr), source=mpi().ANY_SOURCE if src is None else src, tag=tag)

    # ------------------------------------------------------------------ Python objects (pickled)
    def allgather_object(self, obj) -> list:
        return self.comm.allgather(obj)

    def broadcast_object(self, obj, root: int):
        return self.comm.bcast(obj, root=root)

    def gather_object(self, obj, root: int):
        return self.comm.gather(obj, root=root)

    def scatter_object(self, objs, root: int):
        return self.comm.scatter(objs, root=root)

    def send_object(self, obj, dst: int, tag: int) -> None:
        self.comm.send(obj, dest=dst, tag=tag)

    def recv_object(self, src: int, tag: int):
        return self.comm.recv(source=src, tag=tag)

    def split(self, ranks: list[int]) -> "MPIBackend | None":
        """The backend of a subgroup (a collective call over this communicator: every rank calls it)."""
        comm = self.comm.Split(0 if self.rank() in ranks else mpi().UNDEFINED, key=ranks.index(self.rank())
                               if self.rank() in ranks else 0)
        return None if comm == mpi().COMM_NULL else MPIBackend(comm)
