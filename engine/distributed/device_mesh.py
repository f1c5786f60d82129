"""``torch.distributed.device_mesh``: the ranks of a job laid out as an n-d array, one process group per
mesh dimension (the ranks along that dimension through this rank), named dimensions to slice by."""
from __future__ import annotations

import numpy as np

from .._c10d import get_rank, get_world_size, new_group
from .._c10d.group import resolve

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """The global ranks ``mesh`` (an n-d array of them) on ``device_type``; every rank of the default group
    constructs it (each dimension's groups are made collectively, in the same order on every rank)."""

    def __init__(self, device_type: str, mesh, *, mesh_dim_names: tuple[str, ...] | None = None,
                 _groups: list | None = None):
        self.device_type = device_type
        self._ranks = np.array(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if mesh_dim_names is not None and len(mesh_dim_names) != self._ranks.ndim:
            raise RuntimeError(f"mesh_dim_names {mesh_dim_names} must have one name per mesh dimension "
                               f"(the mesh is {self._ranks.ndim}-d)")
        self.mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
        where = np.argwhere(self._ranks == get_rank())
        self._coordinate = tuple(int(c) for c in where[0]) if len(where) else None
        self._groups = _groups if _groups is not None else [self._dim_group(d) for d in range(self._ranks.ndim)]

    def _dim_group(self, dim: int):
        """This rank's group along ``dim``: every line of ranks along ``dim`` is made, in order, on every rank."""
        lines = np.moveaxis(self._ranks, dim, -1).reshape(-1, self._ranks.shape[dim])
        mine = None
        for line in lines.tolist():
            group = resolve(None) if sorted(line) == list(range(get_world_size())) else new_group(line)
            if self._coordinate is not None and get_rank() in line:
                mine = group
        return mine

    @property
    def mesh(self):
        from ..core.creation import tensor
        return tensor(self._ranks)

    @property
    def ndim(self) -> int:
        return self._ranks.ndim

    @property
    def shape(self) -> tuple:
        return tuple(self._ranks.shape)

    def size(self, mesh_dim: int | None = None) -> int:
        return int(self._ranks.size) if mesh_dim is None else int(self._ranks.shape[mesh_dim])

    def _dim(self, mesh_dim) -> int:
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist. Available mesh dimensions are: "
                               f"mesh_dim_names={self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` "
                                   "needs to be specified when device_mesh.ndim > 1.")
            return 0
        return int(mesh_dim)

    def get_group(self, mesh_dim: int | str | None = None):
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self) -> list:
        return list(self._groups)

    def get_rank(self) -> int:
        return get_rank()

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        return self._coordinate[self._dim(mesh_dim)]

    def get_coordinate(self) -> list[int] | None:
        """This rank's index in the mesh (None when it is not in the mesh)."""
        return list(self._coordinate) if self._coordinate is not None else None

    def __getitem__(self, names) -> "DeviceMesh":
        """The sub-mesh of the named dimensions through this rank, reusing their groups."""
        names = (names,) if isinstance(names, str) else tuple(names)
        dims = [self._dim(n) for n in names]
        index = tuple(slice(None) if d in dims else self._coordinate[d] for d in range(self.ndim))
        sub = np.transpose(self._ranks[index], np.argsort(np.argsort(dims)))
        return DeviceMesh(self.device_type, sub, mesh_dim_names=names, _groups=[self._groups[d] for d in dims])

    def __eq__(self, other) -> bool:
        return (isinstance(other, DeviceMesh) and self.device_type == other.device_type
                and np.array_equal(self._ranks, other._ranks) and self.mesh_dim_names == other.mesh_dim_names)

    def __hash__(self) -> int:
        return hash((self.device_type, self._ranks.tobytes(), self._ranks.shape, self.mesh_dim_names))

    def __repr__(self) -> str:
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._ranks.tolist()}{names})"


def init_device_mesh(device_type: str, mesh_shape: tuple[int, ...], *,
                     mesh_dim_names: tuple[str, ...] | None = None, backend_override=None) -> DeviceMesh:
    """A mesh of all ranks of the default group in row-major order, shaped ``mesh_shape``."""
    n = int(np.prod(mesh_shape))
    if n != get_world_size():
        raise RuntimeError(f"init_device_mesh: the mesh shape {tuple(mesh_shape)} holds {n} ranks but the world "
                           f"size is {get_world_size()}")
    return DeviceMesh(device_type, np.arange(n).reshape(mesh_shape), mesh_dim_names=mesh_dim_names)
