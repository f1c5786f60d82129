"""``torch.backends.cuda``: matmul precision and attention-kernel switches, kept and without effect
(tapelab's float32 matmuls are full float32; scaled_dot_product_attention has one implementation)."""
from __future__ import annotations

import importlib.util
import types

__all__ = ["matmul", "is_built", "flash_sdp_enabled", "enable_flash_sdp", "mem_efficient_sdp_enabled",
           "enable_mem_efficient_sdp", "math_sdp_enabled", "enable_math_sdp"]

matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                               allow_bf16_reduced_precision_reduction=True)
_SDP = {"flash": True, "mem_efficient": True, "math": True}


def is_built() -> bool:
    """True when cupy is installed: tapelab's CUDA support is "built" by installing it."""
    return importlib.util.find_spec("cupy") is not None


def flash_sdp_enabled() -> bool:
    return _SDP["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    _SDP["flash"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _SDP["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _SDP["mem_efficient"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _SDP["math"]


def enable_math_sdp(enabled: bool) -> None:
    _SDP["math"] = bool(enabled)
