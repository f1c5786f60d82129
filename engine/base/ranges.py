"""Named ranges of code for the recorders that are recording (the profiler's ``record_function``).

Below every layer that opens one: the optimizers label their step and zero_grad with PyTorch's
``Optimizer.step#SGD.step`` ranges, and the profiler (a layer above them) registers its recorders in
``RECORDING`` while they record. A range costs one list test when nothing records.
"""
from __future__ import annotations

import functools
import time

__all__ = ["RECORDING", "record_function"]

RECORDING: list = []   # recorders currently recording: each has ``recording`` and ``add_range(name, start, end)``


class record_function:
    """Label a range of code in the profile; a context manager or a decorator. Ranges nest.
    Costs one list test when nothing is profiling.

    >>> with record_function("forward"):
    ...     y = model(x)
    """

    def __init__(self, name: str, args: str | None = None):
        self.name = name if args is None else f"{name}({args})"
        self._open: list = []

    def __enter__(self) -> "record_function":
        self._open.append((tuple(RECORDING), time.perf_counter_ns()) if RECORDING else None)
        return self

    def __exit__(self, *exc) -> None:
        entry = self._open.pop()
        if entry is not None:
            end = time.perf_counter_ns()
            for rec in entry[0]:
                if rec.recording:
                    rec.add_range(self.name, entry[1], end)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):   # one per call: threads may share the decorated function
                return fn(*args, **kwargs)
        return wrapper
