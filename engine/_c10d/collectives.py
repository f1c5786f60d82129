"""The collectives of ``torch.distributed`` over a process group's backend.

Each function checks its tensors, reads them into contiguous arrays, queues the backend call on
the group's communication thread and returns a :class:`Work` (``async_op=True``) or waits for it.
Results reach the caller's tensors through ``copy_`` at ``wait()``, so they change as any
in-place op changes a tensor (version counter, tape, devices). ``src``/``dst`` are global ranks,
``group_src``/``group_dst`` ranks inside ``group``, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import no_grad
from ..core.creation import from_dlpack, from_numpy
from ..core.tensor import Tensor
from .group import ProcessGroup, resolve
from .reduce_op import ReduceOp
from .work import RequestWork, Work

__all__ = ["all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "gather", "scatter",
           "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier", "send",
           "recv", "isend", "irecv"]


# ---------------------------------------------------------------- tensors <-> arrays
def _check(t, op: str, what: str = "tensor") -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: invalid function argument. Expected parameter `{what}` of type Tensor but got "
                        f"{type(t).__name__} instead.")
    return t


def _check_list(ts, op: str, what: str) -> list:
    if not isinstance(ts, (list, tuple)) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"{op}: invalid function argument. Expected parameter `{what}` of type List[Tensor] but "
                        f"got {type(ts).__name__} instead.")
    return list(ts)


def write(t: Tensor, arr) -> None:
    """``t[...] = arr`` as an in-place op (bumps the version counter; crosses devices). ``arr`` is a
    numpy array or, from the nccl backend, a cupy one."""
    src = from_numpy(np.ascontiguousarray(arr)) if isinstance(arr, np.ndarray) else from_dlpack(arr)
    with no_grad():
        t.copy_(src.reshape(t.shape))


def _run(group: ProcessGroup, name: str, job, async_op: bool, nbytes: int, finish=None, outputs=None,
         like: Tensor | None = None) -> Work | None:
    shape, dtype = (tuple(like.shape), str(like.dtype)) if like is not None else ((), "")
    work = group.submit(name, job, nbytes, finish, outputs, shape, dtype)
    if async_op:
        return work
    work.wait()
    return None


def _src(group: ProcessGroup, rank, group_rank, what: str) -> int:
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {what} and group_{what}")
    if group_rank is not None:
        return group_rank
    return group.group_rank(0 if rank is None else rank, what)


def _same(ts: list, like: Tensor, op: str) -> None:
    for t in ts:
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise ValueError(f"{op}: every tensor must have the shape and dtype of the input, {tuple(like.shape)} "
                             f"{like.dtype}; got {tuple(t.shape)} {t.dtype}")


def _avg(arr: np.ndarray, op: ReduceOp, n: int) -> np.ndarray:
    return (arr / n).astype(arr.dtype) if op == ReduceOp.AVG else arr


# ---------------------------------------------------------------- reductions
def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False) -> Work | None:
    """Every rank's ``tensor`` becomes the reduction (``op``) of all ranks' tensors."""
    _check(tensor, "all_reduce")
    g = resolve(group)
    arr = g.backend.array(tensor)
    return _run(g, "all_reduce", lambda: _avg(g.backend.allreduce(arr, op), op, g.size()), async_op, arr.nbytes,
                lambda out: write(tensor, out), [tensor], tensor)


def reduce(tensor: Tensor, dst: int | None = None, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst: int | None = None) -> Work | None:
    """Rank ``dst``'s ``tensor`` becomes the reduction of all ranks' tensors; the others' are unchanged."""
    _check(tensor, "reduce")
    g = resolve(group)
    root = _src(g, dst, group_dst, "dst")
    arr = g.backend.array(tensor)
    mine = g.rank() == root
    return _run(g, "reduce", lambda: _avg(g.backend.reduce(arr, op, root), op, g.size()), async_op, arr.nbytes,
                (lambda out: write(tensor, out)) if mine else None, [tensor], tensor)


def reduce_scatter(output: Tensor, input_list: list, op: ReduceOp = ReduceOp.SUM, group=None,
                   async_op: bool = False) -> Work | None:
    """``output`` on rank i becomes the reduction over ranks of their ``input_list[i]``."""
    _check(output, "reduce_scatter", "output")
    g = resolve(group)
    inputs = _check_list(input_list, "reduce_scatter", "input_list")
    if len(inputs) != g.size():
        raise ValueError(f"reduce_scatter: input_list must have one tensor per rank ({g.size()}), got {len(inputs)}")
    _same(inputs, output, "reduce_scatter")
    stacked = np.stack([g.backend.array(t) for t in inputs])
    return _run(g, "reduce_scatter", lambda: _avg(g.backend.reduce_scatter(stacked, op), op, g.size()), async_op,
                stacked.nbytes, lambda out: write(output, out), [output], output)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group=None,
                          async_op: bool = False) -> Work | None:
    """``reduce_scatter`` with ``input`` holding the ranks' chunks along dim 0 (world_size times ``output``)."""
    _check(output, "reduce_scatter_tensor", "output")
    _check(input, "reduce_scatter_tensor", "input")
    g = resolve(group)
    if input.numel() != output.numel() * g.size():
        raise ValueError(f"reduce_scatter_tensor: input of {input.numel()} elements must be world_size ({g.size()}) "
                         f"times output's {output.numel()} (input {tuple(input.shape)}, output {tuple(output.shape)})")
    stacked = g.backend.array(input).reshape((g.size(),) + tuple(output.shape))
    return _run(g, "reduce_scatter_tensor", lambda: _avg(g.backend.reduce_scatter(stacked, op), op, g.size()),
                async_op, stacked.nbytes, lambda out: write(output, out), [output], output)


# ---------------------------------------------------------------- data movement
def broadcast(tensor: Tensor, src: int | None = None, group=None, async_op: bool = False,
              group_src: int | None = None) -> Work | None:
    """Every rank's ``tensor`` becomes rank ``src``'s."""
    _check(tensor, "broadcast")
    g = resolve(group)
    root = _src(g, src, group_src, "src")
    arr = g.backend.array(tensor)
    return _run(g, "broadcast", lambda: g.backend.broadcast(arr, root), async_op, arr.nbytes,
                lambda out: write(tensor, out), [tensor], tensor)


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False) -> Work | None:
    """``tensor_list[i]`` becomes rank i's ``tensor``, on every rank."""
    _check(tensor, "all_gather")
    outs = _check_list(tensor_list, "all_gather", "tensor_list")
    g = resolve(group)
    if len(outs) != g.size():
        raise ValueError(f"all_gather: tensor_list must have one tensor per rank ({g.size()}), got {len(outs)}")
    _same(outs, tensor, "all_gather")
    arr = g.backend.array(tensor)

    def finish(stacked):
        for t, a in zip(outs, stacked):
            write(t, a)
    return _run(g, "all_gather", lambda: g.backend.allgather(arr), async_op, arr.nbytes, finish, outs, tensor)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None,
                           async_op: bool = False) -> Work | None:
    """``output_tensor`` becomes the ranks' ``input_tensor`` concatenated (or stacked) along dim 0."""
    _check(output_tensor, "all_gather_into_tensor", "output_tensor")
    _check(input_tensor, "all_gather_into_tensor", "input_tensor")
    g = resolve(group)
    if output_tensor.numel() != input_tensor.numel() * g.size():
        raise ValueError(f"all_gather_into_tensor: output of {output_tensor.numel()} elements must be world_size "
                         f"({g.size()}) times input's {input_tensor.numel()} (output {tuple(output_tensor.shape)}, "
                         f"input {tuple(input_tensor.shape)})")
    arr = g.backend.array(input_tensor)
    return _run(g, "all_gather_into_tensor", lambda: g.backend.allgather(arr), async_op, arr.nbytes,
                lambda out: write(output_tensor, out), [output_tensor], input_tensor)


def gather(tensor: Tensor, gather_list: list | None = None, dst: int | None = None, group=None,
           async_op: bool = False, group_dst: int | None = None) -> Work | None:
    """On rank ``dst``, ``gather_list[i]`` becomes rank i's ``tensor`` (other ranks pass no list)."""
    _check(tensor, "gather")
    g = resolve(group)
    root = _src(g, dst, group_dst, "dst")
    mine = g.rank() == root
    outs = _check_list(gather_list, "gather", "gather_list") if mine else []
    if mine:
        if len(outs) != g.size():
            raise ValueError(f"gather: gather_list on the destination must have one tensor per rank ({g.size()}), "
                             f"got {len(outs)}")
        _same(outs, tensor, "gather")
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    arr = g.backend.array(tensor)

    def finish(stacked):
        for t, a in zip(outs, stacked):
            write(t, a)
    return _run(g, "gather", lambda: g.backend.gather(arr, root), async_op, arr.nbytes, finish if mine else None,
                outs, tensor)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int | None = None, group=None,
            async_op: bool = False, group_src: int | None = None) -> Work | None:
    """``tensor`` on rank i becomes ``scatter_list[i]`` of rank ``src`` (other ranks pass no list)."""
    _check(tensor, "scatter")
    g = resolve(group)
    root = _src(g, src, group_src, "src")
    stacked = None
    if g.rank() == root:
        ins = _check_list(scatter_list, "scatter", "scatter_list")
        if len(ins) != g.size():
            raise ValueError(f"scatter: scatter_list on the source must have one tensor per rank ({g.size()}), "
                             f"got {len(ins)}")
        _same(ins, tensor, "scatter")
        stacked = np.stack([g.backend.array(t) for t in ins])
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    like = g.backend.array(tensor)
    return _run(g, "scatter", lambda: g.backend.scatter(stacked, like, root), async_op,
                0 if stacked is None else stacked.nbytes, lambda out: write(tensor, out), [tensor], tensor)


def all_to_all(output_tensor_list: list, input_tensor_list: list, group=None, async_op: bool = False) -> Work | None:
    """``output_tensor_list[j]`` on rank i becomes rank j's ``input_tensor_list[i]`` (sizes may differ)."""
    outs = _check_list(output_tensor_list, "all_to_all", "output_tensor_list")
    ins = _check_list(input_tensor_list, "all_to_all", "input_tensor_list")
    g = resolve(group)
    if len(outs) != g.size() or len(ins) != g.size():
        raise ValueError(f"all_to_all: both lists need one tensor per rank ({g.size()}), got {len(outs)} outputs "
                         f"and {len(ins)} inputs")
    flat = np.concatenate([g.backend.array(t).ravel() for t in ins])
    sends, recvs = [t.numel() for t in ins], [t.numel() for t in outs]

    def finish(out):
        for t, a in zip(outs, np.split(out, [int(i) for i in np.cumsum(recvs)[:-1]])):   # (cupy takes no numpy index array)
            write(t, a)
    return _run(g, "all_to_all", lambda: g.backend.alltoallv(flat, sends, recvs), async_op, flat.nbytes, finish,
                outs)


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op: bool = False) -> Work | None:
    """``all_to_all`` of the dim-0 chunks of ``input`` into those of ``output`` (even chunks by default)."""
    _check(output, "all_to_all_single", "output")
    _check(input, "all_to_all_single", "input")
    g = resolve(group)
    n = g.size()
    row_in = input.numel() // max(input.shape[0], 1) if input.dim() else 1
    row_out = output.numel() // max(output.shape[0], 1) if output.dim() else 1
    sends = [s * row_in for s in input_split_sizes] if input_split_sizes else [input.numel() // n] * n
    recvs = [s * row_out for s in output_split_sizes] if output_split_sizes else [output.numel() // n] * n
    flat = g.backend.array(input).ravel()
    return _run(g, "all_to_all_single", lambda: g.backend.alltoallv(flat, sends, recvs), async_op, flat.nbytes,
                lambda out: write(output, out), [output], input)


def barrier(group=None, async_op: bool = False, device_ids=None, timeout=None) -> Work | None:
    """Return once every rank of ``group`` has called ``barrier``."""
    g = resolve(group)
    return _run(g, "barrier", g.backend.barrier, async_op, 0)


# ---------------------------------------------------------------- point to point
def _peer(g: ProcessGroup, rank, group_rank, what: str) -> int:
    if rank is None and group_rank is None:
        raise ValueError(f"{what} must be given")
    return _src(g, rank, group_rank, what)


def isend(tensor: Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None) -> Work:
    """Send ``tensor`` to rank ``dst`` without waiting; the Work completes once the send buffer is free."""
    _check(tensor, "isend")
    g = resolve(group)
    peer = _peer(g, dst, group_dst, "dst")
    arr = g.backend.host(g.backend.array(tensor))
    return RequestWork(g.backend.isend(arr, peer, tag), None, [tensor], keep=arr)


def irecv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None) -> Work:
    """Receive into ``tensor`` from rank ``src`` (any rank when None) without waiting."""
    _check(tensor, "irecv")
    g = resolve(group)
    peer = None if src is None and group_src is None else _peer(g, src, group_src, "src")
    like = g.backend.array(tensor)
    arr = np.empty(like.shape, like.dtype)     # a host buffer (MPI's), also for a cuda tensor
    return RequestWork(g.backend.irecv(arr, peer, tag), lambda _: write(tensor, arr), [tensor])


def send(tensor: Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None) -> None:
    """Send ``tensor`` to rank ``dst`` and wait until it is sent."""
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None) -> int:
    """Receive into ``tensor`` from rank ``src`` (any when None); returns the sender's rank."""
    work = irecv(tensor, src, group, tag, group_src)
    work.wait()
    return resolve(group).ranks[work.source]
