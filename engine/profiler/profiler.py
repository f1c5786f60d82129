"""``profile`` and ``record_function``: torch.profiler's API over the dispatcher's events.

While a profile records it subscribes to the engine's ``op`` and ``backward_step``
events (so the dispatcher takes its slow path); in wait and warmup steps, and outside
the ``with`` block, nothing is subscribed and the hot path is untouched. With
``ProfilerActivity.CUDA`` the recorder also times work on cuda devices with CUDA events
(see recorder.py).
"""
from __future__ import annotations

import os
import socket
import time
import warnings

from ..base import events
from .actions import ProfilerAction, ProfilerActivity, supported_activities
from .averages import EventList
from .export import chrome_trace, memory_timeline, memory_timeline_html, stacks, write_json
from ..base.ranges import record_function  # noqa: F401  (torch.profiler.record_function)
from .recorder import Recorder
from .trace import ProfileReady, Trace

__all__ = ["profile", "record_function", "tensorboard_trace_handler", "DEFAULT_MAX_EVENTS"]

DEFAULT_MAX_EVENTS = 200_000   # about 40 MB of chrome trace JSON


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class profile:
    """Profile the code inside ``with``: per-op and per-range CPU time, shapes, memory, FLOPs,
    and with CUDA activity the device time of ops run on cuda.

    Args:
        activities: ``ProfilerActivity`` values (CPU; CUDA when a GPU backend is present:
            times ops and backward nodes run on cuda, one CUDA event after each).
        schedule: ``step -> ProfilerAction`` (see ``schedule``); default: record every step.
        on_trace_ready: called with this profiler when a recorded cycle ends.
        record_shapes: keep each op's input shapes (shapes only, never tensors).
        profile_memory: estimate bytes allocated by op outputs and their frees (see recorder.py).
        with_stack: keep the user's Python frames for each op.
        with_flops: estimate FLOPs of matmul/conv/elementwise arithmetic.
        with_modules: keep module paths; module spans go on their own trace lane.
        acc_events: keep events across schedule cycles instead of starting each cycle afresh.
        max_events: cap on stored events per cycle; further events are counted and reported.

    Example::

        with tapelab.profiler.profile(record_shapes=True) as prof:
            with tapelab.profiler.record_function("step"):
                loss = model(x).sum()
                loss.backward()
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
        prof.export_chrome_trace("trace.json")
    """

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda=None, custom_trace_id_callback=None,
                 max_events: int = DEFAULT_MAX_EVENTS):
        activities = set(activities) if activities is not None else supported_activities()
        if ProfilerActivity.CUDA in activities and ProfilerActivity.CUDA not in supported_activities():
            warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=2)
            activities.discard(ProfilerActivity.CUDA)
        if max_events < 1:
            raise ValueError(f"profile(): max_events must be positive, got {max_events}")
        self.activities = activities
        self.options = {"record_shapes": bool(record_shapes), "profile_memory": bool(profile_memory),
                        "with_stack": bool(with_stack), "with_flops": bool(with_flops),
                        "with_modules": bool(with_modules)}
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.schedule = schedule if schedule is not None else _always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.acc_events = acc_events
        self.max_events = int(max_events)
        self.step_num = 0
        self.current_action = self.schedule(0)
        self.trace: Trace | None = None
        self._recorder: Recorder | None = None
        self._step_start = 0

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._transit(ProfilerAction.NONE, self.current_action)
        self._step_start = time.perf_counter_ns()

    def stop(self) -> None:
        self._close_step()
        self._transit(self.current_action, None)

    def step(self) -> None:
        """Mark the start of the next step; the schedule decides what happens in it."""
        self._close_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        self._step_start = time.perf_counter_ns()

    def _close_step(self) -> None:
        if self.record_steps and self._recorder is not None:
            self._recorder.add_range(f"ProfilerStep#{self.step_num}", self._step_start,
                                     time.perf_counter_ns(), "step")

    def _transit(self, prev, cur) -> None:
        rec = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if prev is ProfilerAction.RECORD_AND_SAVE and cur is not None or (prev in rec and cur is None):
            self._stop_trace()
            self._trace_ready()
        elif prev is ProfilerAction.RECORD and cur in (ProfilerAction.NONE, ProfilerAction.WARMUP):
            warnings.warn(f"Incorrect schedule: RECORD followed by {cur.name}", stacklevel=3)
            self._stop_trace()
        if cur in rec and self._recorder is None:
            self._start_trace()

    def _start_trace(self) -> None:
        if self.trace is None or not self.acc_events:
            self.trace = Trace(dict(self.options), self.max_events, start_ns=time.perf_counter_ns())
        self.trace.step_num = self.step_num
        self._recorder = Recorder(self.trace, ProfilerActivity.CUDA in self.activities)
        self._recorder.start()

    def _stop_trace(self) -> None:
        if self._recorder is not None:
            self._recorder.stop()
            self._recorder = None
            self.trace.end_ns = time.perf_counter_ns()
            if self.trace.n_dropped:
                warnings.warn("tapelab.profiler: " + self.trace.drop_notice(), stacklevel=4)

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)
        if events.has_subscribers("profile_ready"):
            events.emit("profile_ready", ProfileReady(self.trace, self.step_num, self))

    # ------------------------------------------------------------------ results
    def _require(self) -> Trace:
        if self.trace is None:
            raise RuntimeError("Profiler didn't finish running: nothing was recorded yet "
                               "(use it as a context manager, or check the schedule's active steps)")
        return self.trace

    def events(self) -> EventList:
        """Every recorded event (ops, backward nodes, ranges, module spans), with parents,
        children and self times filled in, in PyTorch's order: by start, an enclosing range before
        what it encloses (events are recorded as they end)."""
        t = self._require().analyze()
        return EventList(sorted(t.events, key=lambda e: (e.start_ns, -e.duration_ns)), t)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_module: bool = False) -> EventList:
        """Events grouped by name (and input shapes / top stack frames / module path)."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n, group_by_module)

    def table(self, **kwargs) -> str:
        return self.key_averages().table(**kwargs)

    def export_chrome_trace(self, path) -> str:
        """Write a Chrome/Perfetto trace (``.json``, or gzipped when the name ends in ``.gz``)."""
        write_json(chrome_trace(self._require()), path)
        return os.fspath(path)

    def export_memory_timeline(self, path, device=None) -> None:
        """Write the estimated memory timeline as JSON (``.json``/``.json.gz``) or an HTML plot."""
        path = os.fspath(path)
        trace = self._require()
        if path.endswith(".html"):
            with open(path, "w") as f:
                f.write(memory_timeline_html(trace))
        else:
            write_json(memory_timeline(trace), path)

    def export_stacks(self, path, metric: str = "self_cpu_time_total") -> None:
        """Write flame-graph input (one ``frames value`` line per op; needs ``with_stack``)."""
        with open(os.fspath(path), "w") as f:
            f.write("\n".join(stacks(self._require(), metric)) + "\n")

    def to_dict(self) -> dict:
        """The JSON timeline the notebook widgets render (``version`` 1):

        ``events``: ``{id, name, kind, phase, lane, start_us, dur_us, self_us, parent, module,
        seq, input_shapes, shape, dtype, bytes, mem_total, flops, stack, device, device_us,
        device_total_us}`` (device times from CUDA events, 0 without them) with ``kind`` in
        op/backward/range/step/module and ``parent`` an event id; ``seq`` links an op to the
        tape view (``grad_fn.tape_seq``), a backward node to its forward op.
        ``memory``: ``{ts_us, bytes, allocated, name}``; ``peak_bytes``; ``averages`` and
        ``modules``: key_averages rows; ``dropped``: ``{total, by_kind, max_events, notice}``.
        """
        return self._require().to_dict()

    def __repr__(self) -> str:
        n = len(self.trace.events) if self.trace is not None else 0
        return f"<tapelab.profiler.profile step_num={self.step_num} events={n}>"


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False):
    """An ``on_trace_ready`` that writes each cycle's chrome trace into ``dir_name`` as
    ``{worker_name}.{ms timestamp}.pt.trace.json`` (``.gz`` with ``use_gzip``)."""
    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        file = f"{name}.{time.time_ns() // 1_000_000}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, file))
    return handler
