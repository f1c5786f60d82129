"""The view model: one versioned JSON schema for graphs, built from engine objects.

Every view (the TapeView widget, the JupyterLab side panel, the mime renderer, DOT export)
reads this schema and nothing of the engine. A graph is::

    {"schema": "tapelab.graph", "version": 1,
     "nodes":  [{"id", "kind", "label", "op", "index", "seq", "forward_seq", "group", "module",
                 "shape", "input_shapes", "dtype", "device", "requires_grad",
                 "start_ns", "time_ns", "value", "grad", "grad_ops", "source", "param", "params"}],
     "edges":  [{"source", "target", "kind", "shape"}],
     "groups": [{"id", "label", "path", "parent", "signature", "size", "collapsed"}],
     "meta":   {"title", "forward", "backward", "total", "truncated", "steps", "folded"}}

``kind`` of a node is ``forward`` (an op), ``backward`` (a node run by the backward walk) or
``leaf`` (a tensor no recorded op produced: an input or a parameter). Edges are ``data``
(tensor flow, forward) or ``grad`` (gradient flow, backward). Groups are the module hierarchy
(``encoder.layers.0`` is a child of ``encoder.layers``); ``signature`` is equal for groups that
hold the same ops in the same order, which is how repeated blocks are folded. An optimizer step
runs in the engine's scope ``optimizer.step (AdamW)``: one group of that path and label,
``collapsed: true``. Other ops outside any
module that need no gradient (zero_grad, data movement) form a group per run from one source
line, labelled by that line (``g:~<k>``, path "", ``collapsed: true``: a hint to start
collapsed); ``source`` of a node is the user's line that ran it (``file:line  code``). A leaf that
is a parameter of a module called during the recording has ``param``, its qualified name
(``encoder.layers.0.linear1.weight``, as ``named_parameters`` gives it), and an op that reads
parameters lists them in ``params`` (both absent otherwise; named when the view is built, from
``tapelab.nn.modules.module.parameter_names``, never while recording). Strings are data:
views escape them (``html.escape`` here, ``textContent`` in the browser, ``dot_quote`` for DOT).

>>> with tapelab.tape() as t:
...     y = (x * w).sum()
>>> g = graph_from_tape(t)
>>> [n["op"] for n in g["nodes"] if n["kind"] == "forward"]
['mul', 'sum']
"""
from __future__ import annotations

import hashlib
import html

from tapelab.nn.modules.module import parameter_names
from tapelab.tape import tensor_id

from .fallback import ROWS, details, dot_quote, fmt_shape, graph_svg

__all__ = ["SCHEMA", "VERSION", "GraphBuilder", "graph_from_tape", "graph_from_grad_fn", "to_dot",
           "dot_quote", "to_html", "MIME"]

SCHEMA = "tapelab.graph"
VERSION = 1
MIME = "application/vnd.tapelab.graph+json"
# Scope names the engine records as an op's ``module`` that are not module paths: each is one
# group (not split at its dots), collapsed to start with ("optimizer.step (AdamW)")
SCOPE_PREFIXES = ("optimizer.",)


_INT_SHAPES: dict = {}   # shape -> the same shape as a tuple of Python ints


def _shape(s):
    if s is None:
        return None
    t = _INT_SHAPES.get(s)
    if t is None:
        if len(_INT_SHAPES) > 4096:
            _INT_SHAPES.clear()
        t = _INT_SHAPES[s] = tuple([int(d) for d in s])
    return list(t)


class GraphBuilder:
    """Turns tape records into view-model nodes, edges and groups, incrementally.

    ``add(record)`` takes one ``tapelab.tape.TapeNode`` and returns nothing; ``take()`` returns
    (and forgets) what was added since the last call as a delta dict with ``nodes``, ``edges``,
    ``groups``, ``updates`` (changes to earlier nodes, e.g. a gradient summary arriving); ``graph()``
    returns everything added so far. Ops dispatched by a vjp (``phase == "backward"``) are not
    nodes by default: they are counted on the backward node they belong to (``grad_ops``).

    Repeated training steps fold (``fold_steps``): a step starts at the first op that builds a
    graph, and again at the first one after each backward pass. A step whose records repeat,
    op for op (same op, module, shapes), those of the last step shown adds no nodes: it is
    counted (``meta.steps``, ``meta.folded``), and its value and gradient summaries replace that
    step's, so the graph shows the latest values. A step that differs (the first optimizer step,
    which creates state, or a new batch size) is added as it is, and the next steps may repeat it.
    Records of a step in progress wait in a buffer until the step is decided (at the next
    step's start, or ``close()``).

    Args:
        max_nodes: stop adding nodes past this many (``meta.truncated`` tells; counts go on).
        grad_ops: also show the ops a vjp dispatches, as forward-kind nodes inside the backward pass.
        fold_steps: fold repeated steps (above).
    """

    def __init__(self, title: str = "", max_nodes: int | None = None, grad_ops: bool = False,
                 fold_steps: bool = True):
        self.title = title
        self.fold_steps = fold_steps
        self.steps = self.folded = 0
        self.streak = 0                          # steps folded in a row, up to now
        self._first: list = []                   # (key, node id) of the step the next ones may repeat
        self._shown: list = []                   # (key, node id) of the current step's records added as is
        self._buffer: list = []                  # records of the current step, matching the first so far
        self._diverged = False                   # the current step differs from the first: added as is
        self._after_backward = False
        self.aliases: dict[int, str] = {}        # record index of a folded step -> the first step's node id
        self.max_nodes = max_nodes
        self.grad_ops = grad_ops
        self.nodes: list[dict] = []
        self._by_id: dict[str, dict] = {}        # node id -> node
        self.edges: list[dict] = []
        self.groups: dict[str, dict] = {}
        self._producer: dict[int, str] = {}      # tensor uid -> node id that produced it
        self._fwd: dict[int, dict] = {}          # forward seq -> node
        self._fwd_inputs: dict[int, tuple] = {}  # forward seq -> input tensor uids
        self._bwd: dict[int, str] = {}           # forward seq -> backward node id
        self._leaves: dict[int, str] = {}        # tensor uid -> leaf node id
        self._pending_grad_ops: dict[int, int] = {}
        self._hashers: dict[str, object] = {}
        self._dirty: set[str] = set()
        self._tokens: dict[str, list] = {}       # group id -> tokens not hashed yet
        self._new_group_ids: set[str] = set()
        self._sent = [0, 0]                      # nodes, edges already taken
        self._named = [0, 0]                     # nodes, edges whose parameters are named
        self._params: dict[str, str] = {}        # leaf node id -> its parameter's qualified name
        self._new_groups: list[dict] = []
        self._updates: dict[str, dict] = {}
        self._records: dict[str, object] = {}    # forward node id -> its tape record (grad summary)
        self._grad_to_leaf: dict[int, list] = {}
        self._grad_waiting: dict[str, list] = {}
        self.forward = self.backward = self.total = 0
        self._runs = 0
        self._run_source: dict[str, str] = {}   # no-grad run group id -> the source line it stands for
        self._in_backward = False                # a backward record came, no graph-building op since
        self._pass_group: str | None = None      # the no-grad group of the current backward pass
        self.truncated = False

    # ------------------------------------------------------------------ building
    def _group(self, path: str) -> str | None:
        if not path:
            return None
        gid = "g:" + path
        if gid not in self.groups:
            scope = path.startswith(SCOPE_PREFIXES)   # a named scope (optimizer.step (AdamW)): one group
            parent, _, label = ("", "", path) if scope else path.rpartition(".")
            g = {"id": gid, "label": label, "path": path,
                 "parent": self._group(parent) if parent else None, "signature": "", "size": 0,
                 "collapsed": scope}
            self.groups[gid] = g
            self._new_groups.append(g)
            self._new_group_ids.add(gid)
            self._hashers[gid] = hashlib.blake2b(digest_size=6)
        return gid

    def _note_group(self, gid: str | None, token: str) -> None:
        # a group's signature hashes its ops in order, with child paths made relative, so that
        # layers.0 and layers.1 of a stack compare equal; digests are taken lazily (take/graph)
        while gid is not None:
            g = self.groups[gid]
            g["size"] += 1
            self._tokens.setdefault(gid, []).append(token)
            self._dirty.add(gid)
            token = g["label"] + "/" + token
            gid = g["parent"]

    def _finish_groups(self) -> None:
        for gid, toks in self._tokens.items():   # hashed in one update: the same digest
            self._hashers[gid].update(("|".join(toks) + "|").encode())
        self._tokens.clear()
        for gid in self._dirty:
            g = self.groups[gid]
            g["signature"] = self._hashers[gid].hexdigest()
            if gid not in self._new_group_ids:
                self._updates.setdefault(gid, {"id": gid}).update(signature=g["signature"], size=g["size"])
        self._dirty.clear()

    def _full(self) -> bool:
        return self.max_nodes is not None and len(self.nodes) >= self.max_nodes

    def _node(self, node: dict) -> dict | None:
        self.total += 1
        if self._full():
            self.truncated = True
            return None
        self.nodes.append(node)
        self._by_id[node["id"]] = node
        if node["group"] is not None:
            self._note_group(node["group"], node["kind"][0] + ":" + node["op"])
        return node

    def _leaf(self, uid: int, shape, group: str | None) -> str | None:
        lid = self._leaves.get(uid)
        if lid is None:
            lid = f"l{uid}"
            n = self._node({"id": lid, "kind": "leaf", "label": "x".join(map(str, shape)) if shape else "scalar",
                            "op": "leaf", "index": None, "seq": None, "forward_seq": None, "group": group,
                            "module": self.groups[group]["path"] if group else "", "shape": _shape(shape),
                            "input_shapes": [], "dtype": "", "device": "", "requires_grad": False,
                            "start_ns": 0, "time_ns": 0, "value": None, "grad": None, "grad_ops": 0,
                            "source": ""})
            if n is None:
                return None
            self._leaves[uid] = lid
        return lid

    def add(self, rec) -> None:
        """Add one tape record (a ``TapeNode``)."""
        if not self.fold_steps:
            self._add(rec)
            return
        if rec.kind == "backward":
            self._after_backward = True
        elif rec.requires_grad and rec.phase == "forward" and (self._after_backward or not self.steps):
            self._end_step()                                       # a step starts here
        if self.steps <= 1 or self._diverged:                      # before and in the first step: as is
            self._add_step_record(rec)
        elif len(self._buffer) < len(self._first) and self._first[len(self._buffer)][0] == _step_key(rec):
            self._buffer.append(rec)
        else:                                                      # differs: this step is added as it is
            self._diverged = True
            for r in self._buffer:
                self._add_step_record(r)
            self._buffer = []
            self._add_step_record(rec)

    def _add_step_record(self, rec) -> None:
        self._add(rec)
        if self.steps:
            self._shown.append((_step_key(rec), f"n{rec.index}"))

    def _end_step(self, last: bool = False) -> None:
        """The current step is complete: fold it if it repeated the first step whole (the last one:
        up to where the recording ended, if it ran its backward pass)."""
        self._after_backward = False
        buf = self._buffer
        if buf and (len(buf) == len(self._first) or last and any(r.kind == "backward" for r in buf)):
            self.folded += 1
            self.streak += 1
            for rec, (_, nid) in zip(buf, self._first):
                if rec.kind == "backward":
                    self.backward += 1
                elif rec.phase == "forward":
                    self.forward += 1
                if nid in self._by_id:
                    self.aliases[rec.index] = nid
                    for key in ("value", "grad"):
                        v = getattr(rec, key, None)
                        if v is not None:
                            self._set(nid, key, v)
        else:
            for r in buf:
                self._add_step_record(r)
            if self._shown:                  # a step added as it is: the next ones may repeat it
                self._first = self._shown
                self.streak = 0
        self._buffer, self._shown, self._diverged = [], [], False
        if not last:
            self.steps += 1

    def count_step(self, forward: int, backward: int) -> None:
        """A step its recorder did not record (a steady loop between two deltas): counted as folded."""
        self.steps += 1
        self.folded += 1
        self.forward += forward
        self.backward += backward

    def close(self) -> None:
        """The recording ended: decide the step in progress (fold it or add it)."""
        if self._buffer:
            self._end_step(last=True)

    def _add(self, rec) -> None:
        if rec.kind == "forward" and rec.phase == "backward" and not self.grad_ops:
            if rec.forward_seq is not None:
                bid = self._bwd.get(rec.forward_seq)
                self._pending_grad_ops[rec.forward_seq] = self._pending_grad_ops.get(rec.forward_seq, 0) + 1
                if bid is not None:
                    self._set(bid, "grad_ops", self._pending_grad_ops[rec.forward_seq])
            return
        if rec.kind == "forward":
            if rec.module or rec.requires_grad:
                self._in_backward, self._pass_group = False, None
            self._add_forward(rec)
        else:
            self._in_backward = True
            self._add_backward(rec)

    def _no_grad_run(self, source: str = "") -> str:
        """Ops outside any module that need no gradient (zero_grad, data movement, metrics) are
        grouped per contiguous run from one source line, named by that line and collapsed by
        default: they are not the model's graph."""
        if self._pass_group is not None and not source:   # one group for the engine's in a backward pass
            return self._pass_group
        last = self.nodes[-1] if self.nodes else None
        if (last is not None and last["group"] is not None and last["group"].startswith("g:~")
                and self._run_source.get(last["group"]) == source):
            return last["group"]
        self._runs += 1
        gid = f"g:~{self._runs}"
        self._run_source[gid] = source
        label = source or "no-grad ops"
        if self._in_backward and not source:
            # the engine's gradient accumulation (and anything else run between backward nodes
            # or after them, before the next forward op): one group for the pass
            label = "no-grad ops in backward"
            self._pass_group = gid
        g = {"id": gid, "label": label, "path": "", "parent": None, "signature": "", "size": 0,
             "collapsed": True}
        self.groups[gid] = g
        self._new_groups.append(g)
        self._new_group_ids.add(gid)
        self._hashers[gid] = hashlib.blake2b(digest_size=6)
        return gid

    def count(self, kind: str) -> None:
        """Count a record past the cap, where only counts go on (and no group is made that no
        node would be in)."""
        if kind == "forward":
            self.forward += 1
        else:
            self.backward += 1
        self.total += 1
        self.truncated = True

    def _add_forward(self, rec) -> None:
        if self._full():
            self.count("forward")
            return
        self.forward += 1
        source = getattr(rec, "source", "")
        if not rec.module and not rec.requires_grad and rec.phase == "forward":
            gid = self._no_grad_run(source)
        else:
            gid = self._group(rec.module)
        nid = f"n{rec.index}"
        node = self._node({
            "id": nid, "kind": "forward", "label": rec.op, "op": rec.op, "index": rec.index,
            "seq": rec.seq, "forward_seq": rec.forward_seq, "group": gid, "module": rec.module,
            "shape": _shape(rec.shape), "input_shapes": [_shape(s) for s in rec.input_shapes],
            "dtype": rec.dtype, "device": rec.device, "requires_grad": bool(rec.requires_grad),
            "start_ns": int(rec.start_ns), "time_ns": int(rec.duration_ns), "value": rec.value,
            "grad": rec.grad, "grad_ops": 0, "source": source})
        if node is None:
            return
        self._records[nid] = rec    # (its value and grad summaries may be filled in later)
        if rec.seq is not None:
            self._fwd[rec.seq] = node
            self._fwd_inputs[rec.seq] = rec.inputs
        for uid, shape in zip(rec.inputs, rec.input_shapes):
            if uid is None:
                continue
            src = self._producer.get(uid)
            if src is None:
                src = self._leaf(uid, shape, gid)
            if src is not None:
                self.edges.append({"source": src, "target": nid, "kind": "data", "shape": _shape(shape)})
        if rec.output is not None:
            self._producer[rec.output] = nid

    def _add_backward(self, rec) -> None:
        if self._full():
            self.count("backward")
            return
        self.backward += 1
        fwd = self._fwd.get(rec.forward_seq) if rec.forward_seq is not None else None
        gid = fwd["group"] if fwd is not None else None
        leaf = None
        if rec.op == "AccumulateGrad":          # link the sink to its leaf through the node's variable
            var = getattr(rec.node, "variable", None)
            if var is not None:
                leaf = self._leaves.get(tensor_id(var))
                if leaf is not None:
                    gid = self._by_id[leaf]["group"]
        nid = f"n{rec.index}"
        node = self._node({
            "id": nid, "kind": "backward", "label": rec.op, "op": rec.op, "index": rec.index,
            "seq": None, "forward_seq": rec.forward_seq, "group": gid,
            "module": self.groups[gid]["path"] if gid else "",
            "shape": _shape(rec.shape), "input_shapes": [_shape(s) for s in rec.input_shapes],
            "dtype": rec.dtype, "device": rec.device, "requires_grad": False,
            "start_ns": int(rec.start_ns), "time_ns": int(rec.duration_ns), "value": None,
            "grad": rec.grad, "grad_ops": self._pending_grad_ops.get(rec.forward_seq, 0),
            "source": fwd.get("source", "") if fwd is not None else ""})
        if node is None:
            return
        if fwd is not None:
            self._bwd[rec.forward_seq] = nid
            # gradient flows from this node to the backward nodes of the producers of its inputs;
            # the walk runs consumers first, so the edge is drawn when the producer's step arrives
            for uid in self._fwd_inputs.get(rec.forward_seq, ()):
                if uid is not None and uid in self._leaves:
                    self._grad_to_leaf.setdefault(uid, []).append(nid)
            # earlier backward nodes whose forward op consumed this op's output point here
            for src in self._grad_waiting.pop(fwd["id"], ()):
                self.edges.append({"source": src, "target": nid, "kind": "grad", "shape": _shape(rec.shape)})
            for uid in self._fwd_inputs.get(rec.forward_seq, ()):
                prod = self._producer.get(uid)
                if prod is not None and prod.startswith("n"):
                    self._grad_waiting.setdefault(prod, []).append(nid)
            # the forward node learns its gradient summary once its backward step ran
            fgrad = getattr(self._record_for(fwd), "grad", None)
            if fgrad is not None:
                self._set(fwd["id"], "grad", fgrad)
        if leaf is not None:
            uid = int(leaf[1:])
            for src in self._grad_to_leaf.pop(uid, ()):
                self.edges.append({"source": src, "target": nid, "kind": "grad", "shape": _shape(rec.shape)})
            self.edges.append({"source": nid, "target": leaf, "kind": "grad", "shape": _shape(rec.shape)})

    def _record_for(self, fwd):
        return self._records.get(fwd["id"])

    def summary_arrived(self, rec, attr: str, value) -> None:
        """A summary (``attr``: ``"value"`` or ``"grad"``) of a record added earlier was computed
        (a streaming recorder computes them in batches): show it on the record's node, or on
        the node a folded step's record stands for."""
        alias = self.aliases.get(rec.index)
        if alias is not None:                        # a folded step: the first step's node shows it
            if value is not None:
                self._set(alias, attr, value)
            return
        nid = "n%d" % rec.index
        node = self._by_id.get(nid)
        if node is None:
            return
        if attr == "grad" and rec.kind == "forward":   # an earlier node learns its gradient
            if value is not None:
                self._set(nid, "grad", value)
        else:                                        # a node not sent yet
            node[attr] = value

    def _set(self, nid: str, key: str, value) -> None:
        n = self._by_id.get(nid)
        if n is not None:
            n[key] = value
        self._updates.setdefault(nid, {"id": nid})[key] = value

    # ------------------------------------------------------------------ output
    def meta(self) -> dict:
        return {"title": self.title, "forward": self.forward, "backward": self.backward,
                "total": self.total, "truncated": self.truncated, "steps": self.steps, "folded": self.folded}

    def _name_params(self) -> None:
        """Name the parameter leaves added since the last call (``param``) and list them on the ops
        that read them (``params``): one lookup of the called modules' parameters per batch."""
        n0, e0 = self._named
        new = self.nodes[n0:]
        if any(n["kind"] == "leaf" for n in new):
            names = parameter_names()
            for n in new:
                if n["kind"] == "leaf":
                    name = names.get(int(n["id"][1:]))
                    if name is not None:
                        n["param"] = self._params[n["id"]] = name
        if self._params:
            for e in self.edges[e0:]:
                name = self._params.get(e["source"]) if e["kind"] == "data" else None
                target = self._by_id.get(e["target"]) if name is not None else None
                if target is not None:
                    target.setdefault("params", []).append(name)
        self._named = [len(self.nodes), len(self.edges)]

    def take(self) -> dict:
        """What was added since the last ``take()``, as a delta (same keys as a graph, plus updates)."""
        self._finish_groups()
        self._name_params()
        n0, e0 = self._sent
        delta = {"schema": SCHEMA, "version": VERSION, "nodes": self.nodes[n0:], "edges": self.edges[e0:],
                 "groups": list(self._new_groups), "updates": list(self._updates.values()), "meta": self.meta()}
        self._sent = [len(self.nodes), len(self.edges)]
        self._new_groups = []
        self._new_group_ids = set()
        self._updates = {}
        return delta

    def graph(self) -> dict:
        self._finish_groups()
        self._name_params()
        return {"schema": SCHEMA, "version": VERSION, "nodes": list(self.nodes), "edges": list(self.edges),
                "groups": list(self.groups.values()), "meta": self.meta()}


def _step_key(rec) -> tuple:
    """What must repeat, record for record, for a step to fold into the first."""
    return (rec.kind, rec.op, rec.module, rec.phase, _shape_key(rec.shape),
            tuple(_shape_key(x) for x in rec.input_shapes))


def _shape_key(s):
    return None if s is None else tuple(s)


# ---------------------------------------------------------------------- adapters
def graph_from_tape(t, title: str = "", max_nodes: int | None = None, grad_ops: bool = False) -> dict:
    """The view-model graph of a ``tapelab.tape`` (or any iterable of its records)."""
    b = GraphBuilder(title=title, max_nodes=max_nodes, grad_ops=grad_ops)
    for rec in (t.nodes if hasattr(t, "nodes") else t):
        b.add(rec)
    b.close()
    return b.graph()


def graph_from_grad_fn(fn, title: str = "", max_nodes: int = 2000) -> dict:
    """The backward graph reachable from a ``grad_fn`` node (``loss.grad_fn``), walked through
    ``next_functions``: one ``backward`` node per graph node, ``grad`` edges along the walk."""
    nodes, edges, ids = [], [], {}
    stack, truncated = [fn], False
    while stack:
        node = stack.pop()
        if node is None or id(node) in ids:
            continue
        if len(nodes) >= max_nodes:
            truncated = True
            break
        nid = f"b{len(nodes)}"
        ids[id(node)] = nid
        meta = node.metadata
        nodes.append({"id": nid, "kind": "backward", "label": node.name(), "op": node.name(), "index": len(nodes),
                      "seq": None, "forward_seq": getattr(node, "tape_seq", None), "group": None,
                      "module": str(meta.get("module", "")) if isinstance(meta, dict) else "",
                      "shape": None, "input_shapes": [], "dtype": "", "device": "", "requires_grad": False,
                      "start_ns": 0, "time_ns": 0, "value": None, "grad": None, "grad_ops": 0,
                      "source": ""})
        for nxt, _ in reversed(node.next_functions):
            if nxt is not None:
                stack.append(nxt)
    seen = {}
    stack = [fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen or id(node) not in ids:
            continue
        seen[id(node)] = True
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) in ids:
                edges.append({"source": ids[id(node)], "target": ids[id(nxt)], "kind": "grad", "shape": None})
                stack.append(nxt)
    return {"schema": SCHEMA, "version": VERSION, "nodes": nodes, "edges": edges, "groups": [],
            "meta": {"title": title or fn.name(), "forward": 0, "backward": len(nodes), "total": len(nodes),
                     "truncated": truncated}}


# ---------------------------------------------------------------------- DOT and HTML
def to_dot(graph: dict, groups: bool = True) -> str:
    """Graphviz DOT source of a view-model graph: module groups become nested clusters, forward
    nodes are boxes, backward nodes orange ellipses, leaves grey notes; every string is quoted."""
    lines = ["digraph tape {", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    style = {"forward": 'shape=box, style="rounded,filled", fillcolor="#dbeafe"',
             "backward": 'shape=ellipse, style=filled, fillcolor="#fed7aa"',
             "leaf": 'shape=note, style=filled, fillcolor="#e5e7eb"'}
    children: dict = {}
    members: dict = {}
    for g in graph["groups"]:
        children.setdefault(g["parent"], []).append(g)
    for n in graph["nodes"]:
        members.setdefault(n["group"] if groups else None, []).append(n)

    def node_line(n, indent):
        label = dot_quote(n["label"])[:-1] + (("\\n" + fmt_shape(n["shape"])) if n.get("shape") is not None else "") + '"'
        return f"{indent}{dot_quote(n['id'])} [label={label}, {style.get(n['kind'], '')}];"

    def emit(gid, indent):
        for n in members.get(gid, ()):
            lines.append(node_line(n, indent))
        if not groups:
            return
        for g in children.get(gid, ()):
            lines.append(f"{indent}subgraph {dot_quote('cluster_' + g['id'])} {{")
            lines.append(f"{indent}  label={dot_quote(g['label'])}; style=rounded; color=\"#94a3b8\";")
            emit(g["id"], indent + "  ")
            lines.append(f"{indent}}}")

    emit(None, "  ")
    for e in graph["edges"]:
        attrs = ' [color="#ea580c", style=dashed]' if e["kind"] == "grad" else ""
        lines.append(f"  {dot_quote(e['source'])} -> {dot_quote(e['target'])}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_html(graph: dict, limit: int = ROWS) -> str:
    """A static HTML fallback (nbconvert, nbviewer, GitHub): the header, an SVG of the collapsed
    graph and the first ``limit`` nodes in a folded table; every string escaped."""
    esc = html.escape
    m = graph.get("meta", {})
    rows = [[esc(n["kind"]), esc(n["op"]), esc(n.get("module") or ""), esc(fmt_shape(n.get("shape"))),
             esc(n.get("dtype") or ""), esc(n.get("source") or "")] for n in graph["nodes"][:limit]]
    note = f"<p><i>{esc(m['note'])}</i></p>" if m.get("note") else ""
    return (f"<div class=\"tapelab-static\"><b>tapelab graph {esc(str(m.get('title', '')))}</b>: "
            f"{m.get('forward', 0)} forward, {m.get('backward', 0)} backward"
            + (f", {m['steps']} steps ({m['folded']} repeats folded)" if m.get("folded") else "") + note
            + graph_svg(graph)
            + details(f"{len(graph['nodes'])} nodes", ["kind", "op", "module", "shape", "dtype", "source"], rows,
                      total=len(graph["nodes"])) + "</div>")
