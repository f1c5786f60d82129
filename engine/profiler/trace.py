"""What a profile records: plain dataclass events, and the analysis that nests them.

An ``Event`` is one timed span: an op dispatched (``kind="op"``, forward or inside a
vjp: ``phase``), a backward node run (``"backward"``), a ``record_function`` range
(``"range"``), a ``ProfilerStep#N`` range (``"step"``) or an nn.Module call (``"module"``,
rebuilt from the module path the dispatcher reports with each op, on a lane of its own).
Events hold names, numbers and shapes only: never a tensor.

Nesting is recovered after recording, from the intervals: per thread, an event's parent
is the innermost earlier event whose interval contains it. Self time is total time minus
the children's totals. Module spans nest only among themselves (they are approximate:
see ``Recorder``), so they never change the self time of ops and ranges.

Device time (CUDA activity): an op or backward node run on a cuda device carries its own
device time (``device_ns``, measured as the recorder describes); ``analyze`` adds the
children's to get ``device_total_ns``, so a range or backward node totals the device work
of the ops inside it, as PyTorch's ``device_time_total`` does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .names import calls, layout, node_names

__all__ = ["Event", "MemoryEvent", "Trace", "ProfileReady"]

# parents before children when two spans start at the same instant
_RANK = {"step": 0, "range": 1, "module": 2, "backward": 3, "op": 4, "collective": 5}
_DEVICE = 15   # index of Event.device: recorder rows stop before it until device times are set


@dataclass(slots=True, eq=False)
class Event:
    """One timed span. Times are ``time.perf_counter_ns`` values (``start_ns``) and ns."""
    name: str
    kind: str
    start_ns: int
    duration_ns: int
    tid: int
    phase: str = "forward"      # "backward" for backward nodes and the ops their vjps dispatch
    module: str = ""            # module path (with_modules); for backward, that of the forward op
    input_shapes: tuple = ()    # record_shapes: one shape per input (() for Python numbers)
    shape: tuple = ()           # output shape (ops)
    dtype: str = ""
    seq: int = -1               # ops: the dispatcher's seq (= grad_fn.tape_seq); backward: forward seq
    bytes: int = 0              # profile_memory: bytes newly allocated for the output
    flops: int = 0              # with_flops: estimated floating point operations
    stack: tuple = ()           # with_stack: "file(line): function", innermost first
    depth: int = 0              # modules: nesting depth
    device: str = ""            # CUDA activity: the device device_ns was measured on ("" if not)
    device_start_ns: int = 0    # start of the device span, on the perf_counter clock
    device_ns: int = 0          # device time of this event's own work
    # filled by Trace.analyze()
    self_ns: int = 0
    mem_total: int = 0
    device_total_ns: int = 0
    parent: "Event | None" = field(default=None, repr=False)
    children: list | None = field(default=None, repr=False)

    # -- torch.autograd.profiler_util.FunctionEvent's names (times in microseconds) --
    @property
    def key(self) -> str:
        return self.name

    @property
    def count(self) -> int:
        return 1

    @property
    def cpu_time_total(self) -> float:
        return self.duration_ns / 1e3

    @property
    def cpu_time(self) -> float:
        return self.duration_ns / 1e3

    @property
    def self_cpu_time_total(self) -> float:
        return self.self_ns / 1e3

    @property
    def self_device_time_total(self) -> float:
        return self.device_ns / 1e3

    @property
    def device_time_total(self) -> float:
        return self.device_total_ns / 1e3

    device_time = cuda_time = cuda_time_total = device_time_total
    self_cuda_time_total = self_device_time_total

    @property
    def cpu_memory_usage(self) -> int:
        return self.mem_total

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.bytes

    @property
    def cpu_parent(self) -> "Event | None":
        return self.parent

    @property
    def cpu_children(self) -> list:
        return self.children or []

    @property
    def is_user_annotation(self) -> bool:
        return self.kind in ("range", "step")

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


def _events(row: tuple, shapes: bool) -> tuple:
    """The events of one recorder row, and which of them carries its numbers (FLOPs, memory, device
    time): an op's PyTorch call tree (``names.calls``), a backward node's two events, or the row.
    An op's row holds its input shapes (its call tree may depend on them): kept if ``shapes``."""
    e = Event(*row)
    if e.stack:  # the recorder keeps (code, line) pairs; text is made once, here
        e.stack = tuple(f"{code.co_filename}({line}): {code.co_name}" for code, line in e.stack)
    kind = e.kind
    if kind == "op":
        parsed = calls(e.name, e.input_shapes)
        if not shapes:
            e.input_shapes = ()
        if len(parsed) == 1:
            e.name = parsed[0][0]
            return [e], 0
        out, carrier = [], 0
        for (name, depth, _, carries), (start, duration) in zip(parsed, layout(parsed, e.start_ns, e.duration_ns)):
            if carries:
                carrier = len(out)
                e.name, e.start_ns, e.duration_ns, e.depth = name, start, duration, depth
                out.append(e)
            else:
                out.append(Event(name, kind, start, duration, e.tid, e.phase, e.module, e.input_shapes, e.shape,
                                 e.dtype, e.seq, stack=e.stack, depth=depth))
        return out, carrier
    if kind == "backward":
        outer, e.name = node_names(e.name)
        e.depth = 1
        return [Event(outer, kind, e.start_ns, e.duration_ns, e.tid, e.phase, e.module, e.input_shapes,
                      seq=e.seq), e], 1
    return [e], 0


@dataclass(slots=True)
class MemoryEvent:
    """An allocation (``bytes > 0``, at the op's end) or a free (``bytes < 0``, when the
    last reference to the array's memory died); ``allocated`` is the running estimate."""
    ts_ns: int
    bytes: int
    allocated: int
    name: str


@dataclass(eq=False)
class Trace:
    """Everything one profiling cycle recorded (``profile`` keeps the latest one).

    ``dropped`` counts events per kind that did not fit under ``max_events``.
    """
    options: dict
    max_events: int
    start_ns: int = 0
    end_ns: int = 0
    step_num: int = 0
    raw: list = field(default_factory=list, repr=False)   # recorder rows: Event's fields, in order
    memory: list = field(default_factory=list)
    dropped: dict = field(default_factory=dict)
    peak_bytes: int = 0
    _events: list = field(default_factory=list, repr=False)
    _rows: list = field(default_factory=list, repr=False)   # raw row index -> its carrier event's index
    _analyzed: int = field(default=-1, repr=False)

    @property
    def events(self) -> list:
        """The recorded ``Event`` objects (built from the recorder's rows on first access:
        appending a tuple is what keeps the per-op cost low)."""
        done = len(self._rows)
        if done < len(self.raw):
            evs, rows = self._events, self._rows
            shapes = self.options.get("record_shapes", False)
            for row in self.raw[done:]:
                made, carrier = _events(row, shapes)
                rows.append(len(evs) + carrier)
                evs += made
        return self._events

    @property
    def n_dropped(self) -> int:
        return sum(self.dropped.values())

    def drop_notice(self) -> str:
        """One line saying how many events were dropped, or ``""``."""
        n = self.n_dropped
        if not n:
            return ""
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(self.dropped.items()))
        return (f"{n} events were dropped after the buffer reached max_events={self.max_events} "
                f"({kinds}); times and counts cover the recorded events only. Profile fewer steps "
                f"(schedule(active=...)) or raise max_events.")

    def set_device_time(self, index: int, device: str, start_ns: int, duration_ns: int) -> None:
        """Give the ``index``-th recorded event its device span (the recorder calls this at stop)."""
        self.raw[index] = self.raw[index][:_DEVICE] + (device, start_ns, duration_ns)
        if index < len(self._rows):   # already built by an early reader
            e = self._events[self._rows[index]]
            e.device, e.device_start_ns, e.device_ns = device, start_ns, duration_ns
            self._analyzed = -1

    def analyze(self) -> "Trace":
        """Link parents/children and compute self times and memory totals (cached)."""
        evs = self.events
        if self._analyzed == len(evs):
            return self
        for e in evs:
            e.parent, e.children, e.self_ns, e.mem_total = None, [], e.duration_ns, e.bytes
            e.device_total_ns = e.device_ns
        order = sorted(evs, key=lambda e: (e.kind == "module", e.tid, e.start_ns,
                                                   -e.duration_ns, _RANK[e.kind], e.depth))
        stack: list = []
        lane = None
        for e in order:
            key = (e.kind == "module", e.tid)
            if key != lane:
                lane, stack = key, []
            while stack and e.end_ns > stack[-1].end_ns:  # not inside the top (or overlapping it)
                stack.pop()
            if stack:
                p = stack[-1]
                e.parent = p
                p.children.append(e)
                p.self_ns -= e.duration_ns
            stack.append(e)
        for e in reversed(order):  # children were visited after parents: add totals bottom-up
            if e.parent is not None:
                e.parent.mem_total += e.mem_total
                e.parent.device_total_ns += e.device_total_ns
        for e in evs:
            e.self_ns = max(e.self_ns, 0)
        self._analyzed = len(evs)
        return self

    def to_dict(self) -> dict:
        from .export import trace_to_dict
        return trace_to_dict(self)


@dataclass
class ProfileReady:
    """Payload of the ``profile_ready`` engine event: emitted when a profile stops and on
    each schedule cycle's ``on_trace_ready``. ``trace.to_dict()`` is the widget data model."""
    trace: Trace
    step_num: int
    profiler: object = field(default=None, repr=False)
