"""``torch.version``: the build facts libraries read to pick code paths (``torch.version.cuda is None``
means "no CUDA build"). tapelab's CUDA is cupy's: ``cuda`` is cupy's CUDA runtime version when cupy
imports and sees a device, read on first access so importing tapelab never imports cupy."""
from __future__ import annotations

__all__ = ["__version__", "debug", "git_version", "hip", "rocm", "xpu"]

__version__ = "0.1.0"
debug = False
git_version = "unknown"
hip = None      # no ROCm build
rocm = None
xpu = None


def _cuda_runtime() -> str | None:
    from .base.device import cuda_available
    if not cuda_available():
        return None
    import cupy
    v = int(cupy.cuda.runtime.runtimeGetVersion())
    return f"{v // 1000}.{v % 1000 // 10}"


def __getattr__(name: str):
    if name == "cuda":
        return _cuda_runtime()
    raise AttributeError(f"module 'tapelab.version' has no attribute {name!r}")
