"""``torch.cpu``: the cpu as a device module, as PyTorch has one per device type, and ``cpu.amp``."""
from __future__ import annotations

from .amp import cpu as amp

# a package to the import system, so that ``import torch.cpu.amp`` (PyTorch's subpackage, here the
# attribute ``amp``) reaches the aliases' finder, which serves it as ``tapelab.amp.cpu``
__path__: list = []
__all__ = ["is_available", "device_count", "current_device", "synchronize", "amp"]


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device=None) -> None:
    """Nothing to wait for: cpu ops finish before they return."""
