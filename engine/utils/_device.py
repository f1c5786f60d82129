"""``torch.utils._device``: the default-device context as a decorator. Libraries import the module
(litgpt's utils does at import time) and decorate factories with ``set_device``; the context itself
is ``tapelab.device``'s, so a block and a decorated call set the same per-thread default."""
from __future__ import annotations

import functools
from typing import Callable

from ..base.device import device as _device

__all__ = ["DeviceContext", "device_decorator", "set_device"]


class DeviceContext:
    """The calling thread's default device for factories inside the block (``with torch.device(d)``)."""

    def __init__(self, device) -> None:
        self.device = _device(device)

    def __enter__(self) -> "DeviceContext":
        self.device.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.device.__exit__(exc_type, exc, tb)


def device_decorator(device, func: Callable) -> Callable:
    """``func`` run with ``device`` as the default device of its factories."""
    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        with DeviceContext(device):
            return func(*args, **kwargs)
    return wrapped


def set_device(device) -> Callable[[Callable], Callable]:
    """The decorator form of ``with torch.device(device)``."""
    return lambda func: device_decorator(_device(device), func)
