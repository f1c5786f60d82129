"""tapelab.profiler: ``torch.profiler``'s API, built on the dispatcher's events.

``profile`` records per-op and per-backward-node CPU time (with CUDA activity also device
time, from CUDA events), ``record_function`` ranges, module paths, input shapes, estimated
memory and FLOPs into a bounded buffer, and gives
``key_averages().table()``, ``export_chrome_trace`` (Chrome/Perfetto) and ``to_dict()``,
the JSON timeline the notebook widgets render. A finished profile also emits the engine
event ``profile_ready`` (payload ``ProfileReady``).
"""
from .actions import DeviceType, ProfilerAction, ProfilerActivity, kineto_available, schedule, supported_activities
from .averages import EventAverage, EventList
from .profiler import DEFAULT_MAX_EVENTS, profile, record_function, tensorboard_trace_handler
from . import record_ops  # noqa: F401  (torch.ops.profiler._record_function_enter/_exit)
from .trace import Event, MemoryEvent, ProfileReady, Trace

__all__ = ["profile", "schedule", "record_function", "tensorboard_trace_handler", "ProfilerActivity",
           "ProfilerAction", "supported_activities", "kineto_available", "DeviceType", "Event",
           "MemoryEvent", "Trace", "ProfileReady", "EventList", "EventAverage", "DEFAULT_MAX_EVENTS"]
