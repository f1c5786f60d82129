"""ProfileView: a ``tapelab.profiler`` profile in the notebook, and its view model.

``profile_model(prof)`` turns a profile (or its ``to_dict()``) into what the renderer draws:
the engine's timeline JSON (``version`` 1) plus

- ``tracks``: timeline rows, one per (group, thread lane) with group in ranges (``record_function``
  and ``ProfilerStep#N``), forward (ops), backward (backward nodes and the ops their vjps run) and
  modules (``nn.Module`` spans); every event gets ``track`` (an index into ``tracks``) and
  ``depth`` (how deeply it nests inside other events of its track, by time);
- ``module_tree``: time per module path, nested (forward span time, backward node time, the ops
  run directly in the module);
- ``totals``: wall time, forward and backward time, self time of the ops, counts;
- ``top_alloc``: the ops that allocated the most (estimated) memory.

The events sent are capped at ``max_events`` (the longest kept, with their parents); ``meta``
says how many were left out. Only JSON goes to the frontend: no engine object leaks.
"""
from __future__ import annotations

import html
import json

from ._lazy import lazy_widget
from .fallback import BUDGET, ROWS, details, timeline_svg

__all__ = ["PROFILE_MIME", "profile_model", "profile_html", "ProfileView", "TRACK_GROUPS"]

PROFILE_MIME = "application/vnd.tapelab.profile+json"
TRACK_GROUPS = ("ranges", "forward", "backward", "modules")
MAX_EVENTS = 20_000
_EPS = 2e-3        # µs: to_dict rounds times to 1 ns


def _group(e: dict) -> str:
    k = e["kind"]
    if k in ("range", "step"):
        return "ranges"
    if k == "module":
        return "modules"
    if k == "backward" or e.get("phase") == "backward":
        return "backward"
    return "forward"


def _cap(events: list, max_events: int) -> list:
    """Keep the longest ``max_events`` events and every parent of a kept one; ids are renumbered."""
    if len(events) <= max_events:
        return events
    keep = set(sorted(range(len(events)), key=lambda i: -events[i]["dur_us"])[:max_events])
    for i in list(keep):
        p = events[i]["parent"]
        while p is not None and p not in keep:
            keep.add(p)
            p = events[p]["parent"]
    order = sorted(keep)
    new = {old: n for n, old in enumerate(order)}
    out = []
    for old in order:
        e = dict(events[old])
        e["id"] = new[old]
        e["parent"] = new.get(e["parent"]) if e["parent"] is not None else None
        out.append(e)
    return out


def _tracks(events: list) -> list:
    """Assign ``track`` and ``depth`` to every event (in place); return the track list."""
    keys = sorted({(TRACK_GROUPS.index(_group(e)), e["lane"] % 1000) for e in events})
    lanes = sorted({lane for _, lane in keys})
    tracks = []
    index = {}
    for g, lane in keys:
        name = TRACK_GROUPS[g]
        label = name if len(lanes) == 1 else f"{name} · thread {lanes.index(lane) + 1}"
        index[(g, lane)] = len(tracks)
        tracks.append({"id": len(tracks), "group": name, "lane": lane, "label": label, "depth": 0, "count": 0})
    by_track: dict = {}
    for e in events:
        t = index[(TRACK_GROUPS.index(_group(e)), e["lane"] % 1000)]
        e["track"] = t
        by_track.setdefault(t, []).append(e)
    for t, evs in by_track.items():
        evs.sort(key=lambda e: (e["start_us"], -e["dur_us"]))
        stack: list = []
        deepest = 0
        for e in evs:
            while stack and stack[-1] <= e["start_us"] + _EPS:
                stack.pop()
            e["depth"] = len(stack)
            deepest = max(deepest, len(stack) + 1)
            stack.append(e["start_us"] + e["dur_us"])
        tracks[t]["depth"] = deepest
        tracks[t]["count"] = len(evs)
    return tracks


def _module_tree(events: list) -> dict:
    """Time per module path, nested: ``{path, name, forward_us, backward_us, calls, ops, children}``."""
    nodes: dict = {}

    def node(path: str) -> dict:
        n = nodes.get(path)
        if n is None:
            n = nodes[path] = {"path": path, "name": path.rsplit(".", 1)[-1] if path else "<root>",
                               "forward_us": 0.0, "backward_us": 0.0, "self_us": 0.0, "calls": 0,
                               "ops": {}, "children": []}
            if path:
                parent = node(path.rsplit(".", 1)[0] if "." in path else "")
                parent["children"].append(n)
        return n

    node("")
    spans = [e for e in events if e["kind"] == "module"]
    for e in spans:
        n = node(e["module"])
        n["forward_us"] += e["dur_us"]
        n["calls"] += 1
    for e in events:
        if e["kind"] == "backward":
            path = e["module"] or ""
            while True:                    # a backward node counts for its module and every ancestor
                node(path)["backward_us"] += e["dur_us"]
                if not path:
                    break
                path = path.rsplit(".", 1)[0] if "." in path else ""
        elif e["kind"] == "op":
            n = node(e["module"] or "")
            n["self_us"] += e["self_us"]
            row = n["ops"].setdefault(e["name"], {"name": e["name"], "count": 0, "total_us": 0.0,
                                                  "forward_us": 0.0, "backward_us": 0.0})
            row["count"] += 1
            row["total_us"] += e["self_us"]
            row["backward_us" if e["phase"] == "backward" else "forward_us"] += e["self_us"]
    root = nodes[""]
    if not spans:                          # no with_modules: forward time from the ops alone
        def fwd(n):
            n["forward_us"] = sum(o["forward_us"] for o in n["ops"].values()) + sum(fwd(c) for c in n["children"])
            return n["forward_us"]
        fwd(root)

    def finish(n):
        n["ops"] = sorted(({**o, "total_us": round(o["total_us"], 3), "forward_us": round(o["forward_us"], 3),
                            "backward_us": round(o["backward_us"], 3)} for o in n["ops"].values()),
                          key=lambda o: -o["total_us"])
        for k in ("forward_us", "backward_us", "self_us"):
            n[k] = round(n[k], 3)
        n["total_us"] = round(n["forward_us"] + n["backward_us"], 3)
        n["children"].sort(key=lambda c: -(c["forward_us"] + c["backward_us"]))
        for c in n["children"]:
            finish(c)
    finish(root)
    return root


def profile_model(src, title: str = "", max_events: int = MAX_EVENTS) -> dict:
    """The view model of a profile (``tapelab.profiler.profile`` or its ``to_dict()``)."""
    d = src if isinstance(src, dict) else src.to_dict()
    if d.get("schema") == "tapelab.profile-view":
        return d
    raw = d.get("events", [])
    events = [dict(e) for e in _cap(raw, max_events)]
    tracks = _tracks(events)
    kinds: dict = {}
    for e in events:
        kinds.setdefault(e["name"], set()).add(e["kind"])
    averages = [{**r, "kind": sorted(kinds.get(r["name"], {"op"}))[0]} for r in d.get("averages", [])]
    ops = [e for e in events if e["kind"] == "op"]
    top = sorted((e for e in events if e["kind"] == "op" and e.get("bytes")), key=lambda e: -e["bytes"])[:8]
    return {
        **{k: v for k, v in d.items() if k not in ("events", "averages")},
        "schema": "tapelab.profile-view", "title": title,
        "events": events, "averages": averages, "tracks": tracks,
        "module_tree": _module_tree(events),
        "totals": {
            "wall_us": d.get("duration_us", 0.0),
            "forward_us": round(sum(e["self_us"] for e in ops if e["phase"] != "backward"), 3),
            "backward_us": round(sum(e["dur_us"] for e in events if e["kind"] == "backward" and e["parent"] is None
                                     or e["kind"] == "backward" and events[e["parent"]]["kind"] != "backward"), 3),
            "op_self_us": round(sum(e["self_us"] for e in ops), 3),
            "ops": len(ops), "backward_nodes": sum(e["kind"] == "backward" for e in events),
            "ranges": sum(e["kind"] in ("range", "step") for e in events), "events": len(raw),
        },
        "top_alloc": [{"id": e["id"], "name": e["name"], "bytes": e["bytes"], "start_us": e["start_us"],
                       "module": e["module"], "shape": e["shape"]} for e in top],
        "meta": {"events_sent": len(events), "events_total": len(raw), "truncated": len(events) < len(raw)},
    }


def _fmt_us(us: float) -> str:
    return f"{us:.1f} µs" if us < 1e3 else f"{us / 1e3:.2f} ms" if us < 1e6 else f"{us / 1e6:.2f} s"


def _fmt_bytes(b: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(b) < 1024 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return str(b)


def profile_html(model: dict, rows: int = ROWS) -> str:
    """Static HTML (saved notebooks, nbviewer): the totals, the timeline (SVG) and the op table
    folded; strings escaped."""
    esc = html.escape
    t = model["totals"]
    head = (f"<b>{esc(model.get('title') or 'profile')}</b> · wall {_fmt_us(t['wall_us'])} · "
            f"{t['ops']} ops · {t['backward_nodes']} backward nodes · peak memory "
            f"{_fmt_bytes(model.get('peak_bytes') or 0)}")
    body = [[esc(r["name"]), esc(r["kind"]), str(r["count"]), _fmt_us(r["cpu_time_total_us"]),
             _fmt_us(r["self_cpu_time_total_us"])]
            for r in sorted(model["averages"], key=lambda r: -r["self_cpu_time_total_us"])[:rows]]
    return (f"<div class='tapelab-profile-static' style='font-size:12px'><div>{head}</div>"
            + timeline_svg(model.get("events") or [])
            + details(f"{len(model['averages'])} ops by self time", ["name", "kind", "calls", "total", "self"], body,
                      total=len(model["averages"])) + "</div>")


def within_budget(model: dict, budget: int | None = None) -> dict:
    """``model`` if its JSON fits in ``budget`` bytes (``fallback.BUDGET``), else a copy with
    the longest events that fit (and their parents; ``meta`` says how many were left out)."""
    budget = BUDGET if budget is None else budget
    size = len(json.dumps(model, separators=(",", ":")))
    events = model.get("events") or []
    keep, out = len(events), model
    while size > budget and keep > 1:
        keep = max(1, int(keep * min(0.8, budget / size)))
        kept = _cap(events, keep)
        out = {**model, "events": kept, "top_alloc": [],
               "meta": {**model.get("meta", {}), "events_sent": len(kept), "truncated": True,
                        "note": f"saved output: {len(kept)} of {len(events)} events (JSON budget {budget // 1024} KB)"}}
        size = len(json.dumps(out, separators=(",", ":")))
    return out


def _widget_class():
    import anywidget
    import traitlets

    from .views import _ESM

    class ProfileView(anywidget.AnyWidget):
        """A profile: sortable op table, zoomable timeline (forward/backward lanes, nested ranges),
        memory over time with the ops that allocated, and time per module (expandable).

        ``ProfileView(prof)`` with a ``tapelab.profiler.profile`` (or its ``to_dict()``). Clicking
        an op sets ``selected`` (``{id, seq, name, kind, phase}``), calls the ``on_select``
        callbacks and shows the op in every TapeView passed to ``link``.
        """

        _esm = _ESM
        _view = traitlets.Unicode("profile").tag(sync=True)
        profile = traitlets.Dict().tag(sync=True)
        selected = traitlets.Dict().tag(sync=True)

        def __init__(self, prof=None, title: str = "", max_events: int = MAX_EVENTS, **kwargs):
            model = profile_model(prof, title=title, max_events=max_events) if prof is not None else {}
            super().__init__(profile=model, **kwargs)
            self._callbacks: list = []
            self._linked: list = []
            self.max_events = max_events
            self.on_msg(self._on_frontend)

        def show(self, prof, title: str = "") -> None:
            self.profile = profile_model(prof, title=title or self.profile.get("title", ""),
                                         max_events=self.max_events)

        def on_select(self, fn) -> None:
            """Call ``fn(selected)`` whenever an op is clicked in the view."""
            self._callbacks.append(fn)

        def link(self, tape_view) -> None:
            """Show clicked ops in ``tape_view`` (a TapeView of the same run: nodes match by ``seq``)."""
            self._linked.append(tape_view)

        def select(self, event_id: int) -> None:
            e = self.profile["events"][event_id]
            self._selected({k: e.get(k) for k in ("id", "seq", "name", "kind", "phase", "module")})

        def _on_frontend(self, _widget, content, _buffers) -> None:
            if isinstance(content, dict) and content.get("type") == "select":
                self._selected({k: content.get(k) for k in ("id", "seq", "name", "kind", "phase", "module")})

        def _selected(self, sel: dict) -> None:
            self.selected = sel
            seq = sel.get("seq")
            for tv in self._linked:
                if seq is not None and seq >= 0:
                    tv.send({"type": "select", "seq": seq, "phase": sel.get("phase")})
            for fn in tuple(self._callbacks):
                fn(sel)

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            data = bundle[0] if isinstance(bundle, tuple) else bundle
            if data is not None and self.profile.get("events") is not None:
                data[PROFILE_MIME] = within_budget(self.profile)   # saved notebooks render without a kernel
                data["text/html"] = profile_html(self.profile)
            return bundle

    ProfileView.__qualname__ = "ProfileView"
    ProfileView.__module__ = __name__
    return ProfileView


__getattr__ = lazy_widget("ProfileView", _widget_class)
