"""``torch._C``: the few names of PyTorch's C extension that libraries probe (timm, torchvision,
Lightning) before deciding a code path; anything else they read with ``getattr(torch._C, name,
None)`` finds nothing, which is their "not available" branch."""
from __future__ import annotations

from .core.random import Generator  # noqa: F401  (torch._C.Generator is the generator type)

__all__ = ["Generator", "_get_tracing_state", "_log_api_usage_once", "_get_cudnn_enabled"]


def _get_tracing_state():
    """None: no TorchScript trace is ever running (``torch.jit.trace`` runs Python as it is)."""
    return None


def _log_api_usage_once(event: str) -> None:
    """PyTorch's usage logging hook: nothing is logged."""


def _get_cudnn_enabled() -> bool:
    from .backends import cudnn
    return bool(cudnn.enabled)
