"""``torch.nn.attention``: choosing the kernel behind ``F.scaled_dot_product_attention``.

tapelab has one implementation of attention, the math one (``SDPBackend.MATH``), on every device;
``sdpa_kernel`` accepts PyTorch's backend choices and checks them, and the fused-kernel
predicates say that no fused kernel is available.
"""
from __future__ import annotations

import contextlib
from enum import IntEnum

from ..functional_attention import ENABLED_BACKENDS

__all__ = ["SDPBackend", "sdpa_kernel", "can_use_flash_attention", "can_use_efficient_attention",
           "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(IntEnum):
    """The attention kernels PyTorch can pick from (same names and values)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self) -> str:   # PyTorch's enum prints its name (an IntEnum prints its number)
        return f"SDPBackend.{self.name}"


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Restrict attention to ``backends`` inside the block. tapelab always computes the math
    kernel's result, which every PyTorch backend approximates; on CPU a block that enables neither the
    math nor the flash kernel (or flash where it cannot run) refuses as PyTorch's does."""
    chosen = list(backends) if isinstance(backends, (list, tuple)) else [backends]
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    ENABLED_BACKENDS.append(frozenset(int(b) for b in chosen))
    try:
        yield
    finally:
        ENABLED_BACKENDS.pop()


def can_use_flash_attention(params=None, debug: bool = False) -> bool:
    """False: tapelab has no flash-attention kernel."""
    return False


def can_use_efficient_attention(params=None, debug: bool = False) -> bool:
    """False: tapelab has no memory-efficient attention kernel."""
    return False
