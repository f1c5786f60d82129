"""Where a rank's local piece of a ``DTensor`` sits in the global tensor."""
from __future__ import annotations

import numpy as np

from .placement_types import Shard, _StridedShard

__all__ = ["compute_local_shape_and_global_offset"]


def _chunk(indices: np.ndarray, n: int, i: int) -> np.ndarray:
    """Piece ``i`` of ``indices`` cut into ``n`` the way ``torch.chunk`` cuts (empty past the end)."""
    size, start = Shard.local_shard_size_and_offset(len(indices), n, i)
    return indices[start:start + size]


def held_indices(global_shape, mesh_shape, my_coordinate, placements) -> dict[int, np.ndarray]:
    """The global indices a rank holds along each sharded dim, following the placements in mesh order."""
    held: dict[int, np.ndarray] = {}
    for mesh_dim, placement in enumerate(placements):
        if not isinstance(placement, (Shard, _StridedShard)):
            continue
        dim = placement.dim
        if dim >= len(global_shape):
            raise AssertionError(f"Sharding dim {dim} greater than tensor ndim {len(global_shape)}")
        indices = held.get(dim, np.arange(global_shape[dim]))
        n, c = mesh_shape[mesh_dim], my_coordinate[mesh_dim]
        if isinstance(placement, _StridedShard):   # chunk c of each of split_factor groups
            sf = placement.split_factor
            indices = np.concatenate([_chunk(_chunk(indices, sf, g), n, c) for g in range(sf)])
        else:
            indices = _chunk(indices, n, c)
        held[dim] = indices
    return held


def _compute_local_shape_and_global_offset(global_shape, mesh_shape, my_coordinate, placements) -> tuple[tuple, tuple]:
    """The offset is the first global index held (the dim's size when none is)."""
    held = held_indices(global_shape, mesh_shape, my_coordinate, placements)
    local = [len(held[d]) if d in held else size for d, size in enumerate(global_shape)]
    offset = [0] * len(global_shape)
    for dim, indices in held.items():
        offset[dim] = int(indices[0]) if len(indices) else global_shape[dim]
    return tuple(local), tuple(offset)


def compute_local_shape_and_global_offset(global_shape, mesh, placements) -> tuple[tuple, tuple]:
    """``(local_shape, global_offset)`` of this rank's piece of a tensor of ``global_shape`` laid out by
    ``placements`` over ``mesh`` (``((0,), ())`` on a rank outside the mesh)."""
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return (0,), ()
    return _compute_local_shape_and_global_offset(global_shape, mesh.shape, coordinate, placements)
