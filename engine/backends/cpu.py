"""``torch.backends.cpu``."""
from __future__ import annotations

__all__ = ["get_cpu_capability"]


def get_cpu_capability() -> str:
    """PyTorch's name for the vector ISA its kernels use; numpy picks its own at run time."""
    return "DEFAULT"
