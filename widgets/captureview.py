"""CaptureView: a captured ``tapelab.graphs.Graph`` in the notebook, and its view model.

``capture_model(g)`` turns a captured graph into what the renderer draws (schema
``tapelab.capture-view``, version 1)::

    {"schema": "tapelab.capture-view", "version": 1, "title", "device",
     "graph":   a view-model graph (widgets/viewmodel.py): one node per captured step (op, copy,
                guard) with its output shape and input shapes, one leaf per buffer read before
                the program writes it (static inputs, static state, constants); edges follow the
                buffers; groups are the user source lines the steps came from; a step's
                ``module`` is the module path it ran in (``encoder.layers.0.linear1``, as on the
                tape) and ``source`` its user line (``file:line  code``, as on the tape),
     "buffers": [{"name", "role", "shape", "dtype", "nbytes", "reads", "writes", "label"}],
     "stats":   {"steps", "ops", "copies", "guards", "static_inputs", "static_state",
                 "static_outputs", "intermediates", "constants", "pool_nbytes", "pool_graphs",
                 "pool_shared_nbytes", "inplace_writes", "reused_bytes"},
     "timing":  {"replays", "replay_us", "eager_us", "last_replay_us", "total_replay_us", "speedup",
                 "repeat", "source"},
     "static_inputs": the graph's own names of its static inputs (``Graph.summary()``)}

Buffer roles: ``input`` (existed before capture, only read: data, parameters in a forward-only
graph), ``state`` (existed before capture and written in place by every replay: parameters and
optimizer state of a training step), ``output`` (allocated at capture, still held by a live
tensor: the static outputs you read after ``replay()``, gradients), ``intermediate`` (allocated at
capture, held only by the graph's pool), ``constant`` (made during capture outside the
dispatcher, e.g. the backward seed). Every pool buffer is allocated once, at capture, and
reused by every replay: a replay allocates nothing.

Timing is measured in Python only when asked (``repeat=N`` times ``N`` replays, and ``N`` calls
of ``eager`` when it is given: both *run the step*, so a training step trains), or given by the
caller (``replay_us=``, ``eager_us=``). A Graph displayed on its own is never replayed.
"""
from __future__ import annotations

import html
import time

from tapelab import Tensor

from ._lazy import lazy_widget
from .fallback import ROWS, details, graph_svg, within_budget
from .viewmodel import SCHEMA as GRAPH_SCHEMA
from .viewmodel import VERSION as GRAPH_VERSION

__all__ = ["CAPTURE_MIME", "CAPTURE_SCHEMA", "capture_model", "capture_html", "measure", "CaptureView"]

CAPTURE_MIME = "application/vnd.tapelab.capture+json"
CAPTURE_SCHEMA = "tapelab.capture-view"
VERSION = 1
ROLES = ("input", "state", "output", "intermediate", "constant")


def _group_label(where: str) -> str:
    """``file:line (text)`` -> the text; else ``file:line`` shortened to the file's basename."""
    if not where:
        return "program"
    if " (" in where and where.endswith(")"):
        return where[where.index(" (") + 2:-1]
    path, _, line = where.rpartition(":")
    return f"{path.rsplit('/', 1)[-1]}:{line}" if path else where


def _source(where: str) -> str:
    """The capture's ``file:line (text)`` in the tape's ``source`` form, ``file:line  text``."""
    if " (" in where and where.endswith(")"):
        at = where.index(" (")
        return f"{where[:at]}  {where[at + 2:-1]}"
    return where


def _short(name: str) -> str:
    """The engine's generic static-input name (``a static input float32[4] first read at f:3``),
    shortened to ``static float32[4]``; names given by make_graphed_callables stay."""
    if name.startswith("a static input "):
        return "static " + name[len("a static input "):].split(" first read at ")[0]
    return name


def measure(g, eager=None, repeat: int = 10, warmup: int = 1) -> dict:
    """Time ``repeat`` replays of ``g`` (and ``repeat`` calls of ``eager``): microseconds per call.

    Both run the captured work for real (a training step trains ``repeat`` more steps).
    """
    def per_call(fn) -> float:
        for _ in range(warmup):
            fn()
        best = float("inf")
        # the best of 3 rounds: a notebook kernel has background threads (comms, heartbeats)
        n = max(1, repeat // 3) if repeat >= 3 else 1
        rounds = max(1, repeat // n)
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, (time.perf_counter() - t0) / n)
        return best * 1e6
    out = {"replay_us": round(per_call(g.replay), 3), "eager_us": None, "repeat": repeat}
    if eager is not None:
        out["eager_us"] = round(per_call(eager), 3)
    return out


def capture_model(g, title: str = "", timing: dict | None = None, names: dict | None = None,
                  module=None, optimizer=None) -> dict:
    """The view model of a captured graph (see the module docstring).

    Args:
        g: a ``tapelab.graphs.Graph`` (captured; an empty one gives an empty model).
        title: shown above the view.
        timing: ``{"replay_us", "eager_us"}`` (from ``measure`` or your own timing).
        names: ``{name: tensor}`` to label buffers (static inputs, static outputs).
        module: an ``nn.Module`` whose parameter (and gradient) buffers are labelled by name.
        optimizer: an optimizer whose state buffers are labelled (``0.weight.momentum_buffer``).
    """
    captured = bool(getattr(g, "captured", False))
    summary = g.summary()
    label_of: dict[str, str] = {}          # buffer name -> a label given by the caller

    def label(t, text):
        name = g.buffer_name(t) if captured else None
        if name is not None:
            label_of.setdefault(name, text)
    if module is not None:
        for n, p in module.named_parameters():
            label(p, n)
            if p.grad is not None:
                label(p.grad, n + ".grad")
    if optimizer is not None:
        pnames = {id(p): n for n, p in module.named_parameters()} if module is not None else {}
        for i, (p, st) in enumerate(optimizer.state.items()):
            for k, v in (st.items() if isinstance(st, dict) else ()):
                if isinstance(v, Tensor):
                    label(v, f"{pnames.get(id(p), f'param{i}')}.{k}")
    for n, t in (names or {}).items():
        name = g.buffer_name(t) if captured else None
        if name is not None:
            label_of[name] = n

    nodes: list[dict] = []
    edges: list[dict] = []
    groups: dict[str, dict] = {}
    buffers: dict[str, dict] = {}
    raw = list(summary["nodes"])
    alias: dict[str, tuple] = {}          # program name -> (its buffer's entry in g.buffers(), shape, dtype)
    for e in g.buffers():
        for n, a in e.get("aliases", {}).items():
            alias[n] = (e, a["shape"], a["dtype"])
    role_of = {"static_input": "input", "state": "state", "static_output": "intermediate",
               "pool": "intermediate", "constant": "constant"}

    def buf(name: str):
        """(the buffer entry of ``name``'s memory, the shape ``name`` sees): views of one array (a
        transposed weight, a reshaped gradient) are one buffer."""
        hit = alias.get(name)
        if hit is None:
            return None, None
        e, shape, _ = hit
        b = buffers.get(e["name"])
        if b is None:
            b = buffers[e["name"]] = {
                "name": e["name"], "role": role_of[e["kind"]], "shape": list(e["shape"]), "dtype": e["dtype"],
                "nbytes": int(e["bytes"]), "reads": 0, "writes": 0, "label": label_of.get(e["name"], ""),
                "views": [], "_kind": e["kind"], "_static": e.get("static_name") or "", "_root": e["name"]}
        elif name != b["name"] and name not in b["views"]:
            b["views"].append(name)
        return b, list(shape)

    writer: dict[int, str] = {}            # buffer root -> id of the node that last wrote it (views too)
    leaves: dict[int, str] = {}
    inplace = 0
    for i, n in enumerate(raw):
        where = n.get("where", "")
        gid = None
        if where:
            gid = "c:" + where
            if gid not in groups:
                line = where.split(" (", 1)[0].rpartition(":")[2]
                groups[gid] = {"id": gid, "label": _group_label(where), "path": f"line {line}: {_group_label(where)}",
                               "parent": None,
                               "signature": gid, "size": 0, "collapsed": False}
            groups[gid]["size"] += 1
        nid = f"s{i}"
        in_shapes, out_shape, dtype = [], None, ""
        for name in n["inputs"]:
            b, shape = buf(name)
            if b is None:
                continue
            b["reads"] += 1
            in_shapes.append(shape)
            src = writer.get(b["_root"])
            if src is None:
                src = leaves.get(b["_root"])
                if src is None:
                    src = leaves[b["_root"]] = f"b:{b['name']}"
                    nodes.append({"id": src, "kind": "leaf", "label": b["label"] or name, "op": "leaf",
                                  "index": None, "seq": None, "forward_seq": None, "group": None, "module": "",
                                  "shape": b["shape"], "input_shapes": [], "dtype": b["dtype"], "device": str(g.device),
                                  "requires_grad": False, "start_ns": 0, "time_ns": 0, "value": None, "grad": None,
                                  "grad_ops": 0, "buffer": b["name"], "role": b["role"], "step_kind": "buffer"})
            edges.append({"source": src, "target": nid, "kind": "data", "shape": shape})
        writes_static = False
        for name in n["outputs"]:
            b, shape = buf(name)
            if b is None:
                continue
            b["writes"] += 1
            if b["role"] in ("input", "state", "constant") or b["writes"] > 1:
                inplace += 1
                if b["role"] == "input":
                    b["role"] = "state"
                writes_static = writes_static or b["role"] == "state"
            out_shape = out_shape or shape
            dtype = dtype or alias[name][2]
            writer[b["_root"]] = nid
        nodes.append({"id": nid, "kind": "forward", "label": n["op"], "op": n["op"], "index": i, "seq": i,
                      "forward_seq": None, "group": gid, "module": n.get("module", ""), "source": _source(where),
                      "shape": out_shape, "input_shapes": in_shapes, "dtype": dtype, "device": str(g.device),
                      "requires_grad": False, "start_ns": 0, "time_ns": 0, "value": None, "grad": None,
                      "grad_ops": 0, "step_kind": n["kind"], "inputs": list(n["inputs"]),
                      "outputs": list(n["outputs"]), "where": where, "writes_static": writes_static,
                      "static_out": False})

    out_names = set()
    for b in buffers.values():
        if b["_kind"] == "static_output":
            b["role"] = "output"
            out_names.add(b["name"])
        if not b["label"] and b["role"] in ("input", "state"):
            b["label"] = _short(b["_static"])
        del b["_root"], b["_kind"], b["_static"]
    out_names |= {v for b in buffers.values() if b["role"] == "output" for v in b["views"]}
    for nd in nodes:
        if nd["kind"] == "forward" and any(o in out_names for o in nd["outputs"]):
            nd["static_out"] = True
        if nd["kind"] == "leaf":
            b = buffers[nd["buffer"]]
            nd["role"], nd["label"] = b["role"], b["label"] or b["name"]

    by_role = {r: [b for b in buffers.values() if b["role"] == r] for r in ROLES}
    steps = len(raw)
    stats = {
        "steps": steps,
        "ops": sum(n["kind"] == "op" for n in raw),
        "copies": sum(n["kind"] not in ("op", "guard") for n in raw),
        "guards": sum(n["kind"] == "guard" for n in raw),
        "static_inputs": len(by_role["input"]), "static_state": len(by_role["state"]),
        "static_outputs": len(by_role["output"]), "intermediates": len(by_role["intermediate"]),
        "constants": len(by_role["constant"]),
        "pool_nbytes": int(summary["pool_nbytes"]),
        "pool_graphs": int(summary.get("pool_graphs", 0)),
        "pool_shared_nbytes": int(summary.get("pool_shared_nbytes", 0)),
        "inplace_writes": inplace,
        # bytes an eager step allocates afresh that the replay writes into the pool instead
        "reused_bytes": sum(b["nbytes"] for r in ("output", "intermediate") for b in by_role[r]),
    }
    t = dict(timing or {})
    replay_us, eager_us = t.get("replay_us"), t.get("eager_us")
    timing_out = {"replays": int(summary["replays"]), "replay_us": replay_us, "eager_us": eager_us,
                  "last_replay_us": summary.get("last_replay_us"), "total_replay_us": summary.get("total_replay_us"),
                  "speedup": round(eager_us / replay_us, 2) if replay_us and eager_us else None,
                  "repeat": t.get("repeat"), "source": t.get("source", "measured" if replay_us else "")}
    fwd = sum(n["kind"] == "forward" for n in nodes)
    graph = {"schema": GRAPH_SCHEMA, "version": GRAPH_VERSION, "nodes": nodes, "edges": edges,
             "groups": list(groups.values()),
             "meta": {"title": title or "captured graph", "forward": fwd, "backward": 0, "total": len(nodes),
                      "truncated": False}}
    order = {r: k for k, r in enumerate(ROLES)}
    return {"schema": CAPTURE_SCHEMA, "version": VERSION, "title": title, "device": str(g.device),
            "captured": captured, "graph": graph,
            "buffers": sorted(buffers.values(), key=lambda b: (order[b["role"]], -b["nbytes"])),
            "stats": stats, "timing": timing_out, "static_inputs": list(summary["static_inputs"]),
            "source": getattr(g, "source", "")}


def model_from_summary(summary: dict, title: str = "") -> dict:
    """A model from a bare ``capture_done`` payload (a summary without its Graph): the steps, and
    shapes and roles of the buffers the summary lists."""
    full = {"device": "cpu", "nodes": [], "static_inputs": [], "pool_nbytes": 0, "replays": 0, **summary}
    full.pop("graph", None)

    class _G:
        device = full["device"]
        captured = False
        source = ""

        def summary(self):
            return full

        def buffers(self):
            return [{**b, "aliases": {b["name"]: {"shape": b["shape"], "dtype": b["dtype"]}}}
                    for b in full.get("buffers", ())]
    return capture_model(_G(), title=title)


def _fmt_bytes(b) -> str:
    b = float(b or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(b) < 1024 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return str(b)


def _fmt_us(us) -> str:
    if us is None:
        return "–"
    return f"{us:.1f} µs" if us < 1e3 else f"{us / 1e3:.2f} ms" if us < 1e6 else f"{us / 1e6:.2f} s"


def capture_html(model: dict, rows: int = ROWS) -> str:
    """Static HTML (saved notebooks, nbviewer): the numbers, the steps drawn (grouped by source
    line) and the step list folded; strings escaped."""
    esc = html.escape
    s, t = model["stats"], model["timing"]
    head = (f"<b>{esc(model.get('title') or 'captured graph')}</b> · {s['steps']} steps on {esc(model['device'])}"
            f" · pool {_fmt_bytes(s['pool_nbytes'])} · {s['static_inputs'] + s['static_state']} static inputs"
            f" · {s['static_outputs']} static outputs · {t['replays']} replays")
    if t.get("replay_us"):
        head += f" · replay {_fmt_us(t['replay_us'])}"
        if t.get("eager_us"):
            head += f" vs eager {_fmt_us(t['eager_us'])} ({t['speedup']}x)"
    steps = [n for n in model["graph"]["nodes"] if n["kind"] == "forward"]
    body = [[str(n["index"]), esc(n["op"]), esc(str(n["shape"] or "")), esc(n["module"]),
             esc(_group_label(n["where"]) if n["where"] else "")] for n in steps[:rows]]
    return (f"<div class='tapelab-capture-static' style='font-size:12px'><div>{head}</div>"
            + graph_svg(model["graph"])
            + details(f"{len(steps)} steps", ["#", "op", "shape", "module", "line"], body, total=len(steps)) + "</div>")


def _widget_class():
    import anywidget
    import traitlets

    from .views import _ESM

    class CaptureView(anywidget.AnyWidget):
        """A captured graph: its steps drawn as a graph (ops with shapes, grouped by source line,
        static inputs, in-place state and static outputs marked), the memory pool and buffer
        reuse, the replay count and the time per replay next to the eager step's.

        ``CaptureView(g)`` shows a ``tapelab.graphs.Graph``. Timing: ``repeat=N`` measures N
        replays (and N calls of ``eager=`` when given; both run the step for real), or pass
        ``replay_us=``/``eager_us=``. ``names={"x": static_x, "loss": static_loss}`` and
        ``module=model`` (and ``optimizer=opt``) label buffers. ``refresh()`` updates the replay count,
        ``measure(...)`` times again.
        """

        _esm = _ESM
        _view = traitlets.Unicode("capture").tag(sync=True)
        capture = traitlets.Dict().tag(sync=True)

        def __init__(self, g=None, eager=None, repeat: int = 0, replay_us: float | None = None,
                     eager_us: float | None = None, title: str = "", names: dict | None = None,
                     module=None, optimizer=None, **kwargs):
            self._g, self._title, self._names, self._module = g, title, names, module
            self._optimizer = optimizer
            self._timing = None
            if replay_us is not None or eager_us is not None:
                self._timing = {"replay_us": replay_us, "eager_us": eager_us, "source": "given"}
            elif g is not None and repeat:
                self._timing = {**measure(g, eager, repeat), "source": "measured"}
            model = self._model() if g is not None else {}
            super().__init__(capture=model, **kwargs)

        def _model(self) -> dict:
            return capture_model(self._g, title=self._title, timing=self._timing, names=self._names,
                                 module=self._module, optimizer=self._optimizer)

        def refresh(self) -> None:
            """Redraw from the graph (its replay count changes as you replay it)."""
            self.capture = self._model()

        def measure(self, eager=None, repeat: int = 10) -> dict:
            """Time ``repeat`` replays (and eager calls) now, and show the result."""
            self._timing = {**measure(self._g, eager, repeat), "source": "measured"}
            self.refresh()
            return self.capture["timing"]

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            data = bundle[0] if isinstance(bundle, tuple) else bundle
            if data is not None and self.capture.get("graph") is not None:
                data[CAPTURE_MIME] = {**self.capture, "graph": within_budget(self.capture["graph"])}
                data["text/html"] = capture_html(self.capture)
            return bundle

    CaptureView.__qualname__ = "CaptureView"
    CaptureView.__module__ = __name__
    return CaptureView


__getattr__ = lazy_widget("CaptureView", _widget_class)
