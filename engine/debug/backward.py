"""``step_backward``: the backward walk one node at a time, with stop conditions and breakpoints.

The stepper is an ordinary object holding ``autograd.backward_steps``'s generator: each
call advances it and returns, so the kernel is idle between steps (a widget button can
call ``step()``). Gradients accumulate exactly as ``backward()`` accumulates them, whatever
mix of ``step``, ``step_over``, ``run`` and ``finish`` drives the walk.

Two deliberate differences from a plain ``backward()``:

- The walk keeps each node's saved tensors until the stepper moves past it (then frees them
  unless ``retain_graph=True``), so ``current.saved_tensors`` and the input statistics of a
  NaN stop can be read.
- Anomaly mode's "returned nan values" error is not raised mid-walk (it would kill the
  generator): the step is marked non-finite instead, and with anomaly detection on, ``run``
  and ``step_over`` stop there.

>>> s = tapelab.debug.step_backward(loss)
>>> s.step().name
'SumBackward0'
>>> s.run(until="MulBackward0"); s.current.grad_inputs
>>> s.run(nan=True)          # the node that made the first NaN/Inf gradient
>>> print(s.explain())
>>> s.finish()
"""
from __future__ import annotations

import contextlib
import heapq
import math
import weakref
from typing import Callable

from ..autograd import anomaly as _anomaly
from ..autograd.engine import backward_steps
from ..base.grad_mode import STATE as GRAD
from ..core.node import AccumulateGrad
from ..core.tensor import Tensor
from .conditions import Condition, any_of, as_condition, in_module, when
from .stepping import Stepper
from .summary import forward_op_of, full_norm, grad_summary, is_finite, source_of

__all__ = ["step_backward", "BackwardStepper", "BackwardFrame", "StepRecord"]


@contextlib.contextmanager
def _walk_quietly():
    """Resume the walk without anomaly mode's NaN raise (it would end the walk), and keep the
    caller's grad mode: the walk restores the mode it saw at its *first* step, which is stale
    when a later step runs under a different ``no_grad``/``enable_grad``."""
    st = _anomaly.STATE
    prev, grad = st.check_nan, GRAD.enabled
    st.check_nan = False
    try:
        yield
    finally:
        st.check_nan, GRAD.enabled = prev, grad


def _anomaly_stops() -> bool:
    return _anomaly.STATE.enabled and _anomaly.STATE.check_nan


def run_condition(until, parse, predicate, **parts) -> Condition | None:
    """The stop condition of a stepper's ``run``: each of ``until`` (one or a list, read by
    ``parse``), the ``when`` keyword ``parts`` (in order; ``nan=None`` means "while anomaly
    detection is on") and ``predicate`` stops on its own."""
    conds = [parse(u) for u in (until if isinstance(until, (list, tuple, set, frozenset)) else [until])
             if u is not None]
    if "nan" in parts and parts["nan"] is None:
        parts["nan"] = _anomaly_stops()
    conds += [when(**{key: value}) for key, value in parts.items() if value is not None and value is not False]
    if predicate is not None:
        conds.append(as_condition(predicate))
    return any_of(conds)


def _value_summary(v):
    if isinstance(v, Tensor):
        return grad_summary(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"value": v if not isinstance(v, float) or math.isfinite(v) else repr(v)}
    return {"value": repr(v)}


class StepRecord:
    """One executed node as ``history`` keeps it: names and gradient summaries (tensors only if kept)."""

    __slots__ = ("index", "node_id", "name", "module", "tape_seq", "forward_op", "source",
                 "grad_outputs", "grad_inputs", "finite", "max_grad_norm", "tensors", "_node")

    def __init__(self, frame: "BackwardFrame", keep_tensors: bool):
        self.index, self.node_id, self.name = frame.index, frame.node_id, frame.name
        self.module, self.tape_seq, self.forward_op = frame.module, frame.tape_seq, frame.forward_op
        self.source = frame.source
        self.grad_outputs = [grad_summary(g) for g in frame.grad_outputs]
        self.grad_inputs = [grad_summary(g) for g in frame.grad_inputs]
        self.finite, self.max_grad_norm = frame.finite, frame.max_grad_norm
        self.tensors = (tuple(frame.grad_outputs), tuple(frame.grad_inputs)) if keep_tensors else None
        self._node = weakref.ref(frame.node)

    @property
    def node(self):
        """The graph node, while something else keeps it alive."""
        return self._node()

    def to_dict(self) -> dict:
        return {"index": self.index, "node_id": self.node_id, "name": self.name, "module": self.module,
                "tape_seq": self.tape_seq, "forward_op": self.forward_op,
                "source": _source_dict(self.source), "grad_outputs": self.grad_outputs,
                "grad_inputs": self.grad_inputs, "finite": self.finite,
                "max_grad_norm": _num(self.max_grad_norm)}

    def __repr__(self) -> str:
        return f"StepRecord(index={self.index}, name={self.name!r}, module={self.module!r})"


def _num(x):
    return x if x is None or math.isfinite(x) else repr(x)


def _source_dict(src):
    return None if src is None else {k: v for k, v in src.items()}


class BackwardFrame:
    """The node the walk just ran (``stepper.current``), with its live tensors.

    ``grad_outputs`` flowed into the node (w.r.t. its forward outputs); ``grad_inputs`` it
    produced (one per ``node.next_functions``). ``saved_tensors`` and ``inputs`` (the forward
    op's inputs) are readable until the stepper moves on, unless ``retain_graph`` keeps them.
    """

    def __init__(self, step, node_id: int, module: str):
        self.step = step
        self.node_id, self.module = node_id, module
        self.index, self.node, self.name = step.index, step.node, step.name
        self.grad_outputs, self.grad_inputs = tuple(step.grad_outputs), tuple(step.grad_inputs)
        self.tape_seq = self.node.tape_seq
        self.forward_op = forward_op_of(self.node)
        self.source = source_of(self.node)
        produced = self.grad_inputs if (self.grad_inputs or self.index) else self.grad_outputs
        self.nonfinite = [i for i, g in enumerate(produced) if not is_finite(g)]
        self.finite = not self.nonfinite
        self.max_grad_norm = max((full_norm(g) for g in self.grad_inputs), default=0.0)

    @property
    def op_names(self) -> frozenset:
        return frozenset([self.forward_op]) if self.forward_op else frozenset()

    @property
    def saved_tensors(self) -> tuple:
        """The tensors the node's backward read (``()`` once freed)."""
        try:
            return tuple(self.node.saved_tensors)
        except (RuntimeError, AttributeError):
            return ()

    @property
    def inputs(self) -> tuple:
        """The forward op's inputs (Tensors and numbers), while the node still holds them."""
        node = getattr(self.node, "fn", self.node)  # CopySlices: the in-place op's node
        ins = getattr(node, "inputs", None)
        if ins is not None:
            return tuple(ins)
        return self.saved_tensors

    def input_stats(self) -> list:
        return [_value_summary(v) for v in self.inputs]

    def provenance(self) -> dict | None:
        """Where the first non-finite gradient this node produced comes from (None when all finite)."""
        if self.finite:
            return None
        produced = self.grad_inputs if (self.grad_inputs or self.index) else self.grad_outputs
        i = self.nonfinite[0]
        g = produced[i]
        kind = "nan" if bool(g._device.xp.isnan(g._data).any()) else "inf"
        return {"node": self.name, "node_id": self.node_id, "gradient_index": i, "kind": kind,
                "forward_op": self.forward_op, "module": self.module, "tape_seq": self.tape_seq,
                "source": _source_dict(self.source),
                "grad_outputs": [grad_summary(t) for t in self.grad_outputs],
                "grad_inputs": [grad_summary(t) for t in self.grad_inputs],
                "inputs": self.input_stats()}

    def explain(self) -> str:
        """A few lines naming the node, its forward op, module and source line, and its inputs' statistics."""
        p = self.provenance()
        if p is None:
            return f"{self.name}: all gradients finite"
        lines = [f"{self.name} produced {p['kind']} in its gradient {p['gradient_index']} "
                 f"(step {self.index})."]
        where = f" in module {self.module!r}" if self.module else ""
        lines.append(f"Forward op: {self.forward_op or '?'}{where}.")
        if self.source is not None:
            lines.append(f"Created at: {self.source['text']}")
        else:
            lines.append("No source line recorded: build the graph under tapelab.debug.record() "
                         "or tapelab.autograd.set_detect_anomaly(True).")
        for j, s in enumerate(p["inputs"]):
            lines.append(f"  input {j}: {_fmt_stats(s)}")
        for j, s in enumerate(p["grad_outputs"]):
            lines.append(f"  incoming gradient {j}: {_fmt_stats(s)}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"index": self.index, "node_id": self.node_id, "name": self.name, "module": self.module,
                "tape_seq": self.tape_seq, "forward_op": self.forward_op,
                "source": _source_dict(self.source),
                "grad_outputs": [grad_summary(g) for g in self.grad_outputs],
                "grad_inputs": [grad_summary(g) for g in self.grad_inputs],
                "saved_tensors": [grad_summary(t) for t in self.saved_tensors],
                "finite": self.finite, "nonfinite": list(self.nonfinite),
                "max_grad_norm": _num(self.max_grad_norm)}

    def __repr__(self) -> str:
        mod = f", module={self.module!r}" if self.module else ""
        return f"<BackwardFrame {self.index}: {self.name}{mod}{'' if self.finite else ', NON-FINITE'}>"


def _fmt_stats(s) -> str:
    if s is None:
        return "None"
    if "value" in s:
        return repr(s["value"])
    head = f"{s['dtype']}{s['shape']}"
    if s.get("min") is None:
        rng = "no finite values"
    else:
        rng = f"min={s['min']:.4g} max={s['max']:.4g} mean={s['mean']:.4g}"
    n = s.get("sampled") or math.prod(s["shape"])
    counts = [f"{s[k]} of {n} values are {what}" for k, what in (("zero", "exactly zero"), ("nan", "NaN"),
                                                                 ("inf", "infinite")) if s.get(k)]
    return f"{head} {rng}" + (" (" + "; ".join(counts) + ")" if counts else "")


def _graph(roots) -> tuple[dict, list]:
    """Every node reachable from ``roots``: ``{node: id}`` in discovery order, and the node list."""
    ids, order = {}, []
    stack = [n for n in roots if n is not None]
    for n in stack:
        if n not in ids:
            ids[n] = len(order)
            order.append(n)
    i = 0
    while i < len(order):
        for e in order[i].edges:
            if e is not None and e[0] not in ids:
                ids[e[0]] = len(order)
                order.append(e[0])
        i += 1
    return ids, order


class BackwardStepper(Stepper):
    """A paused backward pass. Made by ``tapelab.debug.step_backward``; see its docstring."""

    def __init__(self, loss, retain_graph: bool = False, gradient=None, keep_tensors: bool = False):
        tensors = list(loss) if isinstance(loss, (list, tuple)) else [loss]
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"step_backward: expected a Tensor at position {i}, got {type(t).__name__}")
            if not t.requires_grad:
                raise RuntimeError(f"step_backward: element {i} does not require grad and does not have a "
                                   "grad_fn; build it from tensors with requires_grad=True")
        roots = [t.grad_fn if t.grad_fn is not None else t._accumulator() for t in tensors]
        self.retain_graph, self.keep_tensors = retain_graph, keep_tensors
        self._roots = roots
        self._ids, self._nodes = _graph(roots)
        # the walk keeps buffers; the stepper frees each node once it has moved past it
        self._gen = backward_steps(tensors, gradient, retain_graph=True)
        self._frame: BackwardFrame | None = None
        self._feeders: dict = {}  # leaf node -> modules of the nodes that sent it gradients
        self.history: list[StepRecord] = []
        self.breakpoints: list[dict] = []
        self.stop_reason: str | None = None
        self.done = False
        self.error: BaseException | None = None

    # ------------------------------------------------------------------ the walk
    def node_id(self, node) -> int | None:
        """The stepper's id of ``node`` (its index in ``to_dict()["graph"]``)."""
        return self._ids.get(node)

    def node(self, node_id: int):
        """The graph node with this stepper id."""
        return self._nodes[node_id]

    def module_of(self, node) -> str:
        """The module path the forward op ran in; a leaf's is that of the nodes that fed it."""
        m = getattr(node, "module", None)
        if m is not None:
            return m
        feeders = self._feeders.get(node)
        if not feeders:
            return ""
        common = feeders[0].split(".")
        for f in feeders[1:]:
            parts = f.split(".")
            k = 0
            while k < min(len(common), len(parts)) and common[k] == parts[k]:
                k += 1
            common = common[:k]
        return ".".join(common)

    def _release(self, frame) -> None:
        if frame is not None and not self.retain_graph:
            frame.node.release()

    def _advance(self) -> BackwardFrame | None:
        if self.done:
            return None
        prev, self._frame = self._frame, None
        self._release(prev)
        prev = None
        try:
            with _walk_quietly():
                step = next(self._gen)
        except StopIteration:
            self.done = True
            return None
        except BaseException as e:
            self.done, self.error = True, e
            raise
        node = step.node
        if node not in self._ids:  # a node made after the stepper started (regenerated view grad_fn)
            self._ids[node] = len(self._nodes)
            self._nodes.append(node)
        frame = BackwardFrame(step, self._ids[node], self.module_of(node))
        mod = frame.module
        for e, g in zip(node.edges, frame.grad_inputs):
            if e is not None and g is not None and type(e[0]) is AccumulateGrad:
                self._feeders.setdefault(e[0], []).append(mod)
        self.history.append(StepRecord(frame, self.keep_tensors))
        self._frame = frame
        return frame

    def _go(self, stop: Callable, max_steps: int | None) -> BackwardFrame | None:
        n = 0
        while True:
            frame = self._advance()
            if frame is None:
                self.stop_reason = "done"
                return None
            n += 1
            reason = self._break(frame) or stop(frame)
            if reason:
                self.stop_reason = reason
                return frame
            if max_steps is not None and n >= max_steps:
                self.stop_reason = "max_steps"
                return frame

    def step_over(self, module_path: str | None = None, max_steps: int | None = None) -> BackwardFrame | None:
        """Run until the walk runs a node outside ``module_path`` (default: the current node's module).

        Stops early at a breakpoint, and at a NaN/Inf gradient while anomaly detection is on.
        Returns the first node run outside the module (already executed), or None at the end.
        """
        if module_path is None:
            module_path = self._frame.module if self._frame is not None else ""
            if module_path == "":
                return self.step()
        nan = _anomaly_stops()

        def stop(f):
            if nan and not f.finite:
                return "nan"
            return None if in_module(f.module, module_path) else f"left module {module_path!r}"
        return self._go(stop, max_steps)

    def _conditions(self, until, name, module, nan, grad_norm_above, predicate) -> Condition | None:
        return run_condition(until, self._parse, predicate, name=name, module=module, nan=nan,
                             grad_norm_above=grad_norm_above)

    def _parse(self, u) -> Condition:
        if isinstance(u, str):
            names = {n.name() for n in self._nodes}
            modules = {getattr(n, "module", "") for n in self._nodes}
            if u not in names and any(in_module(m, u) for m in modules if m):
                return when(module=u)
            return when(name=u)
        return as_condition(u)

    def run(self, until=None, *, name=None, module: str | None = None, nan: bool | None = None,
            grad_norm_above: float | None = None, predicate: Callable | None = None,
            max_steps: int | None = None) -> BackwardFrame | None:
        """Run until a condition holds (after the node that meets it has run), a breakpoint, or the end.

        Args:
            until: a node name (``"MulBackward0"``) or module path (a string that is no node's
                name but prefixes a module), a ``when(...)`` condition, a callable on the frame,
                or a list of these (any of them stops).
            name, module, nan, grad_norm_above, predicate: more conditions, each stopping on
                its own (see ``tapelab.debug.when``). ``nan=None`` means "while anomaly
                detection is on".
            max_steps: stop after this many nodes at most.
        Returns:
            The frame where it stopped (``stepper.stop_reason`` says why), or None when the
            walk ended first.
        """
        cond = self._conditions(until, name, module, nan, grad_norm_above, predicate)
        return self._go(cond.reason if cond is not None else (lambda f: None), max_steps)

    def finish(self, record: bool = True) -> None:
        """Run the rest of the walk, ignoring conditions and breakpoints."""
        if not record:
            prev, self._frame = self._frame, None
            self._release(prev)
            prev = None
            try:
                with _walk_quietly():
                    for step in self._gen:
                        if not self.retain_graph:
                            step.node.release()
                        step = None
            except BaseException as e:
                self.done, self.error = True, e
                raise
            self.done = True
        while not self.done:
            self._advance()
        self.stop_reason = "done"

    def close(self) -> None:
        """Abandon the rest of the walk (nodes not yet run accumulate nothing)."""
        self._frame = None
        self.done = True
        with _walk_quietly():  # closing runs the walk's finally, which would reset grad mode
            self._gen.close()

    def __del__(self):
        if "_gen" in self.__dict__:
            self.close()

    # ------------------------------------------------------------------ breakpoints
    def add_breakpoint(self, target=None, *, tape_seq: int | None = None, node_id: int | None = None,
                       name: str | None = None, condition=None) -> int:
        """Stop ``run``/``step_over`` after a node runs: a graph node, an int tape_seq, a node name,
        a stepper ``node_id``, or a condition. Returns the breakpoint's number."""
        if target is not None:
            if isinstance(target, int) and not isinstance(target, bool):
                tape_seq = target
            elif isinstance(target, str):
                name = target
            elif isinstance(target, Condition) or (callable(target) and not hasattr(target, "edges")):
                condition = target
            else:
                node_id = self._ids.get(target)
                if node_id is None:
                    raise ValueError(f"add_breakpoint: {target!r} is not a node of this backward graph")
        if tape_seq is not None:
            match, label, key = (lambda f, s=tape_seq: f.tape_seq == s), f"tape_seq {tape_seq}", {"tape_seq": tape_seq}
        elif node_id is not None:
            if not 0 <= node_id < len(self._nodes):
                raise ValueError(f"add_breakpoint: no node with id {node_id} (the graph has {len(self._nodes)})")
            match = lambda f, i=node_id: f.node_id == i  # noqa: E731
            label, key = f"node {node_id} ({self._nodes[node_id].name()})", {"node_id": node_id}
        elif name is not None:
            match, label, key = (lambda f, n=name: f.name == n), f"name {name}", {"name": name}
        elif condition is not None:
            c = as_condition(condition)
            match, label, key = c, c.label, {"condition": c.label}
        else:
            raise ValueError("add_breakpoint needs a node, a tape_seq, a node_id, a name or a condition")
        number = max((b["number"] for b in self.breakpoints), default=0) + 1
        self.breakpoints.append({"number": number, "label": label, "match": match, "enabled": True,
                                 "hits": 0, **key})
        return number

    def clear_breakpoints(self) -> None:
        self.breakpoints = []

    # ------------------------------------------------------------------ views
    def peek(self) -> list:
        """The nodes ready to run next, the next one first (read from the walk's state; [] when unknown)."""
        frame = getattr(self._gen, "gi_frame", None)
        if frame is None or self.done:
            return []
        if not self.history:  # not started: the walk begins at the roots
            return list(self._roots)
        ready = frame.f_locals.get("ready")
        if not isinstance(ready, list):
            return []
        pending = list(ready)   # the walk's heap, popped in the order the walk will pop it
        return [heapq.heappop(pending)[1] for _ in range(len(pending))]

    def visited(self) -> list[int]:
        return [r.node_id for r in self.history]

    def to_dict(self) -> dict:
        """A JSON-serialisable snapshot for a viewer (no tensors): graph, visited, current, history."""
        nodes = []
        for i, n in enumerate(self._nodes):
            nodes.append({"id": i, "name": n.name(), "module": self.module_of(n), "tape_seq": n.tape_seq,
                          "forward_op": forward_op_of(n),
                          "next": [self._ids.get(e[0]) for e in n.edges if e is not None]})
        frame = self._frame
        return {
            "kind": "backward", "done": self.done, "steps": len(self.history),
            "stop_reason": self.stop_reason, "retain_graph": self.retain_graph,
            "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}",
            "current": frame.to_dict() if frame is not None else None,
            "next": [self._ids.get(n) for n in self.peek()],
            "visited": self.visited(),
            "visited_tape_seq": [r.tape_seq for r in self.history if r.tape_seq is not None],
            "history": [r.to_dict() for r in self.history],
            "breakpoints": [{k: v for k, v in b.items() if k != "match"} for b in self.breakpoints],
            "provenance": frame.provenance() if frame is not None and not frame.finite else None,
            "graph": {"nodes": nodes},
        }

    def __repr__(self) -> str:
        state = "done" if self.done else f"at {self._frame!r}" if self._frame is not None else "not started"
        return f"<BackwardStepper {len(self.history)} steps, {state}>"


def step_backward(loss, retain_graph: bool = False, gradient=None, keep_tensors: bool = False) -> BackwardStepper:
    """A paused backward pass of ``loss``: step it node by node, run it to a condition, or finish it.

    Args:
        loss: the tensor (or tensors) to differentiate.
        retain_graph: keep the graph's saved tensors after the walk, as in ``backward()``.
        gradient: the gradient w.r.t. ``loss`` (default: ones for a scalar).
        keep_tensors: ``history`` keeps each step's gradient tensors too (summaries only by default).
    Returns:
        A ``BackwardStepper``: ``step()``, ``step_over(module)``, ``run(until=...)``, ``finish()``,
        ``current``, ``history``, ``done``, ``add_breakpoint(...)``, ``to_dict()``.

    >>> s = tapelab.debug.step_backward(loss)
    >>> s.step(); s.current.grad_inputs
    >>> s.run(nan=True); print(s.explain())
    """
    return BackwardStepper(loss, retain_graph=retain_graph, gradient=gradient, keep_tensors=keep_tensors)
