"""Activities, schedule actions and ``schedule``: the same names and step arithmetic as
``torch.profiler`` (a schedule maps a step number to what the profiler does in it)."""
from __future__ import annotations

import warnings
from enum import Enum
from typing import Callable

__all__ = ["ProfilerActivity", "ProfilerAction", "DeviceType", "schedule", "supported_activities",
           "kineto_available"]


class ProfilerActivity(Enum):
    CPU = 0
    CUDA = 1


class DeviceType(Enum):
    CPU = 0
    CUDA = 1


class ProfilerAction(Enum):
    """What the profiler does during a step: nothing, warm up, record, or record and then
    hand the finished trace to ``on_trace_ready``."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """A schedule for ``profile(schedule=...)``: skip ``skip_first`` steps, then cycles of
    ``wait`` idle steps, ``warmup`` steps and ``active`` recorded steps (the last one
    ``RECORD_AND_SAVE``), ``repeat`` times (0: until the profile ends).

    >>> s = schedule(wait=1, warmup=1, active=2, repeat=1)
    >>> [s(i).name for i in range(5)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE', 'NONE']
    """
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
            f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
            f"skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        k = step % cycle
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if k < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def supported_activities() -> set:
    from .. import cuda
    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if cuda.is_available() else set())


def kineto_available() -> bool:
    """True: the trace-based profiler API (``profile``, ``schedule``, chrome traces) is here."""
    return True
