"""``torch._C``: the few names of PyTorch's C extension that libraries probe (timm, torchvision,
Lightning) before deciding a code path; anything else they read with ``getattr(torch._C, name,
None)`` finds nothing, which is their "not available" branch."""
from __future__ import annotations

from .core.overrides import (DisableTorchFunction, DisableTorchFunctionSubclass,  # noqa: F401  (the protocol's
                             _disabled_torch_function_impl, _is_torch_function_mode_enabled,  # C-side names)
                             _len_torch_function_stack)
from .core.random import Generator  # noqa: F401  (torch._C.Generator is the generator type)
from .core.tensor import Tensor

__all__ = ["Generator", "_get_tracing_state", "_log_api_usage_once", "_get_cudnn_enabled", "DisableTorchFunction",
           "DisableTorchFunctionSubclass", "_disabled_torch_function_impl", "_is_torch_function_mode_enabled",
           "_len_torch_function_stack", "_TensorMeta"]

_TensorMeta = type(Tensor)   # Tensor's metaclass (annotations name it; tapelab's Tensor is a plain class)


def _get_tracing_state():
    """None: no TorchScript trace is ever running (``torch.jit.trace`` runs Python as it is)."""
    return None


def _log_api_usage_once(event: str) -> None:
    """PyTorch's usage logging hook: nothing is logged."""


def _get_cudnn_enabled() -> bool:
    from .backends import cudnn
    return bool(cudnn.enabled)
