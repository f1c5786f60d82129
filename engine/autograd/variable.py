"""``torch.autograd.Variable``: the pre-0.4 wrapper, kept as PyTorch keeps it, so old programs
(``Variable(x, requires_grad=True)``, ``isinstance(t, Variable)``) run unchanged."""
from __future__ import annotations

import warnings

from ..core.tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    """Every tensor is a Variable (PyTorch merged the two in 0.4)."""

    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False, volatile=False)``: a tensor sharing ``data``'s memory
    with no history (a detached alias), with ``requires_grad`` set, as PyTorch's legacy constructor."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            raise TypeError("Variable() requires a tensor as its first argument")
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
