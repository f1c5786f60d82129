"""``torch.nn.attention``: choosing the kernel behind ``F.scaled_dot_product_attention``.

tapelab has one implementation of attention, the math one (``SDPBackend.MATH``), on every device;
``sdpa_kernel`` accepts PyTorch's backend choices and checks them, and the fused-kernel
predicates say that no fused kernel is available.
"""
from __future__ import annotations

import contextlib
from enum import IntEnum

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


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Restrict attention to ``backends`` inside the block. tapelab always computes the math
    kernel's result, which every PyTorch backend approximates."""
    chosen = list(backends) if isinstance(backends, (list, tuple)) else [backends]
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    yield


def can_use_flash_attention(params=None, debug: bool = False) -> bool:
    """False: tapelab has no flash-attention kernel."""
    return False


def can_use_efficient_attention(params=None, debug: bool = False) -> bool:
    """False: tapelab has no memory-efficient attention kernel."""
    return False
