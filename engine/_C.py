"""``torch._C``: the few names of PyTorch's C extension that libraries probe (timm, torchvision,
Lightning) before deciding a code path; anything else they read with ``getattr(torch._C, name,
None)`` finds nothing, which is their "not available" branch."""
from __future__ import annotations

import sys
import types

from .autograd.engine import current_graph_task_id as _current_graph_task_id  # noqa: F401  (hooks ask
from .autograd.engine import will_engine_execute_node as _will_engine_execute_node  # noqa: F401  the engine)
from .core.overrides import (DisableTorchFunction, DisableTorchFunctionSubclass,  # noqa: F401  (the protocol's
                             _disabled_torch_function_impl, _is_torch_function_mode_enabled,  # C-side names)
                             _len_torch_function_stack)
from .core.random import Generator  # noqa: F401  (torch._C.Generator is the generator type)
from .core import batching as _batching
from .core.tensor import Tensor
from .jit import ScriptFunction  # noqa: F401  (torch._C.ScriptFunction is torch.jit's)
from .ops.convert import _parse_to_args

__all__ = ["Generator", "_get_tracing_state", "_log_api_usage_once", "_get_cudnn_enabled", "DisableTorchFunction",
           "DisableTorchFunctionSubclass", "_disabled_torch_function_impl", "_is_torch_function_mode_enabled",
           "_len_torch_function_stack", "_TensorMeta", "_nn", "_are_functorch_transforms_active", "_functorch",
           "_current_graph_task_id", "_will_engine_execute_node", "ScriptFunction", "ScriptMethod", "TensorType",
           "Graph", "Node", "Value", "Block", "Type", "DeviceObjType", "StreamObjType"]

class ScriptMethod:
    """The type of a TorchScript method: ``jit.script`` hands back Python code, so nothing is one
    (torchview's ``__torch_function__`` names a function by ``func.name`` only for these)."""


class _IRObject:
    """TorchScript's graph IR: ``jit.trace`` and ``jit.script`` hand back Python code, so no graph is
    built and none of these is ever made (PyTorch's have no constructor either); programs name them
    in annotations and imports (snntorch's ``from torch._C import Value``, ONNX symbolics' ``g: Graph``)."""

    def __new__(cls, *args, **kwargs):
        raise TypeError(f"torch._C.{cls.__name__}: No constructor defined!")


Node, Value, Block, Type = (type(_name, (_IRObject,), {"__module__": "torch"})
                            for _name in ("Node", "Value", "Block", "Type"))


def _singleton_type(name: str, printed: str) -> type:
    """A TorchScript type with one instance, ``get()``, printed as ``printed`` (pytorch-forecasting
    annotates ``device: str | torch.DeviceObjType``)."""
    cls = type(name, (Type,), {"__module__": "torch", "__str__": lambda self: printed, "__repr__": lambda self: printed})
    instance = object.__new__(cls)
    cls.get = staticmethod(lambda: instance)
    return cls


DeviceObjType, StreamObjType = _singleton_type("DeviceObjType", "Device"), _singleton_type("StreamObjType", "Stream")


class Graph:
    """A TorchScript graph; the only one tapelab makes is ``torch.Graph()``'s empty graph."""
    __module__ = "torch"

    def nodes(self):
        return iter(())

    inputs = outputs = nodes

    def __str__(self) -> str:
        return "graph():\n  return ()\n"

    __repr__ = __str__


class TensorType:
    """TorchScript's type of a Tensor (``torch.TensorType``): what model code names in annotations
    (open_clip's ``from torch import TensorType``) and what a trace or a script checks against.
    ``get()`` is the plain ``Tensor`` type; ``create_from_tensor(t)`` the complete type of ``t``
    (dtype, sizes, strides, device, requires_grad)."""

    def __init__(self, dtype=None, sizes=None, strides=None, device=None, requires_grad=None):
        self._dtype, self._sizes, self._strides = dtype, sizes, strides
        self._device, self._requires_grad = device, requires_grad

    @classmethod
    def get(cls) -> "TensorType":
        return cls()

    @classmethod
    def getInferred(cls) -> "TensorType":
        return cls()

    @classmethod
    def create_from_tensor(cls, t) -> "TensorType":
        return cls(t.dtype, list(t.shape), list(t.stride()), t.device, t.requires_grad)

    def kind(self) -> str:
        return "TensorType"

    def str(self) -> str:
        """``Tensor``, or a complete type as PyTorch prints it: ``Float(2, 3, strides=[3, 1], ...)``."""
        if self._dtype is None:
            return "Tensor"
        return (f"{self.scalarType()}({', '.join(map(str, self._sizes))}, strides={self._strides}, "
                f"requires_grad={int(self._requires_grad)}, device={self._device})")

    @property
    def annotation_str(self) -> str:
        return "Tensor"

    def dtype(self):
        return self._dtype

    def scalarType(self) -> str | None:
        return None if self._dtype is None else _SCALAR_TYPES.get(repr(self._dtype).rpartition(".")[2])

    def sizes(self):
        return self._sizes

    def strides(self):
        return self._strides

    def dim(self) -> int | None:
        return None if self._sizes is None else len(self._sizes)

    def device(self):
        return self._device

    def requires_grad(self):
        return self._requires_grad

    def __eq__(self, other) -> bool:
        return type(other) is TensorType and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(TensorType)

    def __repr__(self) -> str:
        return "Tensor"


_SCALAR_TYPES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                 "complex64": "ComplexFloat", "complex128": "ComplexDouble"}

_TensorMeta = type(Tensor)   # Tensor's metaclass (annotations name it; tapelab's Tensor is a plain class)


def _get_tracing_state():
    """None: no TorchScript trace is ever running (``torch.jit.trace`` runs Python as it is)."""
    return None


def _log_api_usage_once(event: str) -> None:
    """PyTorch's usage logging hook: nothing is logged."""


def _get_cudnn_enabled() -> bool:
    from .backends import cudnn
    return bool(cudnn.enabled)


def _parse_to(*args, **kwargs) -> tuple:
    """``(device, dtype, non_blocking, memory_format)`` from ``Tensor.to``/``Module.to``'s arguments."""
    non_blocking = bool(kwargs.pop("non_blocking", False)) or any(type(a) is bool and a for a in args)
    memory_format = kwargs.pop("memory_format", None)
    device, dtype, _ = _parse_to_args(args, kwargs)
    return device, dtype, non_blocking, memory_format


__path__: list = []   # a package to the import system, so ``torch._C._nn`` resolves under the aliases too


def _submodule(name: str, doc: str, **names) -> types.ModuleType:
    """A ``torch._C`` submodule that ``from torch._C._functorch import ...`` can import (it is in
    ``sys.modules``, as PyTorch's extension registers its own)."""
    module = types.ModuleType(f"{__name__}.{name}", doc)
    module.__dict__.update(names)
    sys.modules[module.__name__] = module
    return module


_nn = _submodule("_nn", "torch._C._nn: the one name libraries call there.", _parse_to=_parse_to)


def _are_functorch_transforms_active() -> bool:
    """False: tapelab's ``torch.func`` transforms run eagerly on concrete tensors, so code inside them may
    read values (kornia asks before taking a value-dependent path)."""
    return False


def _not_wrapped(tensor) -> bool:
    return False


def _is_batched(tensor) -> bool:
    return type(tensor) is _batching.BatchedTensor


def _maybe_current_level() -> int | None:
    """The innermost running vmap's level as PyTorch counts them, its depth (1 for an outermost vmap), None
    outside vmap. (tapelab's own levels are unique per call, so a batched tensor that escaped a finished
    vmap is never taken for a later one's; these functions translate.)"""
    return len(_batching.active_levels()) or None


def _own_level(depth: int) -> int:
    """tapelab's level of the running vmap at ``depth``; a depth no vmap has now names no running one."""
    levels = _batching.active_levels()
    return levels[depth - 1][0] if 1 <= depth <= len(levels) else -depth


def _get_unwrapped(tensor) -> Tensor:
    """A batched tensor's value with its batch dim (first)."""
    if not _is_batched(tensor):
        raise RuntimeError("No wrappers present!")
    return tensor._phys


def _add_batch_dim(tensor: Tensor, batch_dim: int, level: int) -> Tensor:
    """``tensor`` seen by the vmap of ``level`` as batched along ``batch_dim``."""
    return _batching.wrap(tensor.movedim(batch_dim, 0), _own_level(level))


def _remove_batch_dim(tensor: Tensor, level: int, batch_size: int, out_dim: int) -> Tensor:
    """The plain tensor with ``level``'s batch dim at ``out_dim`` (an unbatched tensor is expanded to
    that shape, as PyTorch's does: by broadcasting, so only ``out_dim=0`` always fits)."""
    if _is_batched(tensor) and tensor._level == _own_level(level):
        return tensor._phys.movedim(0, out_dim)
    return tensor.expand(*tensor.shape[:out_dim], batch_size, *tensor.shape[out_dim:])


# torch._C._functorch: vmap's batched tensors (core.batching) as PyTorch's wrapper API names them; tapelab
# has no grad-tracking or functional wrappers (tensordict imports _add_batch_dim and friends at import)
_functorch = _submodule("_functorch", "torch._C._functorch: functorch's wrapper-tensor primitives.",
                        is_batchedtensor=_is_batched, is_legacy_batchedtensor=_not_wrapped,
                        is_gradtrackingtensor=_not_wrapped, is_functionaltensor=_not_wrapped,
                        maybe_current_level=_maybe_current_level, get_unwrapped=_get_unwrapped,
                        _add_batch_dim=_add_batch_dim, _remove_batch_dim=_remove_batch_dim)
