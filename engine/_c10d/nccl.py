"""The NCCL backend (``cupy.cuda.nccl``): collectives of cuda tensors between GPUs.

Ranks still start under MPI, which carries NCCL's unique id from rank 0 to the others and the
pickled objects of the object collectives. Tensor collectives run on the communication thread,
on the current cupy stream of each rank's GPU (``LOCAL_RANK``; made current on that thread too,
since a thread's current device is its own), and are synchronized before the thread reports them
done. Subgroups (``new_group``) of an NCCL world are MPI groups (cuda tensors through the host),
and gather, scatter, all-to-all and send/recv, which NCCL has no collective for, go through the
host over MPI too. Needs a real GPU and cupy; on CPU, tests/programs/ddp_fake_nccl.py stands in
for both (NCCL's calls with pointers, counts, type and op codes, carried out over MPI).
"""
from __future__ import annotations

import numpy as np

from .mpi import MPIBackend
from .reduce_op import ReduceOp

__all__ = ["NCCLBackend", "nccl_available"]


def nccl_available() -> bool:
    try:
        from cupy.cuda import nccl  # noqa: F401
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:   # no cupy, no driver, no GPU: all mean "not available"
        return False


class NCCLBackend(MPIBackend):
    """NCCL for arrays (cupy arrays in, cupy arrays out); MPI (the base class) for objects."""

    name = "nccl"

    def __init__(self, comm, device_index: int) -> None:
        super().__init__(comm)
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise RuntimeError("Distributed package doesn't have NCCL built in: the 'nccl' backend needs cupy with "
                               "NCCL (cupy-cuda12x) and a GPU; use 'gloo' (MPI) for cpu tensors") from e
        self.cp, self.nccl, self.device_index = cupy, nccl, device_index
        cupy.cuda.Device(device_index).use()
        uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)
        self.nc = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
        self._ops = {ReduceOp.SUM: nccl.NCCL_SUM, ReduceOp.AVG: nccl.NCCL_SUM, ReduceOp.PRODUCT: nccl.NCCL_PROD,
                     ReduceOp.MIN: nccl.NCCL_MIN, ReduceOp.MAX: nccl.NCCL_MAX}

    def array(self, t):
        """``t`` as a contiguous cupy array on this rank's GPU (zero-copy through DLPack)."""
        d = t.detach()
        if d.device.type != "cuda":
            raise ValueError(f"the nccl backend communicates cuda tensors; got a tensor on {d.device}")
        return self.cp.ascontiguousarray(self.cp.from_dlpack(d))

    def _type(self, dtype: np.dtype) -> int:
        n = self.nccl
        table = {"float16": n.NCCL_FLOAT16, "float32": n.NCCL_FLOAT32, "float64": n.NCCL_FLOAT64,
                 "int8": n.NCCL_INT8, "uint8": n.NCCL_UINT8, "int32": n.NCCL_INT32, "int64": n.NCCL_INT64,
                 "bool": n.NCCL_UINT8, "bfloat16": getattr(n, "NCCL_BFLOAT16", None)}
        code = table.get(np.dtype(dtype).name)
        if code is None:
            raise TypeError(f"the nccl backend has no reduction for dtype {np.dtype(dtype).name}")
        return code

    def _op(self, op: ReduceOp, dtype):
        if op not in self._ops:
            raise ValueError(f"the nccl backend has no {op.name} reduction")
        return self._ops[op]

    def _call(self, fn, *args) -> None:
        """One NCCL call on this rank's GPU (current on the calling thread), then wait for it."""
        with self.cp.cuda.Device(self.device_index):
            stream = self.cp.cuda.get_current_stream()
            fn(*args, stream.ptr)
            stream.synchronize()

    def allreduce(self, arr, op):
        out = self.cp.empty_like(arr)
        self._call(self.nc.allReduce, arr.data.ptr, out.data.ptr, arr.size, self._type(arr.dtype),
                   self._op(op, arr.dtype))
        return out

    def reduce(self, arr, op, root):
        out = self.cp.empty_like(arr)
        self._call(self.nc.reduce, arr.data.ptr, out.data.ptr, arr.size, self._type(arr.dtype),
                   self._op(op, arr.dtype), root)
        return out

    def broadcast(self, arr, root):
        arr = self.cp.ascontiguousarray(arr).copy()
        self._call(self.nc.bcast, arr.data.ptr, arr.size, self._type(arr.dtype), root)
        return arr

    def allgather(self, arr):
        out = self.cp.empty((self.size(),) + arr.shape, arr.dtype)
        self._call(self.nc.allGather, arr.data.ptr, out.data.ptr, arr.size, self._type(arr.dtype))
        return out

    def reduce_scatter(self, stacked, op):
        stacked = self.cp.ascontiguousarray(stacked)
        out = self.cp.empty(stacked.shape[1:], stacked.dtype)
        self._call(self.nc.reduceScatter, stacked.data.ptr, out.data.ptr, out.size, self._type(stacked.dtype),
                   self._op(op, stacked.dtype))
        return out

    def barrier(self) -> None:
        self.allreduce(self.cp.zeros(1, self.cp.float32), ReduceOp.SUM)

    # ------------------------------------------------------------------ through the host, over MPI
    def host(self, arr) -> np.ndarray:
        return self.cp.asnumpy(arr)

    def gather(self, arr, root):
        out = super().gather(self.host(arr), root)
        return None if out is None else self.cp.asarray(out)

    def scatter(self, stacked, like, root):
        return self.cp.asarray(super().scatter(None if stacked is None else self.host(stacked),
                                               np.empty(like.shape, like.dtype), root))

    def alltoallv(self, flat, send_counts, recv_counts):
        return self.cp.asarray(super().alltoallv(self.host(flat), send_counts, recv_counts))
