"""``TransformGetItemToIndex``: in PyTorch a function mode that makes ``A[i]`` with a 0-d tensor ``i``
index by the tensor instead of calling ``i.item()``, so ``vmap`` can batch ``i``. tapelab's ``__getitem__``
already indexes by a tensor (``vmap`` batches it), so the context changes nothing here."""
from __future__ import annotations

import contextlib

__all__ = ["TransformGetItemToIndex"]


class TransformGetItemToIndex(contextlib.nullcontext):
    """A context in which ``A[i]`` (``i`` a 0-d tensor) indexes by ``i`` as a tensor, as it always does here."""
