"""The NCCL backend (``cupy.cuda.nccl``): collectives of cuda tensors between GPUs.

Ranks still start under MPI, which carries NCCL's unique id from rank 0 to the others and the
pickled objects of the object collectives. Tensor collectives run on the current cupy stream of
each rank's GPU (``LOCAL_RANK``) and are synchronized before the communication thread reports
them done. Needs a real GPU and cupy; the simulated cuda device has no NCCL. Subgroups
(``new_group``) of an NCCL world are MPI groups (cuda tensors through the host), and gather,
scatter and all-to-all are not served by NCCL here.
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
        import cupy
        from cupy.cuda import nccl
        self.cp, self.nccl = cupy, nccl
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

    def _sync(self, out):
        self.cp.cuda.get_current_stream().synchronize()
        return out

    def allreduce(self, arr, op):
        out = self.cp.empty_like(arr)
        self.nc.allReduce(arr.data.ptr, out.data.ptr, arr.size, self._type(arr.dtype), self._op(op, arr.dtype),
                          self.cp.cuda.get_current_stream().ptr)
        return self._sync(out)

    def reduce(self, arr, op, root):
        out = self.cp.empty_like(arr)
        self.nc.reduce(arr.data.ptr, out.data.ptr, arr.size, self._type(arr.dtype), self._op(op, arr.dtype), root,
                       self.cp.cuda.get_current_stream().ptr)
        return self._sync(out)

    def broadcast(self, arr, root):
        arr = self.cp.ascontiguousarray(arr).copy()
        self.nc.bcast(arr.data.ptr, arr.size, self._type(arr.dtype), root, self.cp.cuda.get_current_stream().ptr)
        return self._sync(arr)

    def allgather(self, arr):
        out = self.cp.empty((self.size(),) + arr.shape, arr.dtype)
        self.nc.allGather(arr.data.ptr, out.data.ptr, arr.size, self._type(arr.dtype),
                          self.cp.cuda.get_current_stream().ptr)
        return self._sync(out)

    def reduce_scatter(self, stacked, op):
        out = self.cp.empty(stacked.shape[1:], stacked.dtype)
        self.nc.reduceScatter(stacked.data.ptr, out.data.ptr, out.size, self._type(stacked.dtype),
                              self._op(op, stacked.dtype), self.cp.cuda.get_current_stream().ptr)
        return self._sync(out)

    def barrier(self) -> None:
        self.allreduce(self.cp.zeros(1, self.cp.float32), ReduceOp.SUM)
