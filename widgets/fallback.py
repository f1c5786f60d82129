"""What a saved notebook shows without a kernel or the labextension (nbconvert, nbviewer,
GitHub): an SVG of the collapsed graph, tables folded into ``<details>`` and a size budget
for the raw graph JSON each output carries.

The picture is drawn by Graphviz's ``dot`` when the binary is installed (the ``graphviz``
Debian package), and otherwise by a small layered layout here, so a saved output always has
one. "Collapsed" is what the views start with: a module group is one box (the largest groups
are opened while few boxes are drawn), runs of loose ops become one box past ``MAX_BOXES``.

>>> html = graph_svg(graph_from_tape(t))       # '<svg ...'
>>> data[MIME] = within_budget(graph)           # at most BUDGET bytes of JSON
"""
from __future__ import annotations

import html
import json
import os
import shutil
import subprocess

__all__ = ["BUDGET", "ROWS", "MAX_BOXES", "collapse", "graph_svg", "details", "within_budget", "timeline_svg",
           "has_dot", "dot_quote", "fmt_shape"]

BUDGET = int(os.environ.get("TAPELAB_OUTPUT_BUDGET", 256 * 1024))   # bytes of graph JSON per output
ROWS = 50            # rows of a saved table
MAX_BOXES = 30       # boxes of a saved picture
_DOT_TIMEOUT_S = 20

_FILL = {"forward": "#dbeafe", "backward": "#fed7aa", "leaf": "#e5e7eb", "group": "#ede9fe",
         "placeholder": "#cfe8fc", "output": "#cfe8fc"}
# GraphView.diff's colours (added green, removed red, changed amber), kept in the saved picture
_DIFF = {"added": "#bbf7d0", "removed": "#fecaca", "changed": "#fde68a"}


def dot_quote(s) -> str:
    """A DOT double-quoted string: backslashes, quotes and line breaks escaped."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "")
    return '"' + s + '"'


def fmt_shape(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ")" if shape is not None else ""


def has_dot() -> bool:
    """Whether Graphviz's ``dot`` binary is on PATH."""
    return shutil.which("dot") is not None


# ------------------------------------------------------------------ the collapsed graph
def _open_groups(graph: dict, max_boxes: int) -> set:
    """Groups drawn open: level by level from the top, every group of a level is opened while
    the boxes stay under ``max_boxes`` (a model wrapped in one root module opens to its layers;
    sibling layers open together or not at all)."""
    groups = {g["id"]: g for g in graph.get("groups", [])}
    children: dict = {}
    for g in groups.values():
        children.setdefault(g.get("parent"), []).append(g["id"])
    direct: dict = {}
    for n in graph["nodes"]:
        direct[n.get("group")] = direct.get(n.get("group"), 0) + 1
    opened: set = set()
    boxes = direct.get(None, 0) + len(children.get(None, ()))
    level = [g for g in children.get(None, ())]
    while True:
        frontier = [g for g in level if children.get(g) and not groups[g].get("collapsed")]
        extra = sum(len(children[g]) + direct.get(g, 0) - 1 for g in frontier)
        if not frontier or boxes + extra > max_boxes:
            return opened
        opened.update(frontier)
        boxes += extra
        level = [c for g in frontier for c in children[g]]


def collapse(graph: dict, max_boxes: int = MAX_BOXES) -> tuple[list, list]:
    """The boxes and edges of the collapsed graph.

    Returns ``(boxes, edges)``: a box is ``{"id", "label", "kind", "size", "diff"}`` (``kind``
    ``group`` for a closed group), an edge ``(source, target, kind)``; edges inside a box are
    dropped, parallel ones merged.
    """
    groups = {g["id"]: g for g in graph.get("groups", [])}
    opened = _open_groups(graph, max_boxes)

    def unit(n):
        gid, top = n.get("group"), None
        while gid is not None and gid in groups and gid not in opened:
            top = gid
            gid = groups[gid].get("parent")
        return top

    boxes: dict = {}
    box_of: dict = {}
    loose = [n for n in graph["nodes"] if unit(n) is None]
    tops = {unit(n) for n in graph["nodes"]} - {None}
    run = max(1, -(-len(loose) // max(1, max_boxes - len(tops))))   # loose ops per box
    k = 0
    for n in graph["nodes"]:
        top = unit(n)
        if top is not None:
            b = boxes.get(top)
            if b is None:
                g = groups[top]
                b = boxes[top] = {"id": top, "label": g.get("path") or g.get("label") or top, "kind": "group",
                                  "size": 0, "diff": None}
            b["size"] += 1
            box_of[n["id"]] = top
        elif run == 1:
            boxes[n["id"]] = {"id": n["id"], "label": n.get("label") or n.get("op", ""), "kind": n.get("kind", ""),
                              "size": 1, "diff": n.get("diff"), "shape": n.get("shape")}
            box_of[n["id"]] = n["id"]
        else:                          # many loose ops: runs of them, named by their first op's source line
            bid = f"run:{k // run}"
            b = boxes.get(bid)
            if b is None:
                b = boxes[bid] = {"id": bid, "label": n.get("source") or f"ops {k}–{k + run - 1}",
                                  "kind": "group", "size": 0, "diff": None}
            b["size"] += 1
            box_of[n["id"]] = bid
            k += 1
    edges: dict = {}
    for e in graph["edges"]:
        s, t = box_of.get(e["source"]), box_of.get(e["target"])
        if s is not None and t is not None and s != t:
            edges.setdefault((s, t), e.get("kind", "data"))
    return list(boxes.values()), [(s, t, k) for (s, t), k in edges.items()]


def _text(b: dict) -> str:
    if b["kind"] == "group":
        return f"{b['label']} · {b['size']} ops"
    shape = b.get("shape")
    return b["label"] + (" (" + ", ".join(map(str, shape)) + ")" if shape else "")


def _fill(b: dict) -> str:
    return _DIFF.get(b.get("diff") or "", _FILL.get(b["kind"], "#dbeafe"))


# ------------------------------------------------------------------ drawing
def graph_svg(graph: dict, max_boxes: int = MAX_BOXES, title: str = "") -> str:
    """An SVG of the collapsed graph (``dot`` if installed, else the layered layout here);
    every string is escaped. An empty string for a graph without nodes."""
    if not graph.get("nodes"):
        return ""
    boxes, edges = collapse(graph, max_boxes)
    svg = _dot_svg(boxes, edges) if has_dot() else None
    svg = svg or _layered_svg(boxes, edges)
    head = f"<div><b>{html.escape(title)}</b></div>" if title else ""
    return f"<div class='tapelab-svg' style='overflow:auto;max-height:640px'>{head}{svg}</div>"


def _dot_source(boxes: list, edges: list) -> str:
    lines = ["digraph g {", "  rankdir=TB; nodesep=0.25; ranksep=0.35;",
             '  node [fontname="Helvetica", fontsize=10, height=0.3, style="rounded,filled", shape=box];']
    for b in boxes:
        shape = "" if b["kind"] != "backward" else ", shape=ellipse"
        width = ", penwidth=1.5" if b["kind"] == "group" else ""
        lines.append(f"  {dot_quote(b['id'])} [label={dot_quote(_text(b))}, fillcolor=\"{_fill(b)}\"{shape}{width}];")
    for s, t, k in edges:
        attrs = ' [color="#ea580c", style=dashed]' if k == "grad" else ""
        lines.append(f"  {dot_quote(s)} -> {dot_quote(t)}{attrs};")
    lines.append("}")
    return "\n".join(lines)


def _dot_svg(boxes: list, edges: list) -> str | None:
    try:
        out = subprocess.run(["dot", "-Tsvg"], input=_dot_source(boxes, edges).encode(), capture_output=True,
                             timeout=_DOT_TIMEOUT_S, check=True).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return None
    i = out.find("<svg")
    return None if i < 0 else out[i:].replace("<svg ", "<svg style='max-width:100%;height:auto' ", 1)


_BOX_H, _GAP_X, _GAP_Y, _CHAR_W = 24, 16, 36, 6.2


def _layered_svg(boxes: list, edges: list) -> str:
    """Longest-path ranks over edges that run forward in recording order (so gradient edges,
    which run back, never make a cycle), boxes left to right in each rank."""
    order = {b["id"]: i for i, b in enumerate(boxes)}
    rank = dict.fromkeys(order, 0)
    incoming: dict = {}
    for s, t, _ in edges:
        if order[s] < order[t]:
            incoming.setdefault(t, []).append(s)
    for b in boxes:                                    # boxes come in recording order: a topological one
        for s in incoming.get(b["id"], ()):
            rank[b["id"]] = max(rank[b["id"]], rank[s] + 1)
    pos: dict = {}
    x_at: dict = {}
    for b in boxes:
        r = rank[b["id"]]
        w = max(40.0, len(_text(b)) * _CHAR_W + 16)
        x = x_at.get(r, 8.0)
        pos[b["id"]] = (x, 8 + r * (_BOX_H + _GAP_Y), w)
        x_at[r] = x + w + _GAP_X
    width = max(x_at.values()) + 8
    height = 8 + (max(rank.values()) + 1) * (_BOX_H + _GAP_Y)
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
             f"viewBox='0 0 {width:.0f} {height:.0f}' style='max-width:100%;height:auto' font-family='Helvetica' "
             "font-size='10'><defs><marker id='a' viewBox='0 0 8 8' refX='8' refY='4' markerWidth='6' "
             "markerHeight='6' orient='auto'><path d='M0,0 L8,4 L0,8 z' fill='#64748b'/></marker></defs>"]
    for s, t, k in edges:
        xs, ys, ws = pos[s]
        xt, yt, wt = pos[t]
        style = "stroke='#ea580c' stroke-dasharray='4 3'" if k == "grad" else "stroke='#64748b'"
        y1, y2 = (ys + _BOX_H, yt) if ys < yt else (ys, yt + _BOX_H)
        parts.append(f"<line x1='{xs + ws / 2:.0f}' y1='{y1:.0f}' x2='{xt + wt / 2:.0f}' y2='{y2:.0f}' {style} "
                     "marker-end='url(#a)'/>")
    for b in boxes:
        x, y, w = pos[b["id"]]
        rx = 12 if b["kind"] == "backward" else 4
        parts.append(f"<g><title>{html.escape(b['id'])}</title><rect x='{x:.0f}' y='{y:.0f}' width='{w:.0f}' "
                     f"height='{_BOX_H}' rx='{rx}' fill='{_fill(b)}' stroke='#475569'/>"
                     f"<text x='{x + w / 2:.0f}' y='{y + 16:.0f}' text-anchor='middle'>{html.escape(_text(b))}</text></g>")
    parts.append("</svg>")
    return "".join(parts)


def timeline_svg(events: list, width: int = 900, max_events: int = 2000) -> str:
    """A profile's timeline: one row per track, a bar per event at its start and duration (the
    longest ``max_events``), op names on bars wide enough to hold them."""
    if not events:
        return ""
    shown = sorted(events, key=lambda e: -e.get("dur_us", 0))[:max_events]
    t0 = min(e["start_us"] for e in shown)
    t1 = max(e["start_us"] + e["dur_us"] for e in shown)
    span = max(t1 - t0, 1e-9)
    rows: dict = {}
    for e in shown:
        key = (e.get("track", 0), e.get("depth", 0))
        rows.setdefault(key, []).append(e)
    keys = sorted(rows)
    row_h = 16
    height = len(keys) * row_h + 20
    color = {"op": "#60a5fa", "backward": "#fb923c", "module": "#a78bfa", "range": "#94a3b8", "step": "#94a3b8"}
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
             "style='max-width:100%;height:auto' font-family='Helvetica' font-size='9'>"]
    for i, key in enumerate(keys):
        y = i * row_h
        for e in rows[key]:
            x = (e["start_us"] - t0) / span * width
            w = max(e["dur_us"] / span * width, 0.5)
            name = html.escape(str(e.get("name", "")))
            parts.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{row_h - 2}' "
                         f"fill='{color.get(e.get('kind'), '#60a5fa')}'><title>{name} {e['dur_us']:.1f} µs</title></rect>")
            if w > len(name) * 5.5 + 4:
                parts.append(f"<text x='{x + 2:.1f}' y='{y + 11}'>{name}</text>")
    parts.append(f"<text x='0' y='{height - 4}'>0</text><text x='{width}' y='{height - 4}' "
                 f"text-anchor='end'>{span / 1e3:.2f} ms</text></svg>")
    return f"<div class='tapelab-svg' style='overflow:auto;max-height:640px'>{''.join(parts)}</div>"


# ------------------------------------------------------------------ tables and budget
def details(summary: str, header: list, rows: list, total: int | None = None) -> str:
    """A table folded into ``<details>``: the first ``ROWS`` of ``rows`` (cells are HTML already
    escaped by the caller), and how many more there were."""
    total = len(rows) if total is None else total
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows[:ROWS])
    more = total - min(len(rows), ROWS)
    tail = f"<p>… {more} more rows</p>" if more > 0 else ""
    return f"<details><summary>{summary}</summary><table><tr>{head}</tr>{body}</table>{tail}</details>"


def within_budget(graph: dict, budget: int | None = None) -> dict:
    """``graph`` if its JSON fits in ``budget`` bytes (``BUDGET`` by default), else a copy with
    the first nodes that fit (and their edges; groups kept) and ``meta.note`` saying so."""
    budget = BUDGET if budget is None else budget
    size = len(json.dumps(graph, separators=(",", ":")))
    if size <= budget:
        return graph
    nodes = graph["nodes"]
    keep = max(1, int(len(nodes) * budget / size * 0.9))
    while True:
        ids = {n["id"] for n in nodes[:keep]}
        out = {**graph, "nodes": nodes[:keep],
               "edges": [e for e in graph["edges"] if e["source"] in ids and e["target"] in ids],
               "meta": {**graph.get("meta", {}), "truncated": True,
                        "note": f"saved output: {keep} of {len(nodes)} nodes (JSON budget {budget // 1024} KB)"}}
        if keep == 1 or len(json.dumps(out, separators=(",", ":"))) <= budget:
            return out
        keep = max(1, int(keep * 0.8))
