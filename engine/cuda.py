"""``tapelab.cuda``: device queries that work with or without cupy and a GPU."""
from __future__ import annotations

from .device import cuda_available

__all__ = ["is_available", "device_count", "current_device", "synchronize", "manual_seed",
           "manual_seed_all"]


def is_available() -> bool:
    """True when cupy is installed and a CUDA device and driver are present."""
    return cuda_available()


def device_count() -> int:
    if not cuda_available():
        return 0
    import cupy
    return int(cupy.cuda.runtime.getDeviceCount())


def current_device() -> int:
    if not cuda_available():
        raise RuntimeError("No CUDA GPUs are available")
    import cupy
    return int(cupy.cuda.Device().id)


def synchronize(device=None) -> None:
    if cuda_available():
        import cupy
        cupy.cuda.Device().synchronize()


def manual_seed(seed: int) -> None:
    if cuda_available():
        import cupy
        cupy.random.seed(seed)


manual_seed_all = manual_seed
