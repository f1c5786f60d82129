"""The recorder: subscribes to the dispatcher's ``op`` and ``backward_step`` events for one
recording window and appends one ``Event`` per op, backward node and range to a ``Trace``.

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
counted once per block; a view of a live block allocates nothing. A ``weakref.finalize``
on the block records its free when the last array using it dies. Memory that ops never
produced (tensors made by factories, temporaries inside one forward) is not seen.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import weakref

from .. import events
from ..autograd.engine import running_node
from ..dispatch import STATE
from .flops import estimate_flops
from .trace import Event, MemoryEvent, Trace

__all__ = ["Recorder", "RECORDING"]

RECORDING: list = []          # recorders currently recording (record_function reports to these)
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_get_ident = threading.get_ident


def _user_stack(limit: int = 8) -> tuple:
    """Python frames outside tapelab, innermost first, as ``file(line): function``."""
    out = []
    f = sys._getframe(2)
    while f is not None and len(out) < limit:
        code = f.f_code
        if not code.co_filename.startswith(_PKG):
            out.append(f"{code.co_filename}({f.f_lineno}): {code.co_name}")
        f = f.f_back
    return tuple(out)


def _owner(array):
    """The array that owns the memory ``array`` uses (itself unless it is a view)."""
    base = getattr(array, "base", None)
    while base is not None and hasattr(base, "nbytes"):
        array, base = base, getattr(base, "base", None)
    return array


class Recorder:
    """One recording window into ``trace``; ``start()`` subscribes, ``stop()`` unsubscribes."""

    def __init__(self, trace: Trace):
        self.trace = trace
        o = trace.options
        self.shapes, self.memory = o["record_shapes"], o["profile_memory"]
        self.stack, self.flops, self.modules = o["with_stack"], o["with_flops"], o["with_modules"]
        self.cap = trace.max_events
        self._subs: list = []
        self._open: list = []          # open module spans: (path, Event), outermost first
        self._last_end = 0
        self._seq_module: dict = {}    # forward op seq -> module path, for backward nodes
        self._live: dict = {}          # id(block) -> (bytes, name, finalizer)
        self.allocated = 0

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        self._subs = [events.subscribe("op", self._on_op),
                      events.subscribe("backward_step", self._on_step)]
        RECORDING.append(self)

    def stop(self) -> None:
        for s in self._subs:
            s.unsubscribe()
        self._subs = []
        if self in RECORDING:
            RECORDING.remove(self)
        self._close_modules(0)
        for _, _, fin in self._live.values():
            if fin is not None:
                fin.detach()           # blocks outliving the profile stay counted as allocated
        self._live.clear()
        self._seq_module.clear()

    @property
    def recording(self) -> bool:
        return bool(self._subs)

    def _room(self, kind: str) -> bool:
        if len(self.trace.events) < self.cap:
            return True
        d = self.trace.dropped
        d[kind] = d.get(kind, 0) + 1
        return False

    def add_range(self, name: str, start_ns: int, end_ns: int, kind: str = "range") -> None:
        if self._room(kind):
            self.trace.events.append(Event(name, kind, start_ns, end_ns - start_ns, _get_ident(),
                                           stack=_user_stack() if self.stack else ()))

    # ------------------------------------------------------------------ handlers
    def _on_op(self, ev) -> None:
        running = running_node()
        backward = running is not None
        module = ""
        if self.modules:
            if backward:
                module = self._seq_module.get(running.tape_seq, "")
            else:
                module = ev.module
                self._track_modules(ev)
                self._seq_module[ev.seq] = module
        if not self._room("op"):
            return
        e = Event(ev.op, "op", ev.start_ns, ev.duration_ns, _get_ident(),
                  "backward" if backward else "forward", module,
                  ev.input_shapes if self.shapes else (), ev.shape, ev.dtype, ev.seq)
        if self.memory and ev.tensors:
            e.bytes = self._allocate(ev.tensors, ev.op, ev.start_ns + ev.duration_ns)
        if self.flops:
            e.flops = estimate_flops(ev.op, ev.input_shapes, ev.shape)
        if self.stack:
            e.stack = _user_stack()
        self.trace.events.append(e)

    def _on_step(self, step) -> None:
        if not self._room("backward"):
            return
        node = step.node
        fseq = node.tape_seq
        e = Event(node.name(), "backward", step.start_ns, step.duration_ns, _get_ident(), "backward",
                  self._seq_module.get(fseq, "") if self.modules else "",
                  tuple(tuple(g.shape) if g is not None else () for g in step.grad_outputs)
                  if self.shapes else (), seq=fseq if fseq is not None else -1)
        self.trace.events.append(e)

    # ------------------------------------------------------------------ modules
    def _track_modules(self, ev) -> None:
        path = STATE.module_path
        opened = self._open
        n = 0
        while n < len(opened) and n < len(path) and opened[n][0] == path[n]:
            n += 1
        if n < len(opened):
            self._close_modules(n)
        for depth in range(n, len(path)):
            name = path[depth]
            span = Event(f"nn.Module: {name or '<root>'}", "module", ev.start_ns, 0, _get_ident(),
                         module=name, depth=depth)
            opened.append((name, span))
        self._last_end = ev.start_ns + ev.duration_ns

    def _close_modules(self, keep: int) -> None:
        while len(self._open) > keep:
            _, span = self._open.pop()
            span.duration_ns = max(self._last_end - span.start_ns, 0)
            if self._room("module"):
                self.trace.events.append(span)

    # ------------------------------------------------------------------ memory
    def _allocate(self, tensors, name: str, ts: int) -> int:
        args, res = tensors
        block = _owner(res._data)
        key = id(block)
        if key in self._live or any(_owner(a._data) is block for a in args if hasattr(a, "_data")):
            return 0    # a view of a block already counted, or of an input
        nbytes = int(block.nbytes)
        try:
            fin = weakref.finalize(block, self._free, key)
        except TypeError:          # not weak-referenceable: counted, never seen freed
            fin = None
        self._live[key] = (nbytes, name, fin)
        self._record_memory(ts, nbytes, name)
        return nbytes

    def _free(self, key: int) -> None:
        item = self._live.pop(key, None)
        if item is not None:
            self._record_memory(time.perf_counter_ns(), -item[0], item[1])

    def _record_memory(self, ts: int, nbytes: int, name: str) -> None:
        self.allocated += nbytes
        t = self.trace
        if self.allocated > t.peak_bytes:
            t.peak_bytes = self.allocated
        if len(t.memory) < self.cap:
            t.memory.append(MemoryEvent(ts, nbytes, self.allocated, name))
        else:
            t.dropped["memory"] = t.dropped.get("memory", 0) + 1
