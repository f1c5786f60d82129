"""Static matplotlib figures of a profile or a Monitor, for papers and for nbviewer/GitHub, where
widgets don't render. matplotlib is imported when a function is called, never on import.

    from tapelab.widgets import plots
    plots.op_times(prof)            # horizontal bars: self time per op type
    plots.memory_timeline(prof)     # estimated allocated bytes over time, top allocations marked
    plots.module_times(prof)        # forward/backward time per module
    plots.monitor_curves(mon)       # a Monitor's curves
"""
from __future__ import annotations

__all__ = ["op_times", "memory_timeline", "module_times", "monitor_curves", "profile_figure"]


def _model(prof) -> dict:
    from .profileview import profile_model
    return profile_model(prof)


def _axes(ax, figsize):
    import matplotlib.pyplot as plt
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, constrained_layout=True)
    return ax


def op_times(prof, top: int = 15, ax=None, kinds=("op",), metric: str = "self_cpu_time_total_us"):
    """Bars of the ``top`` op types by ``metric`` (self time by default), forward and backward stacked."""
    m = _model(prof)
    by: dict = {}
    for e in m["events"]:
        if e["kind"] in kinds:
            row = by.setdefault(e["name"], [0.0, 0.0])
            value = e["self_us"] if metric.startswith("self") else e["dur_us"]
            row[1 if e["phase"] == "backward" else 0] += value / 1e3
    names = sorted(by, key=lambda k: -sum(by[k]))[:top][::-1]
    ax = _axes(ax, (6, 0.3 * len(names) + 1.2))
    fwd = [by[n][0] for n in names]
    bwd = [by[n][1] for n in names]
    ax.barh(names, fwd, color="#3b82f6", label="forward")
    ax.barh(names, bwd, left=fwd, color="#f97316", label="backward")
    ax.set_xlabel("self time (ms)" if metric.startswith("self") else "time (ms)")
    ax.set_title(m.get("title") or "time per op type")
    ax.legend(loc="lower right", frameon=False)
    return ax


def memory_timeline(prof, ax=None, annotate: int = 3):
    """Estimated allocated memory over time (step line), the peak and the ``annotate`` largest allocations."""
    m = _model(prof)
    mem = m.get("memory") or []
    ax = _axes(ax, (7, 2.6))
    xs = [p["ts_us"] / 1e3 for p in mem]
    ys = [p["allocated"] / 2 ** 20 for p in mem]
    if xs:
        ax.step([0.0] + xs, [0.0] + ys, where="post", color="#7c3aed")
        ax.fill_between([0.0] + xs, [0.0] + ys, step="post", alpha=0.15, color="#7c3aed")
        for a in m["top_alloc"][:annotate]:
            y = next((p["allocated"] for p in mem if p["ts_us"] >= a["start_us"]), 0) / 2 ** 20
            ax.annotate(a["name"], (a["start_us"] / 1e3, y), textcoords="offset points", xytext=(4, 6), fontsize=8)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("allocated (MiB, estimated)")
    ax.set_title(f"memory · peak {(m.get('peak_bytes') or 0) / 2 ** 20:.2f} MiB")
    return ax


def module_times(prof, ax=None, depth: int = 1):
    """Forward and backward time of the modules down to ``depth`` levels below the root."""
    m = _model(prof)
    rows = []

    def walk(n, d):
        if 0 < d <= depth:
            rows.append(n)
        if d < depth:
            for c in n["children"]:
                walk(c, d + 1)
    walk(m["module_tree"], 0)
    rows = rows[::-1]
    ax = _axes(ax, (6, 0.3 * len(rows) + 1.2))
    names = [r["path"] for r in rows]
    fwd = [r["forward_us"] / 1e3 for r in rows]
    ax.barh(names, fwd, color="#3b82f6", label="forward")
    ax.barh(names, [r["backward_us"] / 1e3 for r in rows], left=fwd, color="#f97316", label="backward")
    ax.set_xlabel("time (ms)")
    ax.set_title("time per module")
    ax.legend(loc="lower right", frameon=False)
    return ax


def monitor_curves(mon, axes=None):
    """One panel per logged metric plus step time, against the step."""
    import matplotlib.pyplot as plt
    h = mon.history() if hasattr(mon, "history") else mon
    names = list(h["series"]) + ["step time (ms)"]
    if axes is None:
        fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 2.4), constrained_layout=True, squeeze=False)
        axes = axes[0]
    for ax, name in zip(axes, names):
        ys = h["step_ms"] if name == "step time (ms)" else h["series"][name]
        pts = [(s, y) for s, y in zip(h["steps"], ys) if y is not None]
        if pts:
            ax.plot(*zip(*pts), color="#2563eb" if name != "step time (ms)" else "#6b7280")
        ax.set_title(name)
        ax.set_xlabel("step")
    return axes


def profile_figure(prof, top: int = 12):
    """One figure: time per op type, per module, and the memory timeline."""
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(11, 6), constrained_layout=True)
    grid = fig.add_gridspec(2, 2)
    op_times(prof, top=top, ax=fig.add_subplot(grid[0, 0]))
    module_times(prof, ax=fig.add_subplot(grid[0, 1]))
    memory_timeline(prof, ax=fig.add_subplot(grid[1, :]))
    return fig
