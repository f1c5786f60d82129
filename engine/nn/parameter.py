"""``Parameter`` and ``Buffer``: tensors a Module registers by assignment."""
from __future__ import annotations

from ..core import creation
from ..core.overrides import _disabled_torch_function_impl
from ..core.tensor import Tensor

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "UninitializedTensorMixin"]


class _ParameterMeta(type):
    """``isinstance(t, Parameter)`` also holds for a tensor of a program's own Tensor subclass made a
    parameter (``Parameter(sub)`` returns ``sub``'s type, marked ``_is_param``), as PyTorch's."""

    def __instancecheck__(cls, instance) -> bool:
        return type.__instancecheck__(cls, instance) or (
            cls is Parameter and isinstance(instance, Tensor) and getattr(instance, "_is_param", False))


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A leaf tensor that Modules register as a learnable parameter (shares ``data``'s memory).

    Ops on a Parameter return plain Tensors, as in PyTorch: only the leaf itself is special.
    A tensor of a program's own Tensor subclass stays of its type: ``Parameter(sub)`` is
    ``sub.detach().requires_grad_(requires_grad)`` marked ``_is_param`` (PyTorch's custom-tensor path).
    """

    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = creation.empty(0)
        elif type(data) is not Tensor and not type.__instancecheck__(Parameter, data) and isinstance(data, Tensor):
            t = data.detach().requires_grad_(requires_grad)
            if type(t) is not type(data):
                raise RuntimeError(
                    f"Creating a Parameter from an instance of type {type(data).__name__} requires that detach() "
                    f"returns an instance of the same type, but return type {type(t).__name__} was found instead. "
                    "To use the type as a Parameter, please correct the detach() semantics defined by its "
                    "__torch_dispatch__() implementation.")
            t._is_param = True
            return t
        self = Tensor.__new__(cls)
        self._data, self._device, self._vc = data._data, data._device, data._vc
        if requires_grad:
            self.requires_grad_(True)
        return self

    def __init__(self, *args, **kwargs):   # all in __new__; a subclass's own __new__ may take more (a tag=)
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    @classmethod
    def _parameter_class(cls):
        """Parameter itself (its subclasses print as ``Parameter(Sub(...))``: ``Tensor.__repr__``)."""
        return Parameter

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute."""

    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        self = Tensor.__new__(cls)
        if data is not None:
            self._data, self._device, self._vc = data._data, data._device, data._vc
        self.persistent = persistent
        return self

    def __init__(self, *args, **kwargs):
        pass


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


class UninitializedTensorMixin:
    """A tensor with no values yet (a lazy layer's, before its first input): ``materialize(shape)``
    gives it memory and turns it, in place, into a ``cls_to_become``."""

    cls_to_become: type = Tensor
    __torch_function__ = _disabled_torch_function_impl   # ops see a plain tensor (no __torch_function__ protocol)

    def materialize(self, shape, device=None, dtype=None) -> None:
        made = creation.empty(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,),
                              device=device if device is not None else self.device,
                              dtype=dtype if dtype is not None else self.dtype)
        self._data, self._device, self._vc = made._data, made._device, made._vc
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet; ``module.double()`` and ``.to(...)`` change the
    dtype and device it will materialise with."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        return Parameter.__new__(cls, creation.empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet; conversions (``to``, ``double``, ``cpu``...) return
    another uninitialised buffer, so a module's ``_apply`` keeps it a placeholder."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True):
        self = Tensor.__new__(cls)
        made = creation.empty(0, device=device, dtype=dtype)
        self._data, self._device, self._vc = made._data, made._device, made._vc
        self.persistent = persistent
        return self

    def __init__(self, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True):
        pass

    def _like(self, converted: Tensor) -> "UninitializedBuffer":
        return UninitializedBuffer(device=converted.device, dtype=converted.dtype, persistent=self.persistent)

    def to(self, *args, **kwargs):
        return self._like(Tensor.to(self, *args, **kwargs))

    def double(self):
        return self._like(Tensor.double(self))

    def float(self):
        return self._like(Tensor.float(self))

    def half(self):
        return self._like(Tensor.half(self))

    def cpu(self):
        return self._like(Tensor.cpu(self))

    def cuda(self, device=None):
        return self._like(Tensor.cuda(self, device))
