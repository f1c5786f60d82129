"""``Parameter`` and ``Buffer``: tensors a Module registers by assignment."""
from __future__ import annotations

from ..core.tensor import Tensor

__all__ = ["Parameter", "Buffer"]


class Parameter(Tensor):
    """A leaf tensor that Modules register as a learnable parameter (shares ``data``'s memory).

    Ops on a Parameter return plain Tensors, as in PyTorch: only the leaf itself is special.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        self = Tensor.__new__(cls)
        if data is not None:
            self._data, self._device, self._vc = data._data, data._device, data._vc
        if requires_grad:
            self.requires_grad_(True)
        return self

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        self = Tensor.__new__(cls)
        if data is not None:
            self._data, self._device, self._vc = data._data, data._device, data._vc
        self.persistent = persistent
        return self

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True):
        pass


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)
