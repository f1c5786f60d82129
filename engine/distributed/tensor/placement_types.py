"""How a ``DTensor`` lies over one mesh dimension: split along a tensor dim (``Shard``), whole on every
rank (``Replicate``), or a partial value the ranks' values reduce to (``Partial``)."""
from __future__ import annotations

__all__ = ["Placement", "Shard", "Replicate", "Partial"]


class Placement:
    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return False


class Shard(Placement):
    """Split along tensor dimension ``dim`` in ``torch.chunk``'s pieces, one per rank of the mesh dimension."""

    def __init__(self, dim: int):
        self.dim = dim

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    @staticmethod
    def local_shard_size_and_offset(curr_local_size: int, num_chunks: int, rank: int) -> tuple[int, int]:
        """The size and start of ``rank``'s chunk of ``curr_local_size`` elements cut ``torch.chunk``'s way."""
        full = -(-curr_local_size // num_chunks)
        start = full * rank
        if curr_local_size < start:
            return 0, curr_local_size
        return min(curr_local_size, start + full) - start, start

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.dim))

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"

    def __str__(self) -> str:
        return f"S({self.dim})"


class _StridedShard(Placement):
    """``dim`` split into ``split_factor`` groups, each cut into one chunk per rank: a rank holds its chunk of
    every group (a fused weight split for tensor parallelism, for one). Not a ``Shard``, as in PyTorch."""

    def __init__(self, dim: int, *, split_factor: int = 1, sf: int | None = None):
        self.dim, self.split_factor = dim, sf if sf is not None else split_factor

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and (other.dim, other.split_factor) == (self.dim, self.split_factor)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.dim, self.split_factor))

    def __repr__(self) -> str:
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self) -> str:
        return f"_S({self.dim}, {self.split_factor})"


class Replicate(Placement):
    """The whole tensor on every rank of the mesh dimension."""

    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other) -> bool:
        return type(other) is Replicate

    def __hash__(self) -> int:
        return hash("Replicate")

    def __repr__(self) -> str:
        return "Replicate()"

    def __str__(self) -> str:
        return "R"


class Partial(Placement):
    """Each rank holds a partial value; the tensor is their ``reduce_op`` (``"sum"``, ``"avg"``, ...)."""

    def __init__(self, reduce_op: str = "sum"):
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other) -> bool:
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return hash(("Partial", self.reduce_op))

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"

    def __str__(self) -> str:
        return f"P({self.reduce_op})"
