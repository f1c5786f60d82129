"""Exports of a ``Trace``: Chrome/Perfetto trace JSON, the JSON timeline the notebook
widgets render (``trace_to_dict``), a memory timeline and flame-graph stacks.

Chrome trace layout: one process; per Python thread a lane with ops, backward nodes,
``record_function`` and ``ProfilerStep#N`` ranges as complete (``"ph": "X"``) events that
nest by time; module spans on a lane of their own ("nn.Module"); estimated memory as a
counter track. ``cat`` tells them apart: ``cpu_op`` (forward op), ``backward_op`` (an op
run by a vjp), ``backward`` (a backward node), ``user_annotation`` (``record_function`` ranges and,
as in PyTorch's traces, the ``ProfilerStep#N`` spans: TensorBoard's profiler plugin finds the steps
by that category and name), ``module``.
Device time (CUDA activity) goes on a process per GPU, as in PyTorch's traces: pid = the
device index, one lane for the stream the ops ran on, one ``"cat": "kernel"`` span per
timed op or backward node (``args.seq`` names its CPU event).
"""
from __future__ import annotations

import gzip
import json
import os

__all__ = ["chrome_trace", "trace_to_dict", "write_json", "memory_timeline", "stacks"]

_CAT = {"range": "user_annotation", "step": "user_annotation", "module": "module", "backward": "backward",
        "collective": "collective"}
_MODULE_LANE = 1000   # module lanes are numbered after the thread lanes


def _lanes(trace) -> dict:
    tids = sorted({e.tid for e in trace.events})
    return {t: i + 1 for i, t in enumerate(tids)}


def _lane(e, lanes) -> int:
    return lanes[e.tid] + (_MODULE_LANE if e.kind == "module" else 0)


def _category(e) -> str:
    if e.kind == "op":
        return "backward_op" if e.phase == "backward" else "cpu_op"
    return _CAT[e.kind]


def chrome_trace(trace) -> dict:
    """The trace as a Chrome trace-event dict (times in µs from the profile's start)."""
    trace.analyze()
    pid, t0 = os.getpid(), trace.start_ns
    lanes = _lanes(trace)
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "tapelab"}}]
    for tid, lane in lanes.items():
        label = "main thread" if lane == 1 else f"thread {lane}"
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane, "args": {"name": label}})
        if any(e.kind == "module" and e.tid == tid for e in trace.events):
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane + _MODULE_LANE,
                        "args": {"name": f"nn.Module ({label})"}})
    for e in sorted(trace.events, key=lambda e: (e.start_ns, -e.duration_ns)):
        args = {"phase": e.phase}
        if e.kind == "op" or e.kind == "backward":
            args["seq"] = e.seq
        if e.module:
            args["module"] = e.module
        if e.input_shapes:
            args["Input Dims"] = [list(s) for s in e.input_shapes]
        if e.shape:
            args["Output Dims"] = list(e.shape)
        if e.dtype:
            args["dtype"] = e.dtype
        if e.bytes:
            args["bytes"] = e.bytes
        if e.flops:
            args["flops"] = e.flops
        if e.stack:
            args["stack"] = list(e.stack)
        out.append({"ph": "X", "cat": _category(e), "name": e.name, "pid": pid, "tid": _lane(e, lanes),
                    "ts": round((e.start_ns - t0) / 1e3, 3), "dur": round(e.duration_ns / 1e3, 3),
                    "args": args})
    out += _device_track(trace)
    for m in trace.memory:
        out.append({"ph": "C", "name": "Memory (estimated)", "pid": pid, "tid": 0,
                    "ts": round((m.ts_ns - t0) / 1e3, 3), "args": {"allocated": m.allocated}})
    notice = trace.drop_notice()
    if notice:
        out.append({"ph": "i", "s": "g", "name": notice, "pid": pid, "tid": 0,
                    "ts": round((trace.end_ns - t0) / 1e3, 3)})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"profiler": "tapelab", "options": trace.options, "step_num": trace.step_num,
                          "dropped_events": trace.n_dropped, "max_events": trace.max_events,
                          "peak_bytes": trace.peak_bytes}}


def _device_track(trace) -> list:
    """The device spans, one process per GPU (see the module docstring)."""
    timed = sorted((e for e in trace.events if e.device), key=lambda e: e.device_start_ns)
    pids = {name: int(name.partition(":")[2]) for name in sorted({e.device for e in timed})}  # "cuda:N"
    out = []
    for pid in pids.values():
        out += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"GPU {pid}"}},
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "current stream"}}]
    for e in timed:
        out.append({"ph": "X", "cat": "kernel", "name": e.name, "pid": pids[e.device], "tid": 0,
                    "ts": round((e.device_start_ns - trace.start_ns) / 1e3, 3), "dur": round(e.device_ns / 1e3, 3),
                    "args": {"device": e.device, "seq": e.seq}})
    return out


def trace_to_dict(trace) -> dict:
    """The widget data model (JSON-serialisable; see ``profile.to_dict``)."""
    from .averages import EventList
    trace.analyze()
    t0 = trace.start_ns
    index = {id(e): i for i, e in enumerate(trace.events)}
    lanes = _lanes(trace)
    evs = []
    for i, e in enumerate(trace.events):
        evs.append({
            "id": i, "name": e.name, "kind": e.kind, "phase": e.phase, "lane": _lane(e, lanes),
            "start_us": round((e.start_ns - t0) / 1e3, 3), "dur_us": round(e.duration_ns / 1e3, 3),
            "self_us": round(e.self_ns / 1e3, 3),
            "parent": index[id(e.parent)] if e.parent is not None else None,
            "module": e.module, "seq": e.seq, "input_shapes": [list(s) for s in e.input_shapes],
            "shape": list(e.shape), "dtype": e.dtype, "bytes": e.bytes, "mem_total": e.mem_total,
            "flops": e.flops, "stack": list(e.stack), "device": e.device,
            "device_us": round(e.device_ns / 1e3, 3), "device_total_us": round(e.device_total_ns / 1e3, 3)})

    def rows(lst):
        return [{"name": r.key, "module": r.module, "count": r.count,
                 "cpu_time_total_us": round(r.cpu_time_total, 3),
                 "self_cpu_time_total_us": round(r.self_cpu_time_total, 3),
                 "cpu_time_avg_us": round(r.cpu_time, 3), "cpu_memory_usage": r.cpu_memory_usage,
                 "self_cpu_memory_usage": r.self_cpu_memory_usage, "flops": r.flops,
                 "device_time_total_us": round(r.device_time_total, 3),
                 "self_device_time_total_us": round(r.self_device_time_total, 3),
                 "phases": sorted(r.phases)} for r in lst]

    every = EventList(trace.events, trace)
    return {
        "version": 1, "kind": "tapelab.profile", "options": dict(trace.options),
        "step_num": trace.step_num, "duration_us": round((trace.end_ns - t0) / 1e3, 3),
        "events": evs,
        "memory": [{"ts_us": round((m.ts_ns - t0) / 1e3, 3), "bytes": m.bytes, "allocated": m.allocated,
                    "name": m.name} for m in trace.memory],
        "peak_bytes": trace.peak_bytes,
        "averages": rows(every.key_averages()),
        "modules": rows(r for r in every.key_averages(group_by_module=True) if r.key.startswith("nn.Module: ")),
        "dropped": {"total": trace.n_dropped, "by_kind": dict(trace.dropped), "max_events": trace.max_events,
                    "notice": trace.drop_notice()},
    }


def write_json(obj, path: str) -> None:
    path = os.fspath(path)
    data = json.dumps(obj, separators=(",", ":")).encode()
    if path.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)


def memory_timeline(trace) -> dict:
    """Estimated allocated bytes over time: ``{"ts_us": [...], "allocated": [...], ...}``."""
    t0 = trace.start_ns
    return {"ts_us": [round((m.ts_ns - t0) / 1e3, 3) for m in trace.memory],
            "allocated": [m.allocated for m in trace.memory],
            "delta": [m.bytes for m in trace.memory], "op": [m.name for m in trace.memory],
            "peak_bytes": trace.peak_bytes,
            "method": "op output blocks, freed when their last array dies (weak references)"}


def memory_timeline_html(trace) -> str:
    tl = memory_timeline(trace)
    xs, ys = tl["ts_us"], tl["allocated"]
    w, h = 800, 240
    xmax, ymax = (max(xs) if xs else 1) or 1, (max(ys) if ys else 1) or 1
    pts = " ".join(f"{x / xmax * w:.1f},{h - y / ymax * h:.1f}" for x, y in zip(xs, ys))
    return (f"<html><body><h3>tapelab memory timeline (estimated), peak {tl['peak_bytes']} bytes</h3>"
            f'<svg width="{w}" height="{h}" style="border:1px solid #ccc">'
            f'<polyline fill="none" stroke="steelblue" points="{pts}"/></svg></body></html>')


def stacks(trace, metric: str = "self_cpu_time_total") -> list:
    """Flame-graph lines ``frame;frame;...;op;call value`` (outermost frame first; an aten call below
    the calls of its op that enclose it: ``aten::linear;aten::addmm``)."""
    out = []
    for e in trace.analyze().events:
        if e.kind != "op" or not e.stack:
            continue
        value = e.self_ns / 1e3 if metric.startswith("self") else e.duration_ns / 1e3
        calls, p = [e.name], e.parent
        while p is not None and p.kind == "op" and p.depth < e.depth and p.seq == e.seq:
            calls.append(p.name)
            p = p.parent
        out.append(";".join(reversed(e.stack)) + ";" + ";".join(reversed(calls)) + f" {int(value)}")
    return out
