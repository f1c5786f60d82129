"""``torch.distributed.tensor``: a tensor laid out over a ``DeviceMesh`` by one placement per mesh
dimension (``Shard``, ``Replicate``, ``Partial``).

Here a ``DTensor`` is the record of a rank's local piece, its mesh and placements and the global shape:
``from_local``/``distribute_tensor`` make one, ``to_local`` and ``full_tensor`` give tensors back. It is
not itself a ``Tensor``: tapelab has no sharding propagation, so ops on a DTensor are not run (PyTorch
runs them through ``__torch_dispatch__``); code that tests ``isinstance(x, DTensor)`` and works on the
local pieces runs as in PyTorch.
"""
from __future__ import annotations

from ..._c10d import ReduceOp, all_gather_into_tensor, all_reduce, broadcast, get_global_rank
from ...core.creation import empty, tensor as _tensor
from ...core.tensor import Tensor
from ...ops.shaping import cat
from ..device_mesh import DeviceMesh, init_device_mesh
from ._utils import held_indices
from .placement_types import Partial, Placement, Replicate, Shard, _StridedShard

__all__ = ["DTensor", "distribute_tensor", "DeviceMesh", "init_device_mesh", "Placement", "Shard", "Replicate",
           "Partial"]

_REDUCE = {"sum": ReduceOp.SUM, "avg": ReduceOp.AVG, "max": ReduceOp.MAX, "min": ReduceOp.MIN}


class DTensor:
    """This rank's ``_local_tensor`` of a global tensor of ``shape`` laid out by ``placements`` over ``device_mesh``."""

    def __init__(self, local_tensor: Tensor, device_mesh: DeviceMesh, placements, shape: tuple):
        self._local_tensor, self.device_mesh = local_tensor, device_mesh
        self.placements, self.shape = tuple(placements), tuple(shape)

    @staticmethod
    def from_local(local_tensor: Tensor, device_mesh: DeviceMesh | None = None, placements=None, *,
                   run_check: bool = False, shape=None, stride=None) -> "DTensor":
        """Wrap each rank's piece; without ``shape`` the pieces are taken as even (each dim sharded over ``k``
        ranks is ``k`` times the local size, as PyTorch assumes)."""
        if device_mesh is None:
            raise ValueError("DTensor.from_local: pass the device_mesh the pieces lie on")
        placements = tuple(placements) if placements is not None else (Replicate(),) * device_mesh.ndim
        if len(placements) != device_mesh.ndim:
            raise ValueError(f"DTensor.from_local: {len(placements)} placements for a {device_mesh.ndim}-d mesh")
        if shape is None:
            shape = list(local_tensor.shape)
            for mesh_dim, p in enumerate(placements):
                if isinstance(p, (Shard, _StridedShard)):
                    shape[p.dim % local_tensor.ndim] *= device_mesh.size(mesh_dim)
        return DTensor(local_tensor, device_mesh, placements, shape)

    def to_local(self, *, grad_placements=None) -> Tensor:
        return self._local_tensor

    def full_tensor(self, *, grad_placements=None) -> Tensor:
        """The global tensor on every rank: partial values reduced, shards gathered (last mesh dim first)."""
        full = self._local_tensor.detach().clone()
        for mesh_dim in reversed(range(self.device_mesh.ndim)):
            p, group = self.placements[mesh_dim], self.device_mesh.get_group(mesh_dim)
            if isinstance(p, Partial):
                all_reduce(full, _REDUCE[p.reduce_op], group=group)
            elif isinstance(p, (Shard, _StridedShard)):
                full = _gather_shards(full, p, self.device_mesh.size(mesh_dim), group)
        return full

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self):
        return self._local_tensor.dtype

    @property
    def device(self):
        return self._local_tensor.device

    @property
    def requires_grad(self) -> bool:
        return self._local_tensor.requires_grad

    def __repr__(self) -> str:
        return (f"DTensor(local_tensor={self._local_tensor!r}, device_mesh={self.device_mesh!r}, "
                f"placements={self.placements})")


def _gather_shards(local: Tensor, p: Shard, n: int, group) -> Tensor:
    """Undo one ``Shard``: pad every piece to the largest, gather along dim 0, cut the padding off."""
    if isinstance(p, _StridedShard):
        raise NotImplementedError(f"full_tensor: gathering {p} pieces (tapelab gathers plain Shard placements)")
    dim = p.dim % local.ndim
    sizes = _tensor([local.shape[dim]])
    all_sizes = empty((n,), dtype=sizes.dtype)
    all_gather_into_tensor(all_sizes, sizes, group=group)
    most = int(all_sizes.max().item())
    pad = list(local.shape)
    pad[dim] = most - local.shape[dim]
    moved = cat([local, empty(pad, dtype=local.dtype, device=local.device)], dim=dim).movedim(dim, 0).contiguous()
    out = empty((n * most, *moved.shape[1:]), dtype=local.dtype, device=local.device)
    all_gather_into_tensor(out, moved, group=group)
    pieces = [piece[:size] for piece, size in zip(out.chunk(n, dim=0), all_sizes.tolist())]
    return cat(pieces, dim=0).movedim(0, dim)


def distribute_tensor(tensor: Tensor, device_mesh: DeviceMesh | None = None, placements=None, *,
                      src_data_rank: int | None = 0) -> DTensor:
    """Lay ``tensor`` out over ``device_mesh``: with ``src_data_rank`` (the default, 0) the values are those
    of that rank along each mesh dimension, broadcast first, as in PyTorch; with None each rank's own."""
    if device_mesh is None:
        raise ValueError("distribute_tensor: pass the device_mesh to lay the tensor out on")
    placements = tuple(placements) if placements is not None else (Replicate(),) * device_mesh.ndim
    if any(isinstance(p, Partial) for p in placements):
        raise NotImplementedError("distribute_tensor with a Partial placement: tapelab lays out Shard and "
                                  "Replicate placements")
    full = tensor.detach().clone()
    if src_data_rank is not None:
        for mesh_dim in range(device_mesh.ndim):
            group = device_mesh.get_group(mesh_dim)
            broadcast(full, src=get_global_rank(group, src_data_rank), group=group)
    local = full
    held = held_indices(tuple(full.shape), device_mesh.shape, device_mesh.get_coordinate(), placements)
    for dim, indices in held.items():
        local = local.index_select(dim, _tensor(indices, device=full.device))
    local.requires_grad_(tensor.requires_grad)
    return DTensor(local, device_mesh, placements, tuple(tensor.shape))
