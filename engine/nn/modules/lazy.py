"""``LazyModuleMixin``: the input size is read from the first input, then the layer becomes its eager
class (the lazy layers themselves live beside their eager classes, as in PyTorch).

``UninitializedParameter`` / ``UninitializedBuffer`` (in ``nn.parameter``) hold no values until
``materialize(shape)`` turns them, in place, into a ``Parameter`` / plain ``Tensor``; a lazy layer materialises its
tensors in a forward pre-hook, re-runs ``reset_parameters`` and takes ``cls_to_become``'s class,
as PyTorch's ``LazyModuleMixin`` does.
"""
from __future__ import annotations

from ...core.tensor import Tensor
from ..parameter import UninitializedTensorMixin, UninitializedBuffer, UninitializedParameter

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin"]


def _uninitialized(t) -> bool:
    return isinstance(t, UninitializedTensorMixin)


class LazyModuleMixin:
    """Materialise the uninitialised tensors from the first input, then become ``cls_to_become``."""

    cls_to_become: type | None = None

    def _lazy_init(self) -> None:
        self._lazy_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self) -> bool:
        return any(_uninitialized(t) for t in list(self._parameters.values()) + list(self._buffers.values()))

    def initialize_parameters(self, input: Tensor) -> None:
        raise NotImplementedError

    def _materialize_all(self, shapes: dict) -> None:
        for name, shape in shapes.items():
            t = getattr(self, name)
            if _uninitialized(t):
                t.materialize(shape)
        self.reset_parameters()


def _infer_parameters(module, args):
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
    module._lazy_hook.remove()
    del module._lazy_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


