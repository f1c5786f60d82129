"""``torch.distributed.tensor.experimental``: the DTensor API PyTorch marks experimental."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["implicit_replication"]


@contextlib.contextmanager
def implicit_replication() -> Iterator[None]:
    """In PyTorch, ops inside the block may mix DTensors with plain tensors, taken as replicated. tapelab
    runs no ops on DTensors (see the package's docstring), so the block changes nothing; code that
    enters it (opacus' FSDP optimizer) runs as it would in PyTorch on local pieces."""
    yield
