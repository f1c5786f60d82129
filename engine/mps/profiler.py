"""``torch.mps.profiler``: Metal's signpost tracing and GPU capture; each start raises without the backend."""
from __future__ import annotations

import contextlib

__all__ = ["start", "stop", "profile", "is_metal_capture_enabled", "is_capturing_metal", "metal_capture"]


def _without(what: str) -> RuntimeError:
    return RuntimeError(f"Cannot execute {what}() without MPS backend.")


def start(mode: str = "interval", wait_until_completed: bool = False) -> None:
    raise _without("profilerStartTrace")


def stop() -> None:
    raise _without("profilerStopTrace")


@contextlib.contextmanager
def profile(mode: str = "interval", wait_until_completed: bool = False):
    try:
        start(mode, wait_until_completed)
        yield
    finally:
        stop()   # as PyTorch's: the stop's error is the one raised


def is_metal_capture_enabled() -> bool:
    raise AttributeError("module 'torch._C' has no attribute '_mps_isCaptureEnabled'")


def is_capturing_metal() -> bool:
    raise AttributeError("module 'torch._C' has no attribute '_mps_isCapturing'")


@contextlib.contextmanager
def metal_capture(fname: str):
    """PyTorch's capture first asks whether capture is enabled, then stops the capture on the way out;
    without the backend the stop's error is the one that surfaces."""
    raise AttributeError("module 'torch._C' has no attribute '_mps_stopCapture'")
    yield
