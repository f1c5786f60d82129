"""Debugger: step through a backward pass in the notebook, one graph node at a time.

The widget wraps a ``tapelab.debug.BackwardStepper``: the backward graph is drawn by the tape
view's renderer (the current node highlighted, visited nodes marked, breakpoints as red dots),
a toolbar has Step, Step over module, Continue and Run to NaN, and a panel shows the current
node's incoming and outgoing gradients (statistics, histogram, heatmap for 2-D), and, at a
NaN/Inf, where it comes from (forward op, module, source line). Clicking a node toggles a
breakpoint on it.

The kernel is idle between clicks: the buttons send custom messages that this object turns into
stepper calls, then the synced ``state`` and ``grads`` traits carry the result back. The same
methods (``step``, ``step_over``, ``cont``, ``run_to_nan``, ``finish``, ``toggle_breakpoint``)
work from Python, with or without a browser.

>>> with tapelab.debug.record():          # module paths and source lines on the nodes
...     loss = model(x)
>>> dbg = Debugger(loss)                 # or: %debug_backward loss
>>> dbg.run_to_nan(); print(dbg.explain())
"""
from __future__ import annotations

import html
import pathlib
import uuid
import warnings

import anywidget
import traitlets

from .tensor_view import tensor_summary
from .fallback import within_budget
from .viewmodel import MIME, SCHEMA, VERSION, to_html

__all__ = ["Debugger", "graph_from_stepper"]

_ESM = pathlib.Path(__file__).parent / "static" / "tapelab.js"

COMMANDS = ("step", "step_over", "continue", "run_to_nan", "finish", "toggle_breakpoint")


def _nid(i) -> str | None:
    return None if i is None else f"b{i}"


def _topo(nodes: list) -> list[int]:
    """A topological order of the stepper's graph (roots first), ids in discovery order break ties."""
    indeg = [0] * len(nodes)
    for n in nodes:
        for j in n["next"]:
            if j is not None:
                indeg[j] += 1
    order, ready = [], [i for i, d in enumerate(indeg) if d == 0]
    ready.sort(reverse=True)
    while ready:
        i = ready.pop()
        order.append(i)
        for j in nodes[i]["next"]:
            if j is not None:
                indeg[j] -= 1
                if indeg[j] == 0:
                    ready.append(j)
                    ready.sort(reverse=True)
    seen = set(order)
    order += [i for i in range(len(nodes)) if i not in seen]  # cycles cannot happen; be safe anyway
    return order


def graph_from_stepper(snapshot: dict, title: str = "backward") -> dict:
    """The view-model graph of a stepper's ``to_dict()`` snapshot: one ``backward`` node per graph
    node (id ``b<node_id>``), ``grad`` edges along ``next``, module groups from module paths."""
    nodes = snapshot["graph"]["nodes"]
    rank = {i: k for k, i in enumerate(_topo(nodes))}
    groups: dict = {}

    def group(path: str):
        if not path:
            return None
        gid = "g:" + path
        if gid not in groups:
            parent = group(path.rsplit(".", 1)[0]) if "." in path else None
            groups[gid] = {"id": gid, "label": path.rsplit(".", 1)[-1], "path": path, "parent": parent,
                           "signature": "", "size": 0}
        return gid

    out_nodes, edges = [], []
    for n in nodes:
        gid = group(n["module"] or "")
        g = gid
        while g is not None:
            groups[g]["size"] += 1
            g = groups[g]["parent"]
        out_nodes.append({
            "id": _nid(n["id"]), "kind": "backward", "label": n["name"], "op": n["name"], "index": rank[n["id"]],
            "seq": None, "forward_seq": None, "group": gid, "module": n["module"] or "", "shape": None,
            "input_shapes": [], "dtype": "", "device": "", "requires_grad": False, "start_ns": 0, "time_ns": 0,
            "value": None, "grad": None, "grad_ops": 0,
            "forward_op": n.get("forward_op"), "tape_seq": n.get("tape_seq"), "node_id": n["id"]})
        for j in n["next"]:
            if j is not None:
                edges.append({"source": _nid(n["id"]), "target": _nid(j), "kind": "grad", "shape": None})
    out_nodes.sort(key=lambda d: d["index"])
    return {"schema": SCHEMA, "version": VERSION, "nodes": out_nodes, "edges": edges,
            "groups": list(groups.values()),
            "meta": {"title": title, "forward": 0, "backward": len(out_nodes), "total": len(out_nodes),
                     "truncated": False}}


def _summary(t, name: str) -> dict:
    if t is None:
        return {"name": name, "none": True}
    with warnings.catch_warnings():   # all-NaN heatmap blocks: numpy's "mean of empty slice"
        warnings.simplefilter("ignore", RuntimeWarning)
        return tensor_summary(t, name=name)


def _grad_views(frame, stepper) -> dict:
    """TensorView summaries of the current node's incoming and outgoing gradients."""
    if frame is None:
        return {"node": None, "incoming": [], "outgoing": []}
    incoming = []
    for i, g in enumerate(frame.grad_outputs):
        incoming.append(_summary(g, f"incoming[{i}]"))
    outgoing = []
    edges = list(frame.node.edges)
    for i, g in enumerate(frame.grad_inputs):
        e = edges[i] if i < len(edges) else None
        target = "" if e is None else e[0].name()
        tid = None if e is None else stepper.node_id(e[0])
        label = f"outgoing[{i}]" + (f" → {target}" if target else "")
        d = _summary(g, label)
        d["target"] = _nid(tid)
        outgoing.append(d)
    return {"node": _nid(frame.node_id), "incoming": incoming, "outgoing": outgoing}


class Debugger(anywidget.AnyWidget):
    """A paused backward pass with buttons; see the module docstring.

    Args:
        target: a loss Tensor (a ``step_backward`` stepper is made for it) or a ``BackwardStepper``.
        retain_graph, gradient: passed to ``step_backward`` for a Tensor.
        title: shown in the toolbar.
    """

    _esm = _ESM
    _view = traitlets.Unicode("debugger").tag(sync=True)
    graph = traitlets.Dict().tag(sync=True)
    state = traitlets.Dict().tag(sync=True)
    grads = traitlets.Dict().tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)

    def __init__(self, target, retain_graph: bool = False, gradient=None, title: str = "", **kwargs):
        from tapelab.debug import BackwardStepper, step_backward
        if isinstance(target, BackwardStepper):
            self.stepper = target
        else:
            self.stepper = step_backward(target, retain_graph=retain_graph, gradient=gradient)
        self._seq = 0
        self._last_error: str | None = None
        self._graph_size = -1
        self._display_id: str | None = None      # set once shown: every step updates the saved output
        self._static: tuple = (None, "")         # (graph, its static HTML)
        super().__init__(title=title or "backward", **kwargs)
        self._refresh("ready")
        self.on_msg(self._on_msg)

    # ------------------------------------------------------------------ commands
    def step(self):
        """Run one node; returns the frame (None at the end)."""
        return self._do("step", self.stepper.step)

    def step_over(self, module: str | None = None):
        """Run until the walk leaves the current node's module (or ``module``)."""
        return self._do("step_over", lambda: self.stepper.step_over(module))

    def cont(self):
        """Continue to the next breakpoint (or the end)."""
        return self._do("continue", lambda: self.stepper.run())

    continue_ = cont

    def run_to_nan(self):
        """Run to the first node that produces a NaN/Inf gradient (a breakpoint stops earlier)."""
        return self._do("run_to_nan", lambda: self.stepper.run(nan=True))

    def finish(self):
        """Run the rest of the walk, ignoring breakpoints."""
        return self._do("finish", self.stepper.finish)

    def toggle_breakpoint(self, node_id: int) -> bool:
        """Add a breakpoint on the node with this stepper id, or remove it; returns whether it is set."""
        for bp in self.stepper.breakpoints:
            if bp.get("node_id") == node_id:
                self.stepper.remove_breakpoint(bp["number"])
                self._refresh("breakpoint removed")
                return False
        self.stepper.add_breakpoint(node_id=node_id)
        self._refresh("breakpoint set")
        return True

    def explain(self) -> str:
        return self.stepper.explain()

    @property
    def current(self):
        return self.stepper.current

    def _do(self, name: str, fn):
        self._last_error = None
        if self.stepper.done:
            self._refresh(name)
            return None
        try:
            out = fn()
        except Exception as e:  # a failing vjp ends the walk; show it instead of killing the comm
            self._last_error = f"{type(e).__name__}: {e}"
            out = None
        self._refresh(name)
        return out

    def _on_msg(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict) or content.get("type") != "cmd":
            return
        cmd = content.get("cmd")
        if cmd == "step":
            self.step()
        elif cmd == "step_over":
            self.step_over()
        elif cmd == "continue":
            self.cont()
        elif cmd == "run_to_nan":
            self.run_to_nan()
        elif cmd == "finish":
            self.finish()
        elif cmd == "toggle_breakpoint":
            node = content.get("node")
            if isinstance(node, str) and node.startswith("b"):
                node = node[1:]
            try:
                self.toggle_breakpoint(int(node))
            except (TypeError, ValueError) as e:
                self._last_error = f"{type(e).__name__}: {e}"
                self._refresh("toggle_breakpoint")

    # ------------------------------------------------------------------ state
    def _refresh(self, command: str) -> None:
        s = self.stepper
        snap = s.to_dict()
        if len(snap["graph"]["nodes"]) != self._graph_size:
            self._graph_size = len(snap["graph"]["nodes"])
            self.graph = graph_from_stepper(snap, title=self.title)
        self._seq += 1
        cur = snap["current"]
        error = self._last_error or snap["error"]
        if error:
            status = f"error: {error}"
        elif s.done:
            status = f"done: {snap['steps']} nodes run"
        elif cur is None:
            status = "paused before the first node"
        else:
            status = f"step {cur['index']}: {cur['name']}" + (f" in {cur['module']}" if cur["module"] else "")
            if snap["stop_reason"] and snap["stop_reason"] != "step":
                status += f" (stopped: {snap['stop_reason']})"
        grads = _grad_views(s.current, s)
        state = {
            "seq": self._seq, "command": command, "done": snap["done"], "steps": snap["steps"],
            "stop_reason": snap["stop_reason"], "error": error, "status": status,
            "current": None if cur is None else {
                "id": _nid(cur["node_id"]), "node_id": cur["node_id"], "index": cur["index"], "name": cur["name"],
                "module": cur["module"], "forward_op": cur["forward_op"], "source": cur["source"],
                "finite": cur["finite"], "max_grad_norm": cur["max_grad_norm"]},
            "visited": [_nid(i) for i in snap["visited"]],
            "next": [_nid(i) for i in snap["next"] if i is not None],
            "breakpoints": [{"number": b["number"], "label": b["label"], "hits": b["hits"],
                             "node": _nid(b.get("node_id"))} for b in snap["breakpoints"]],
            "nonfinite": [_nid(r["node_id"]) for r in snap["history"] if not r["finite"]],
            "provenance": snap["provenance"],
            "explain": s.explain() if cur is not None and not cur["finite"] else "",
        }
        with self.hold_sync():   # one message: the view never sees new grads with an old state
            self.grads = grads
            self.state = state
        if self._display_id is not None:
            from IPython.display import update_display
            update_display(self._bundle(), raw=True, display_id=self._display_id)

    def _ipython_display_(self, **kwargs) -> None:
        """Shown with a display id, so the saved output (what nbconvert and nbviewer show) says
        where the walk stopped after every step, not where it was when the cell ran."""
        from IPython.display import display
        self._display_id = self._display_id or uuid.uuid4().hex
        display(self._bundle(), raw=True, display_id=self._display_id)

    def _bundle(self) -> dict:
        bundle = self._repr_mimebundle_()
        return bundle[0] if isinstance(bundle, tuple) else bundle

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None and self.graph.get("nodes"):
            data[MIME] = within_budget(self.graph)
            st = self.state
            text = f"<p><b>tapelab debugger</b>: {html.escape(st.get('status', ''))}</p>"
            if st.get("explain"):
                text += f"<pre>{html.escape(st['explain'])}</pre>"
            if self._static[0] is not self.graph:     # drawn once per graph, not at every step
                self._static = (self.graph, to_html(self.graph))
            data["text/html"] = text + self._static[1]
        return bundle

    def __repr__(self) -> str:
        return f"<Debugger {self.state.get('status', '')}>"
