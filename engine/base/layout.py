"""``tapelab.strided``, ``tapelab.sparse_coo`` and the compressed ``sparse_csr``/``sparse_csc``/``sparse_bsr``/
``sparse_bsc``: the memory layouts a tensor reports as ``.layout`` (``jagged`` is named too, for the
comparisons libraries make, though no tensor has it);
and the memory formats (``tapelab.channels_last``, ...) that ``clone``/``contiguous``/``to`` take."""
from __future__ import annotations

from .dtype import package_name

__all__ = ["layout", "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged",
           "memory_format", "contiguous_format", "preserve_format",
           "channels_last", "channels_last_3d"]


class _Named:
    """One object per name, compared with ``is``; it pickles as the module attribute of that name,
    so identity survives a round trip."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"{package_name()}.{self.name}"

    def __reduce__(self):
        return self.name


class layout(_Named):
    """A tensor layout, as ``torch.layout``."""

    __slots__ = ()


class memory_format(_Named):
    """A memory format, as ``torch.memory_format``. tapelab's results are row-major whatever is
    asked; the objects exist so programs that name them run."""

    __slots__ = ()


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, jagged = (layout(n) for n in ("sparse_csr", "sparse_csc", "sparse_bsr",
                                                                              "sparse_bsc", "jagged"))
contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
