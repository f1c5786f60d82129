"""``torch._subclasses.fake_tensor``: tapelab has no FakeTensor (its shape-only tensors are the meta device)."""
from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["is_fake", "maybe_get_fake_mode", "unset_fake_temporarily"]


def is_fake(x) -> bool:
    """Whether ``x`` is a FakeTensor: never, in tapelab (kornia asks before reading a tensor's values)."""
    return False


def maybe_get_fake_mode(x) -> None:
    """The fake mode ``x`` belongs to: none, as no tensor is fake."""
    return None


@contextlib.contextmanager
def unset_fake_temporarily() -> Iterator[None]:
    """Leave the active fake mode for the block and yield it: there is none (spikingjelly's op dispatch
    imports this to select real kernels while tracing)."""
    yield None
