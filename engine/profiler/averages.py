"""``key_averages()`` and ``table()``: events grouped by name (and input shapes, stack or
module), printed in ``torch.profiler``'s table layout."""
from __future__ import annotations

import math

__all__ = ["EventList", "EventAverage", "build_table", "format_time", "format_memory"]


class EventAverage:
    """Totals of the events that share a key (``FunctionEventAvg``'s names; times in µs)."""

    def __init__(self, key: str, input_shapes=None, stack=(), module: str = ""):
        self.key, self.input_shapes, self.stack, self.module = key, input_shapes, list(stack), module
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.flops = 0
        self.is_user_annotation = False
        self.kind = ""
        self.phases: set = set()

    def add(self, e) -> "EventAverage":
        self.count += 1
        self.cpu_time_total += e.duration_ns / 1e3
        self.self_cpu_time_total += e.self_ns / 1e3
        self.device_time_total += e.device_total_ns / 1e3
        self.self_device_time_total += e.device_ns / 1e3
        self.cpu_memory_usage += e.mem_total
        self.self_cpu_memory_usage += e.bytes
        self.flops += e.flops
        self.is_user_annotation = e.kind in ("range", "step")
        self.kind = e.kind
        self.phases.add(e.phase)
        return self

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    # PyTorch's older names for the device columns
    cuda_time = device_time
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    device_memory_usage = self_device_memory_usage = 0   # device memory is not estimated

    def __getattr__(self, name):
        if name.endswith(("_time_total", "_time", "_memory_usage")):
            return 0  # another device's column (xpu, privateuse1...): nothing measured there
        raise AttributeError(name)

    def __repr__(self) -> str:
        return (f"<EventAverage key={self.key!r} count={self.count} "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


class EventList(list):
    """A list of events (``prof.events()``) or of ``EventAverage`` rows (``key_averages()``)."""

    def __init__(self, items=(), trace=None):
        super().__init__(items)
        self._trace = trace

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_module: bool = False) -> "EventList":
        """Group events by name; also by input shapes, by the top ``group_by_stack_n`` stack
        frames, or (``group_by_module``) by module path, one row per op and module. Module
        spans (``nn.Module: ...``) appear only with ``group_by_module``."""
        rows: dict = {}
        for e in self:
            if e.kind == "module" and not group_by_module:
                continue
            key = [e.name]
            if group_by_input_shape:
                key.append(str([list(s) for s in e.input_shapes]))
            if group_by_stack_n:
                key.append(e.stack[:group_by_stack_n])
            if group_by_module:
                key.append(e.module)
            key = tuple(key)
            row = rows.get(key)
            if row is None:
                name = e.name if not group_by_module or e.kind == "module" or not e.module \
                    else f"{e.module}: {e.name}"
                row = rows[key] = EventAverage(
                    name, [list(s) for s in e.input_shapes] if group_by_input_shape else None,
                    e.stack[:group_by_stack_n] if group_by_stack_n else (), e.module)
            row.add(e)
        return EventList(rows.values(), self._trace)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """The rows as ``torch.profiler``'s text table (sorted descending by ``sort_by``)."""
        return build_table(self, sort_by, row_limit, max_src_column_width, max_name_column_width,
                           max_shapes_column_width, header, top_level_events_only, time_unit, self._trace)

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self if getattr(e, "kind", "") != "module")

    def total_average(self) -> EventAverage:
        total = EventAverage("Total")
        for e in self:
            total.count += e.count
            total.cpu_time_total += e.cpu_time_total
            total.self_cpu_time_total += e.self_cpu_time_total
            total.device_time_total += e.device_time_total
            total.self_device_time_total += e.self_device_time_total
        return total

    def __str__(self) -> str:
        return self.table()


def format_time(us: float, unit: str | None = None) -> str:
    if unit == "s" or (unit is None and us >= 1e6):
        return f"{us / 1e6:.3f}s"
    if unit == "ms" or (unit is None and us >= 1e3):
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_memory(nbytes: int) -> str:
    for scale, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"


def _share(us: float, total: float) -> str:
    return "NaN" if total == 0 else f"{us * 100.0 / total:.2f}%"


_FLOP_UNITS = ("FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs")


def build_table(rows, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
                max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None,
                trace=None) -> str:
    rows = list(rows)
    if not rows:
        return ""
    options = trace.options if trace is not None else {}
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device").replace("xpu", "device")
        rows.sort(key=lambda r: getattr(r, attr, 0) or 0, reverse=True)
    if top_level_events_only:
        rows = [r for r in rows if getattr(r, "parent", None) is None]
    has_shapes = any(r.input_shapes for r in rows)
    stacks = [r.stack for r in rows if r.stack]
    with_memory = options.get("profile_memory", False)
    flops = [r.flops for r in rows if r.flops > 0]
    with_device = any(r.device_time_total for r in rows)

    name_w = min(max(len(r.key) for r in rows) + 4, max_name_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if with_device:
        headers += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
    if with_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
    headers.append("# of Calls")
    widths = [name_w] + [12] * (len(headers) - 1)
    align = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(min(max(len(str(r.input_shapes)) for r in rows) + 4, max_shapes_column_width))
        align.append(">")
    if stacks:
        headers.append("Source Location")
        widths.append(min(max(len(s) for st in stacks for s in st) + 4, max_src_column_width))
        align.append("<")
    if flops:
        k = int(max(0, min(math.log10(min(flops)) / 3, len(_FLOP_UNITS) - 1)))
        flop_scale = 10.0 ** (-3 * k)
        headers.append(f"Total {_FLOP_UNITS[k]}")
        widths.append(12)
        align.append(">")

    row_format = "".join(f"{{:{a}{w}}}  " for a, w in zip(align, widths))
    sep = "".join("-" * w + "  " for w in widths)
    total_self = sum(r.self_cpu_time_total for r in rows if getattr(r, "kind", "") != "module")
    device_self = sum(r.self_device_time_total for r in rows if getattr(r, "kind", "") != "module")
    out = []
    if header is not None:
        out += ["=" * (len(sep) - 2), header]
    out += [sep, row_format.format(*headers), sep]

    def trim(path: str, width: int) -> str:
        return path if len(path) <= width else "..." + path[len(path) - width + 3:]

    for r in rows[:row_limit]:
        name = r.key if len(r.key) < name_w - 3 else r.key[:name_w - 3] + "..."
        values = [name, _share(r.self_cpu_time_total, total_self),
                  format_time(r.self_cpu_time_total, time_unit),
                  _share(r.cpu_time_total, total_self), format_time(r.cpu_time_total, time_unit),
                  format_time(r.cpu_time, time_unit)]
        if with_device:
            values += [format_time(r.self_device_time_total, time_unit),
                       _share(r.self_device_time_total, device_self),
                       format_time(r.device_time_total, time_unit), format_time(r.device_time, time_unit)]
        if with_memory:
            values += [format_memory(r.cpu_memory_usage), format_memory(r.self_cpu_memory_usage)]
        values.append(r.count)
        if has_shapes:
            values.append(str(r.input_shapes if r.input_shapes is not None else [])[:widths[len(values)]])
        if stacks:
            values.append(trim(r.stack[0], widths[len(values)]) if r.stack else "")
        if flops:
            values.append(f"{r.flops * flop_scale:8.3f}" if r.flops > 0 else "--")
        out.append(row_format.format(*values))
        if stacks and len(r.stack) > 1:
            src = headers.index("Source Location")
            for entry in r.stack[1:]:
                blank = [""] * len(headers)
                blank[src] = trim(entry, widths[src])
                out.append(row_format.format(*blank))
    out += [sep, f"Self CPU time total: {format_time(total_self, time_unit)}"]
    if with_device:
        out.append(f"Self CUDA time total: {format_time(device_self, time_unit)}")
    if trace is not None:
        if with_memory:
            out.append(f"Peak memory (estimated from op outputs): {format_memory(trace.peak_bytes)}")
        notice = trace.drop_notice()
        if notice:
            out.append("WARNING: " + notice)
    return "\n".join(out) + "\n"
