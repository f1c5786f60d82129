"""``torch.backends.cuda``: matmul precision and attention-kernel switches, kept and without effect
(tapelab's float32 matmuls are full float32; scaled_dot_product_attention has one implementation)."""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import types
import warnings

__all__ = ["matmul", "is_built", "flash_sdp_enabled", "enable_flash_sdp", "mem_efficient_sdp_enabled",
           "enable_mem_efficient_sdp", "math_sdp_enabled", "enable_math_sdp", "sdp_kernel"]

matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                               allow_bf16_reduced_precision_reduction=True)
_SDP = {"flash": True, "mem_efficient": True, "math": True}


@functools.cache
def is_built() -> bool:
    """True when cupy is installed: tapelab's CUDA support is "built" by installing it. Asked once per
    process, as PyTorch's answer is fixed when it is built (the search of sys.path took ~120 us, and
    ``accelerator.is_available()`` asks before every benchmark clock read)."""
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


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True):
    """The older form of ``nn.attention.sdpa_kernel`` (deprecated in PyTorch, still in programs):
    the flags keep their values for the block and are restored after it."""
    warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                  "removed. Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with updated "
                  "signature.", FutureWarning, stacklevel=3)
    saved = dict(_SDP)
    _SDP.update(flash=bool(enable_flash), math=bool(enable_math), mem_efficient=bool(enable_mem_efficient))
    try:
        yield
    finally:
        _SDP.update(saved)
