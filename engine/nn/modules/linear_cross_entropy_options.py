"""LinearCrossEntropyOptions: the options of ``LinearCrossEntropyLoss``."""
from __future__ import annotations

__all__ = ["LinearCrossEntropyOptions"]


class LinearCrossEntropyOptions:
    """How PyTorch may chunk ``linear_cross_entropy`` to save memory; tapelab accepts the settings and
    computes the reference result, which chunking does not change."""

    def __init__(self, allow_retain_graph: bool = False, batch_chunk_size: int | None = None,
                 chunking_method: str | None = "auto", acc_policy: str = "auto", acc_dtype=None):
        self.allow_retain_graph, self.batch_chunk_size = allow_retain_graph, batch_chunk_size
        self.chunking_method, self.acc_policy, self.acc_dtype = chunking_method, acc_policy, acc_dtype

    def __repr__(self) -> str:
        return (f"LinearCrossEntropyOptions(allow_retain_graph={self.allow_retain_graph}, batch_chunk_size="
                f"{self.batch_chunk_size}, chunking_method={self.chunking_method!r}, acc_policy={self.acc_policy!r}, "
                f"acc_dtype={self.acc_dtype})")
