"""The recorder: subscribes to the dispatcher's ``op`` and ``backward_step`` events for one
recording window and appends one ``Event`` per op, backward node and range to a ``Trace``.

Threads: as PyTorch's profiler (whose callbacks are thread-local), a recorder records the
thread that started it: ops, backward nodes and ``record_function`` ranges of other
threads are not its events (``events`` subscriptions are process-wide, so each handler
first compares the calling thread with the recorder's).

It copies names, numbers and shapes out of each engine event and keeps no reference to a
tensor, an array or a graph node, so recording never extends a lifetime.

Module spans (``with_modules``): the dispatcher reports each op with the module scope it
ran in (``dispatch.STATE.module_path``, outermost first). A span opens at the first op
seen under a path and closes at the end of the last op before the scope changes. So a
module's span starts at its first op and ends at its last (Python time before the first
and after the last op is not counted), and two back-to-back calls of the same module with
no op of its parent between them read as one call.

Memory (``profile_memory``), an estimate on any backend: an op allocates the bytes of the
memory block that owns its output's data (the array's ``base``, followed to the owner),
counted once per block; a view of a live block allocates nothing. A weak reference
on the block records its free when the last array using it dies. Memory that ops never
produced (tensors made by factories, temporaries inside one forward) is not seen.

Device time (CUDA activity): the engine tells us about an op only after it ran, so there is
no place to record a CUDA event before its kernels. Instead one timing event is recorded,
without synchronizing, on the current stream of the op's device after each op and each
backward node that ran there, and at the start one reference event per device. The
device time of an event is the GPU time between the previous event on that device (or the
reference) and its own: the work it queued, as long as the GPU is busy (one 4096x4096
matmul on an H200: 2.76 ms profiled, 2.78 ms between two events around it). Approximations:
while the GPU waits for the CPU (small ops, Python and profiler overhead) the idle gap is
counted too, so small ops' device times are upper bounds; device work queued outside ops
(factories, copies) goes to the next op or node (a backward node's own time is mostly
gradient accumulation); work on other streams is not timed. At stop one synchronize per device
turns the events into numbers (``Trace.set_device_time``) and drops them; a span's start
is the reference's CPU time plus the GPU time elapsed since it.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import warnings
import weakref

from ..base import events
from ..base.ranges import RECORDING
from .. import cuda
from ..autograd.engine import _RUNNING, running_node
from ..autograd.views import WRITING
from ..base.device import device as Device
from ..core.dispatch import STATE
from .flops import estimate_flops
from .names import Resolved, calls, resolve
from .trace import MemoryEvent, Trace

__all__ = ["Recorder", "RECORDING", "device_event"]

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_get_ident = threading.get_ident


def _user_stack(limit: int = 8) -> tuple:
    """Python frames outside tapelab, innermost first, as ``(code, line)`` pairs."""
    out = []
    f = sys._getframe(2)
    while f is not None and len(out) < limit:
        code = f.f_code
        if not code.co_filename.startswith(_PKG):
            out.append((code, f.f_lineno))
        f = f.f_back
    return tuple(out)


def _owner(array):
    """The array that owns the memory ``array`` uses (itself unless it is a view)."""
    base = getattr(array, "base", None)
    while base is not None and hasattr(base, "nbytes"):
        array, base = base, getattr(base, "base", None)
    return array


def device_event(dev: Device) -> cuda.Event:
    """A timing CUDA event, recorded now on ``dev``'s current stream.

    The recorder's one source of device timestamps, so tests can swap in a scripted fake
    (the simulated cuda device has no CUDA events). Raises ``RuntimeError`` without CUDA.
    """
    with cuda.device(dev.index):
        event = cuda.Event(enable_timing=True)
        event.record()
    return event


class _Chain:
    """One device's timing events in the order recorded: the reference, then one per timed row."""
    __slots__ = ("device", "ref", "ref_ns", "rows", "events")

    def __init__(self, device):
        self.device, self.ref, self.ref_ns = device, device_event(device), time.perf_counter_ns()
        self.rows: list = []
        self.events: list = []

    def mark(self, row: int) -> None:
        self.rows.append(row)
        self.events.append(device_event(self.device))

    def spans(self):
        """``(row, start_ns, duration_ns)`` per timed row, after one synchronize."""
        if not self.events:
            return
        self.events[-1].synchronize()
        prev = 0.0
        for row, event in zip(self.rows, self.events):
            t = self.ref.elapsed_time(event)   # ms since the reference
            yield row, self.ref_ns + round(prev * 1e6), round((t - prev) * 1e6)
            prev = t


class _BlockRef(weakref.ref):
    """A weak reference to a memory block that remembers what to record when it dies."""
    __slots__ = ("key", "nbytes", "name")

    def __new__(cls, block, callback, key, nbytes, name):
        return super().__new__(cls, block, callback)

    def __init__(self, block, callback, key, nbytes, name):
        super().__init__(block, callback)
        self.key, self.nbytes, self.name = key, nbytes, name


class Recorder:
    """One recording window into ``trace``; ``start()`` subscribes, ``stop()`` unsubscribes."""

    def __init__(self, trace: Trace, device_timing: bool = False):
        self.trace, self._raw = trace, trace.raw
        self.device_timing = device_timing
        self._chains: dict = {}        # device name -> _Chain (device_timing only)
        o = trace.options
        self.shapes, self.memory = o["record_shapes"], o["profile_memory"]
        self.stack, self.flops, self.modules = o["with_stack"], o["with_flops"], o["with_modules"]
        self.cap = trace.max_events
        self._subs: list = []
        self._open: list = []          # open module spans: (path, start_ns, depth), outermost first
        self._last_end = 0
        self._seq_module: dict = {}    # forward op seq -> module path, for backward nodes
        self._live: dict = {}          # id(block) -> _BlockRef
        self.allocated = 0
        self.thread = None             # the ident of the thread recorded (the one that started)

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        if self.device_timing:
            self._start_chains()
        timed = bool(self._chains)    # cpu-only profiles keep the plain handlers
        self.thread = _get_ident()
        # by fields: the dispatcher makes no ``OpRecorded`` per op for the profiler; one refresh each way
        self._subs = events.subscribe_group(("op", self._on_op_timed if timed else self._on_op, True),
                                            ("backward_step", self._on_step_timed if timed else self._on_step),
                                            ("collective", self._on_collective), ("made", self._on_made))
        RECORDING.append(self)

    def stop(self) -> None:
        events.unsubscribe_group(self._subs)
        self._subs = []
        if self in RECORDING:
            RECORDING.remove(self)
        self._close_modules(0)
        self._live.clear()             # dropping the refs drops their callbacks: later frees go unseen
        self._seq_module.clear()
        for chain in self._chains.values():
            for row, start, duration in chain.spans():
                self.trace.set_device_time(row, str(chain.device), start, duration)
        self._chains = {}

    @property
    def recording(self) -> bool:
        return bool(self._subs)

    def _room(self, kind: str) -> bool:
        if len(self.trace.raw) < self.cap:
            return True
        d = self.trace.dropped
        d[kind] = d.get(kind, 0) + 1
        return False

    def add_range(self, name: str, start_ns: int, end_ns: int, kind: str = "range") -> None:
        if _get_ident() == self.thread and self._room(kind):
            self.trace.raw.append((name, kind, start_ns, end_ns - start_ns, _get_ident(), "forward", "", (),
                                   (), "", -1, 0, 0, _user_stack() if self.stack else (), 0))

    # ------------------------------------------------------------------ handlers
    # The hot path: one tuple per event in Event's field order (Trace.events builds the objects). Told by
    # fields (``events.subscribe(..., fields=True)``): ``OpRecorded``'s fields as one tuple and its tensors.
    def _on_op(self, fields: tuple, tensors: tuple) -> None:
        tid = _get_ident()
        if tid != self.thread:
            return
        raw = self._raw
        if len(raw) >= self.cap:
            self._room("op")
            return
        seq, op, _, input_shapes, _, shape, dtype, _, _, duration_ns, start_ns, module, _ = fields
        running = _RUNNING.nodes   # running_node(), inlined: the backward node running, if any
        running = running[-1] if running else None
        name = op
        if tensors and tensors[0] and (tensors[1] is tensors[0][0] or WRITING and tensors[0][0] is WRITING[-1]):
            name += "_"     # written into its first operand: PyTorch's in-place op (add_)
        if self.modules:
            if running is not None:
                module = self._seq_module.get(running.tape_seq, "")
            else:
                self._track_modules(start_ns, duration_ns)
                self._seq_module[seq] = module
        else:
            module = ""
        raw.append((
            name, "op", start_ns, duration_ns, tid, "forward" if running is None else "backward",
            module, input_shapes, shape, dtype, seq,
            self._allocate(tensors, calls(name, input_shapes)[0][0], start_ns + duration_ns)
            if self.memory and tensors else 0,
            estimate_flops(op, input_shapes, shape) if self.flops else 0,
            _user_stack() if self.stack else (), 0))

    def _on_made(self, ev) -> None:
        """A factory or random draw: named by its op's declared call tree for its params, resolved
        now (the row keeps no params); its memory is not counted (see the module docstring)."""
        tid = _get_ident()
        if tid != self.thread or not self._room("op"):
            return
        res = ev.result[0] if type(ev.result) is tuple else ev.result
        shape, dtype = tuple(getattr(res, "shape", ())), getattr(getattr(res, "dtype", None), "name", "")
        path = STATE.module_path if self.modules else ()
        self._raw.append((
            Resolved(resolve(ev.op, (), ev.params)), "op", ev.start_ns, ev.duration_ns, tid,
            "forward" if running_node() is None else "backward", path[-1] if path else "", (), shape, dtype, -1,
            0, 0, _user_stack() if self.stack else (), 0))

    def _on_collective(self, ev) -> None:
        """A ``tapelab.distributed`` collective, timed on its group's communication thread (its own
        lane, so the timeline shows it beside the backward it overlaps); ``bytes`` is what was sent."""
        if self._room("collective"):
            self.trace.raw.append((ev.name, "collective", ev.start_ns, ev.duration_ns, ev.tid, "comm", "", (),
                                   ev.shape, ev.dtype, -1, ev.nbytes, 0, (), 0))

    def _on_step(self, step) -> None:
        tid = _get_ident()
        if tid != self.thread or not self._room("backward"):
            return
        node = step.node
        try:   # Node.tape_seq and OpNode.name inlined where they are slots (two frames a node), as the tape reads them
            fseq = node._tape_seq
        except AttributeError:
            fseq = None
        try:
            name = node.node_name
        except AttributeError:   # a node of another kind (a tensor-like's ``__torch_function__`` made it)
            name = None
        if name is None:
            name = node.name()
        self.trace.raw.append((
            name, "backward", step.start_ns, step.duration_ns, tid, "backward",
            self._seq_module.get(fseq, "") if self.modules else "",
            tuple([g._data.shape if g is not None else () for g in step.grad_outputs]) if self.shapes else (),
            (), "", fseq if fseq is not None else -1, 0, 0, (), 0))

    # ------------------------------------------------------------------ device time
    def _start_chains(self) -> None:
        try:
            self._chains = {f"cuda:{i}": _Chain(Device("cuda", i)) for i in range(cuda.device_count())}
        except RuntimeError as e:      # e.g. the simulated cuda device: no CUDA events
            warnings.warn(f"tapelab.profiler: device times are not recorded: {e}", stacklevel=7)
            self._chains = {}

    def _on_op_timed(self, fields: tuple, tensors: tuple) -> None:
        n = len(self._raw)
        self._on_op(fields, tensors)
        chain = self._chains.get(fields[7])   # the op's device
        if chain is not None and len(self._raw) > n:   # the op's row is the last one appended
            chain.mark(len(self._raw) - 1)

    def _on_step_timed(self, step) -> None:
        n = len(self._raw)
        self._on_step(step)
        if len(self._raw) > n:
            g = next((g for g in step.grad_outputs if g is not None), None)   # the node's device
            chain = self._chains.get(str(g.device)) if g is not None else None
            if chain is not None:
                chain.mark(n)

    # ------------------------------------------------------------------ modules
    def _track_modules(self, start_ns: int, duration_ns: int) -> None:
        path = STATE.module_path
        opened = self._open
        n = 0
        while n < len(opened) and n < len(path) and opened[n][0] == path[n]:
            n += 1
        if n < len(opened):
            self._close_modules(n)
        for depth in range(n, len(path)):
            name = path[depth]
            opened.append((name, start_ns, depth))
        self._last_end = start_ns + duration_ns

    def _close_modules(self, keep: int) -> None:
        while len(self._open) > keep:
            name, start, depth = self._open.pop()
            if self._room("module"):
                self.trace.raw.append((f"nn.Module: {name or '<root>'}", "module", start,
                                       max(self._last_end - start, 0), _get_ident(), "forward", name, (), (),
                                       "", -1, 0, 0, (), depth))

    # ------------------------------------------------------------------ memory
    def _allocate(self, tensors, name: str, ts: int) -> int:
        args, res = tensors
        block = _owner(res._data)
        key = id(block)
        if key in self._live or any(_owner(a._data) is block for a in args if hasattr(a, "_data")):
            return 0    # a view of a block already counted, or of an input
        nbytes = int(block.nbytes)
        try:
            self._live[key] = _BlockRef(block, self._free, key, nbytes, name)
        except TypeError:          # not weak-referenceable: counted, never seen freed
            pass
        self._record_memory(ts, nbytes, name)
        return nbytes

    def _free(self, ref) -> None:
        if self._live.pop(ref.key, None) is ref:
            self._record_memory(time.perf_counter_ns(), -ref.nbytes, ref.name)

    def _record_memory(self, ts: int, nbytes: int, name: str) -> None:
        self.allocated += nbytes
        t = self.trace
        if self.allocated > t.peak_bytes:
            t.peak_bytes = self.allocated
        if len(t.memory) < self.cap:
            t.memory.append(MemoryEvent(ts, nbytes, self.allocated, name))
        else:
            t.dropped["memory"] = t.dropped.get("memory", 0) + 1
