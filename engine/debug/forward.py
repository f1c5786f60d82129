"""``step_forward``: a module's forward pass one FX node at a time, each with its inputs and output.

The module is captured as a graph (``fx.symbolic_trace``; ``fx.trace_from_tape`` when Python
control flow on tensor values defeats symbolic tracing) and run by an ``fx.Interpreter``
whose ``steps()`` generator the stepper holds: nothing blocks between steps, and the
final output equals a plain call.

>>> s = tapelab.debug.step_forward(model, x)
>>> s.step().name, s.current.output.shape
>>> s.run(nan=True); print(s.explain())     # the first node whose output holds NaN/Inf
>>> y = s.finish()
"""
from __future__ import annotations

from typing import Callable

from ..fx import GraphModule, Interpreter, symbolic_trace, trace_from_tape
from ..fx.node import Node, map_aggregate
from ..core.tensor import Tensor
from .backward import _fmt_stats, _value_summary, run_condition
from .conditions import as_condition, when
from .stepping import Stepper
from .summary import is_finite

__all__ = ["step_forward", "ForwardStepper", "ForwardFrame"]


class _RecordingInterpreter(Interpreter):
    """Keeps the argument values of the node it runs (``env`` may drop them after their last use)."""

    last_args: tuple = ((), {})

    def run_node(self, n):
        self.current_node = n
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        self.last_args = (args, kwargs)
        return getattr(self, n.op)(n.target, args, kwargs)


def _tensors(value) -> list:
    out = []
    map_aggregate(value, lambda v: out.append(v) if isinstance(v, Tensor) else None)
    return out


def _summary(value):
    if isinstance(value, (tuple, list)):
        return [_summary(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _summary(v) for k, v in value.items()}
    return _value_summary(value)


def target_name(node: Node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    return getattr(t, "__name__", None) or repr(t)


class ForwardFrame:
    """The FX node the interpreter just ran (``stepper.current``): its argument values and output."""

    def __init__(self, index: int, node: Node, args: tuple, kwargs: dict, output, module_obj):
        self.index, self.node, self.args, self.kwargs, self.output = index, node, args, kwargs, output
        self.name, self.op, self.target = node.name, node.op, target_name(node)
        self.module = node.target if node.op == "call_module" else ""
        self.module_type = type(module_obj).__name__ if module_obj is not None else None
        self.finite = all(is_finite(t) for t in _tensors(output))
        self.inputs_finite = all(is_finite(t) for t in _tensors((args, kwargs)))

    @property
    def op_names(self) -> frozenset:
        names = {self.op, self.target}
        if self.module_type:
            names.add(self.module_type)
        return frozenset(names)

    @property
    def max_grad_norm(self) -> float:
        raise TypeError("grad_norm_above is a backward condition; forward stepping has no gradients")

    @property
    def inputs(self) -> list:
        """The argument values, positional then keyword."""
        return list(self.args) + list(self.kwargs.values())

    def provenance(self) -> dict | None:
        """What made this node's output non-finite (None when it is finite)."""
        if self.finite:
            return None
        return {"node": self.name, "op": self.op, "target": self.target, "module": self.module,
                "module_type": self.module_type, "code": self.node.format_node(),
                "inputs_finite": self.inputs_finite,
                "inputs": [_summary(v) for v in self.inputs], "output": _summary(self.output)}

    def explain(self) -> str:
        p = self.provenance()
        if p is None:
            return f"{self.name}: output finite"
        what = f"{self.op} {self.target}" + (f" ({self.module_type})" if self.module_type else "")
        lines = [f"FX node {self.name!r} ({what}) produced non-finite values (step {self.index}).",
                 ("Its inputs were finite: this node made them." if self.inputs_finite
                  else "Its inputs were already non-finite."),
                 f"  {p['code']}"]
        for j, v in enumerate(self.inputs):
            s = _value_summary(v)
            lines.append(f"  input {j}: {_fmt_stats(s) if isinstance(s, dict) else s}")
        for j, t in enumerate(_tensors(self.output)):
            lines.append(f"  output {j}: {_fmt_stats(_value_summary(t))}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"index": self.index, "name": self.name, "op": self.op, "target": self.target,
                "module": self.module, "module_type": self.module_type, "finite": self.finite,
                "inputs_finite": self.inputs_finite, "inputs": [_summary(v) for v in self.inputs],
                "output": _summary(self.output)}

    def __repr__(self) -> str:
        return f"<ForwardFrame {self.index}: {self.name} ({self.op} {self.target}){'' if self.finite else ' NON-FINITE'}>"


class ForwardStepper(Stepper):
    """A paused forward pass. Made by ``tapelab.debug.step_forward``; see its docstring."""

    _over = "the pass is over"

    def __init__(self, module_or_graph_module, *args):
        m = module_or_graph_module
        self.trace_error: str | None = None
        if isinstance(m, GraphModule):
            self.graph_module, self.traced_by = m, None
        else:
            try:
                self.graph_module, self.traced_by = symbolic_trace(m), "symbolic_trace"
            except Exception as e:  # control flow on values, unsupported calls: record one eager run instead
                self.trace_error = f"{type(e).__name__}: {e}"
                self.graph_module, self.traced_by = trace_from_tape(m, *args), "trace_from_tape"
        self._interp = _RecordingInterpreter(self.graph_module)
        self._submodules = dict(self.graph_module.named_modules())
        self._gen = self._interp.steps(*args)
        self._frame: ForwardFrame | None = None
        self._index = 0
        self.history: list[dict] = []
        self.breakpoints: list[dict] = []
        self.output = None
        self.stop_reason: str | None = None
        self.done = False
        self.error: BaseException | None = None

    @property
    def graph(self):
        return self.graph_module.graph

    def _advance(self) -> ForwardFrame | None:
        if self.done:
            return None
        self._frame = None
        try:
            node, value = next(self._gen)
        except StopIteration:
            self.done = True
            return None
        except BaseException as e:
            self.done, self.error = True, e
            raise
        args, kwargs = self._interp.last_args
        mod = self._submodules.get(node.target) if node.op == "call_module" else None
        frame = ForwardFrame(self._index, node, args, kwargs, value, mod)
        self._index += 1
        if node.op == "output":
            self.output = value
        self.history.append(frame.to_dict())
        self._frame = frame
        return frame

    def run(self, until=None, *, name=None, op=None, module: str | None = None, nan: bool | None = None,
            predicate: Callable | None = None, max_steps: int | None = None) -> ForwardFrame | None:
        """Run until a condition holds (after the node that meets it has run), a breakpoint, or the end.

        ``until``: an FX node name, a ``when(...)`` condition, a callable on the frame, or a list
        of these; ``name`` (node name), ``op`` (opcode or target name, e.g. ``"softmax"``),
        ``module`` (call_module target prefix), ``nan`` (output holds NaN/Inf; ``None`` = while
        anomaly detection is on) and ``predicate`` each stop on their own.
        """
        cond = run_condition(until, lambda u: when(name=u) if isinstance(u, str) else u, predicate,
                             name=name, op=op, module=module, nan=nan)
        n = 0
        while True:
            frame = self._advance()
            if frame is None:
                self.stop_reason = "done"
                return None
            n += 1
            reason = self._break(frame) or (cond.reason(frame) if cond is not None else None)
            if reason:
                self.stop_reason = reason
                return frame
            if max_steps is not None and n >= max_steps:
                self.stop_reason = "max_steps"
                return frame

    def finish(self):
        """Run the remaining nodes; return the graph's output (equal to a plain call)."""
        while not self.done:
            self._advance()
        self.stop_reason = "done"
        return self.output

    def add_breakpoint(self, target) -> int:
        """Stop ``run`` after an FX node (a Node or its name) or when a condition holds."""
        if isinstance(target, Node):
            target = target.name
        if isinstance(target, str):
            if all(n.name != target for n in self.graph.nodes):
                raise ValueError(f"add_breakpoint: no FX node named {target!r}; nodes are "
                                 f"{', '.join(n.name for n in self.graph.nodes)}")
            match, label, key = (lambda f, n=target: f.name == n), f"node {target}", {"name": target}
        else:
            c = as_condition(target)
            match, label, key = c, c.label, {"condition": c.label}
        number = max((b["number"] for b in self.breakpoints), default=0) + 1
        self.breakpoints.append({"number": number, "label": label, "match": match, "enabled": True,
                                 "hits": 0, **key})
        return number

    def to_dict(self) -> dict:
        """A JSON-serialisable snapshot: the FX graph, visited nodes, the current node, history."""
        nodes = [{"name": n.name, "op": n.op, "target": target_name(n),
                  "inputs": [a.name for a in n.all_input_nodes]} for n in self.graph.nodes]
        frame = self._frame
        return {"kind": "forward", "done": self.done, "steps": len(self.history),
                "stop_reason": self.stop_reason, "traced_by": self.traced_by, "trace_error": self.trace_error,
                "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}",
                "current": frame.to_dict() if frame is not None else None,
                "visited": [h["name"] for h in self.history], "history": self.history,
                "breakpoints": [{k: v for k, v in b.items() if k != "match"} for b in self.breakpoints],
                "provenance": frame.provenance() if frame is not None and not frame.finite else None,
                "graph": {"nodes": nodes}}

    def __repr__(self) -> str:
        state = "done" if self.done else f"at {self._frame!r}" if self._frame is not None else "not started"
        return f"<ForwardStepper {len(self.history)} steps, {state}>"


def step_forward(module_or_graph_module, *args) -> ForwardStepper:
    """A paused forward pass of a module (or ``GraphModule``, or function) on ``args``, one FX node a step.

    A module that is not a ``GraphModule`` is traced with ``fx.symbolic_trace``; if that fails
    (control flow on tensor values), with ``fx.trace_from_tape`` on ``args`` (which runs it once).
    ``stepper.traced_by`` says which.

    Returns:
        A ``ForwardStepper``: ``step()``, ``run(until=..., name=, op=, nan=)``, ``finish()`` (the
        output), ``current`` (node, ``args``/``kwargs`` values, ``output``), ``history``, ``to_dict()``.

    >>> s = tapelab.debug.step_forward(model, x)
    >>> s.run(op="softmax"); s.current.output
    """
    return ForwardStepper(module_or_graph_module, *args)
