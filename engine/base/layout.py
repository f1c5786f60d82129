"""``tapelab.strided`` and ``tapelab.sparse_coo``: the memory layouts a tensor reports as ``.layout``."""
from __future__ import annotations

__all__ = ["layout", "strided", "sparse_coo", "memory_format", "contiguous_format", "preserve_format",
           "channels_last", "channels_last_3d"]


class layout:
    """A tensor layout, as ``torch.layout``: compare with ``is`` (there is one object per layout)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return "tapelab." + self.name

    def __reduce__(self):
        return self.name     # pickles as the module attribute, so identity survives a round trip


strided = layout("strided")
sparse_coo = layout("sparse_coo")


class memory_format:
    """A memory format, as ``torch.memory_format``, passed to ``clone``/``contiguous``/``to``/``empty_like``.
    tapelab's results are row-major whatever is asked; the objects exist so programs that name them run."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return "tapelab." + self.name

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
