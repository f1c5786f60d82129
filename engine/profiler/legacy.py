"""``torch.autograd.profiler``: the older profiler's names (``install_aliases`` serves that module
from here, since ``tapelab.autograd`` sits below the profiler). ``profile`` takes the autograd
profiler's arguments over ``tapelab.profiler.profile``; ``record_function`` and ``EventList`` are
the same objects; there are no NVTX ranges to emit or nvprof files to read without CUDA's tools."""
from __future__ import annotations

import contextlib

from .averages import EventList
from .profiler import profile as _profile
from .profiler import record_function

__all__ = ["profile", "record_function", "EventList", "emit_nvtx", "emit_itt", "load_nvprof"]


class profile(_profile):
    """``torch.autograd.profiler.profile(enabled=True, *, use_cuda=False, record_shapes=False, ...)``;
    with ``enabled=False`` entering and leaving it records nothing."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False, custom_trace_id_callback=None):
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules, use_cuda=use_cuda or None)
        self.enabled = enabled

    def __enter__(self) -> "profile":
        return super().__enter__() if self.enabled else self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            super().__exit__(*exc)

    @property
    def function_events(self):
        """The recorded events (PyTorch's name on this profiler for ``events()``)."""
        return self.events()

    def __str__(self) -> str:
        """The events' table, as ``print(prof)`` shows PyTorch's autograd profiler."""
        return str(self.events())


@contextlib.contextmanager
def emit_nvtx(enabled: bool = True, record_shapes: bool = False):
    """NVTX ranges for nvprof: none are emitted (no CUDA tools here); the block runs as is."""
    yield


@contextlib.contextmanager
def emit_itt(enabled: bool = True, record_shapes: bool = False):
    """ITT ranges for VTune: none are emitted; the block runs as is."""
    yield


def load_nvprof(path: str):
    raise RuntimeError(f"load_nvprof({path!r}): tapelab reads no nvprof traces (no CUDA tools)")
