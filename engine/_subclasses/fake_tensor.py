"""``torch._subclasses.fake_tensor``: tapelab has no FakeTensor (its shape-only tensors are the meta device)."""
from __future__ import annotations

__all__ = ["is_fake"]


def is_fake(x) -> bool:
    """Whether ``x`` is a FakeTensor: never, in tapelab (kornia asks before reading a tensor's values)."""
    return False
