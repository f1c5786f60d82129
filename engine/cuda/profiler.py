"""``torch.cuda.profiler``: start and stop the CUDA profiler's collection (Nsight's capture range,
``nsys --capture-range=cudaProfilerApi``) through cupy's runtime; PyTorch's AssertionError without
CUDA. (tapelab's own profiler is ``tapelab.profiler``.)"""
from __future__ import annotations

import contextlib

from ._runtime import check_error, cudart

__all__ = ["start", "stop", "profile"]

DEFAULT_FLAGS = ["gpustarttimestamp", "gpuendtimestamp", "gridsize3d", "threadblocksize", "streamid",
                 "enableonstart 0", "conckerneltrace"]


def start() -> None:
    """Start the CUDA profiler's data collection."""
    check_error(cudart().cudaProfilerStart())


def stop() -> None:
    """Stop the CUDA profiler's data collection."""
    check_error(cudart().cudaProfilerStop())


@contextlib.contextmanager
def profile():
    """Collect for the ``with`` block."""
    try:
        start()
        yield
    finally:
        stop()
