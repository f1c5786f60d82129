"""``torch.distributed.GradBucket``: what a DDP communication hook receives."""
from __future__ import annotations

__all__ = ["GradBucket"]


class GradBucket:
    """One bucket of gradients, flattened into ``buffer()`` (parameters in bucket order).

    A hook reduces ``buffer()`` across ranks and returns a Future of the result (same numel and
    dtype); DDP copies that result back into the parameters' ``.grad``.
    """

    def __init__(self, index: int, buffer, parameters: list, is_last: bool) -> None:
        self._index, self._buffer, self._parameters, self._is_last = index, buffer, parameters, is_last

    def index(self) -> int:
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer) -> None:
        self._buffer = buffer

    def parameters(self) -> list:
        return list(self._parameters)

    def gradients(self) -> list:
        """The bucket's gradients as views of ``buffer()``, shaped like their parameters."""
        out, at = [], 0
        for p in self._parameters:
            n = p.numel()
            out.append(self._buffer[at:at + n].view(p.shape))
            at += n
        return out

    def is_last(self) -> bool:
        return self._is_last
