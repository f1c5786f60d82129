"""``trace_from_tape``: a graph recorded from one eager run, guarded by its inputs.

Symbolic tracing fails on ``if x.sum() > 0:`` because a Proxy has no value. Here the
function runs for real on example inputs while a dispatcher mode records every primitive
op it performs (a ``dispatch.Mode``: the same choke point the tape and profiler watch). The
graph is therefore the path this example took: branches, loops and ``.item()`` results
are specialised, and layers are flattened to primitives (``prims.add``, ``prims.matmul``).
Ops whose values only fed Python decisions (the ``x.sum() > 0`` of a branch) are dropped.
Each op node's ``meta["nn_module_stack"]`` maps the paths of the modules it ran in (the
module scope the tape records, ``encoder.layers.0.linear1``) to their class names, outermost
first, as ``tapelab.fx.Tracer`` writes it, so views group ops by module, and ``meta["source"]``
is the user's line that ran it (``file:line  code``, as tape records carry it), so an exporter
can name the line of an op it cannot lower.
Each graph is announced by the ``graph_traced`` event (``events.GraphTraced``, with the
GraphModule) while anyone subscribes to it.

What the example fixed is written into the graph as its first node, a guard on every
input's shape and dtype (and on the value of non-tensor inputs). Calling the result with
inputs that differ raises ``GuardError`` naming the input and what changed. Branches on
tensor *values* are not guarded: the graph replays the example's branch.

An in-place op on an intermediate result (``nn.ReLU(inplace=True)``, ``out += identity``) is
recorded functionally: later reads of that tensor read the op's node. Not supported: in-place
mutation of an input, a parameter or buffer, or through a view, after it was recorded
(``TraceError``; so BatchNorm in training mode, whose running statistics are updated in place,
must be traced in eval mode), and fresh randomness: tensors drawn outside the dispatcher during the run
(``randn``, dropout masks) are recorded as constants and replayed as drawn.

>>> def f(x):
...     return x.relu() if x.shape[0] > 2 else x.sigmoid()
>>> gm = tapelab.fx.trace_from_tape(f, tapelab.randn(4, 3))
>>> gm(tapelab.randn(2, 3))
GuardError: trace_from_tape guard failed for input 'x': traced with shape (4, 3), called with shape (2, 3) ...
"""
from __future__ import annotations

import inspect
import operator
import sys
from typing import Any, Callable

from ..base import events
from ..core.dispatch import STATE, Mode, eager
from ..nn.modules.module import Module
from ..tape import source_line
from ..core.tensor import Tensor
from .graph import Graph
from .graph_module import GraphModule
from .node import Node, has_side_effect, map_aggregate
from .prims import prims
from .proxy import TraceError

__all__ = ["trace_from_tape", "GuardError", "guard_inputs"]


class GuardError(RuntimeError):
    """An input differs from the example a ``trace_from_tape`` graph was specialised to."""


@has_side_effect
def guard_inputs(specs: tuple, *inputs) -> None:
    """Check ``inputs`` against ``specs``: ``(name, "tensor", shape, dtype)`` or ``(name, "value", v)``."""
    for spec, value in zip(specs, inputs):
        name, kind = spec[0], spec[1]
        if kind == "tensor":
            shape, dtype = spec[2], spec[3]
            if not isinstance(value, Tensor):
                raise GuardError(f"trace_from_tape guard failed for input '{name}': traced with a Tensor, "
                                 f"called with {type(value).__name__}")
            got_shape, got_dtype = tuple(value.shape), value.dtype.name
            if got_shape != shape or got_dtype != dtype:
                what = " and ".join(w for w, bad in (
                    (f"shape {got_shape}", got_shape != shape), (f"dtype {got_dtype}", got_dtype != dtype)) if bad)
                raise GuardError(f"trace_from_tape guard failed for input '{name}': traced with shape {shape} "
                                 f"and dtype {dtype}, called with {what}. The graph was specialised to the "
                                 "example (control flow, loops, shapes); trace again with an input like this one")
        elif value != spec[2]:
            raise GuardError(f"trace_from_tape guard failed for input '{name}': traced with value {spec[2]!r}, "
                             f"called with {value!r}; trace again with this value")


class _Recorder(Mode):
    """The dispatcher mode: runs each op eagerly and appends it to the graph."""

    def __init__(self, graph: Graph, params: dict[int, str]):
        self.graph = graph
        self.nodes: dict[int, tuple[Node, int]] = {}      # id(tensor) -> (node, version when bound)
        self.by_data: dict[int, Node] = {}                 # id(array) -> node, to follow aliases (detach)
        self.keep: list = []                               # keeps ids unique while recording
        self.owner: dict[int, Tensor] = {}                 # id(array) -> the tensor bound with it
        self.params = params
        self.constants: dict[str, Any] = {}
        self.classes: dict[str, str] = {}                  # module path -> class name, as modules run

    def call_module(self, module, forward, args: tuple, kwargs: dict):
        path = module.__dict__.get("_tape_name")           # the scope name, set by the outermost call
        if path:
            self.classes[path] = type(module).__qualname__
        return forward(*args, **kwargs)

    def _scoped(self, node: Node) -> Node:
        """Write the module scope the op runs in into ``node.meta["nn_module_stack"]``, its line into ``source``."""
        node.meta["source"] = source_line(sys._getframe(2))
        paths = [p for p in STATE.module_path if p]
        if paths:
            node.meta["nn_module_stack"] = {p: self.classes.get(p, "") for p in paths}
        return node

    def bind(self, t: Tensor, node: Node) -> None:
        self.nodes[id(t)] = (node, t._vc[0])
        self.by_data[id(t._data)] = node
        self.owner.setdefault(id(t._data), t)
        self.keep.append(t)

    def write(self, target, src) -> None:
        """An in-place op is writing ``src`` (its recorded result) into ``target``: when ``target`` is an
        intermediate's whole array (no view, no input, parameter or buffer), later reads get that node."""
        t, node = self.owner.get(id(target)), self.by_data.get(id(src))
        if t is None or node is None or t._base is not None or self.nodes[id(t)][0].op != "call_function":
            return
        self.nodes[id(t)] = (node, t._vc[0] + 1)         # the version the write is about to make
        self.by_data[id(target)] = node

    def arg(self, a):
        def one(x):
            if not isinstance(x, Tensor):
                return x
            if id(x) in self.nodes:
                node, version = self.nodes[id(x)]
                if x._vc[0] != version:
                    raise TraceError(f"trace_from_tape: tensor {node.name} was modified in place after it was "
                                     "recorded; in-place ops cannot be replayed from a graph, use out-of-place ops")
                return node
            if id(x._data) in self.by_data:
                node = self.by_data[id(x._data)]
                alias = self.graph.call_method("detach", (node,)) if not x.requires_grad else node
                self.bind(x, alias)
                return alias
            return self._constant(x)
        return map_aggregate(a, one)

    def _constant(self, t: Tensor) -> Node:
        name = self.params.get(id(t))
        if name is None:
            name = f"_tensor_constant{len([k for k in self.constants if k.startswith('_tensor_constant')])}"
        self.constants[name] = t
        node = self.graph.get_attr(name)
        self.bind(t, node)
        return node

    def dispatch(self, op, args, params):
        out = eager(op, args, params)
        node = self._scoped(self.graph.call_function(getattr(prims, op.name), self.arg(args), self.arg(params)))
        if isinstance(out, tuple):
            for i, o in enumerate(out):
                self.bind(o, self._scoped(self.graph.call_function(operator.getitem, (node, i))))
        else:
            self.bind(out, node)
        return out


def trace_from_tape(fn: Module | Callable, *example_args, announce: bool = True) -> GraphModule:
    """Run ``fn(*example_args)`` eagerly and return the graph of the ops it performed.

    Args:
        fn: a module or function of tensors (and plain values, which get fixed).
        example_args: the inputs to run; every tensor input becomes a placeholder.
        announce: emit ``graph_traced`` (False for a library's internal traces, such as the
            compiler's backward of a fused group, which are not the user's graphs).
    Returns:
        A ``GraphModule`` whose first node guards the inputs' shapes and dtypes and whose
        other nodes call ``prims``; parameters of ``fn`` (a module) are shared, so
        gradients reach them.
    Raises:
        GuardError: later, when the GraphModule is called with inputs unlike the example.
    """
    target = type(fn).forward if isinstance(fn, Module) else fn
    try:
        names = [p for p in inspect.signature(target).parameters][1 if isinstance(fn, Module) else 0:]
    except (TypeError, ValueError):
        names = []
    names = [names[i] if i < len(names) else f"arg{i}" for i in range(len(example_args))]
    params = {id(p): n for n, p in fn.named_parameters()} if isinstance(fn, Module) else {}
    if isinstance(fn, Module):
        params.update({id(b): n for n, b in fn.named_buffers()})
    graph = Graph()
    rec = _Recorder(graph, params)
    inputs, specs = [], []
    for name, a in zip(names, example_args):
        node = graph.placeholder(name)
        inputs.append(node)
        if isinstance(a, Tensor):
            rec.bind(a, node)
            specs.append((name, "tensor", tuple(a.shape), a.dtype.name))
        else:
            specs.append((name, "value", a))
    graph.create_node("call_function", guard_inputs, (tuple(specs), *inputs), name="guard")
    with rec:
        out = fn(*example_args)
    graph.output(rec.arg(out))
    graph.eliminate_dead_code()   # ops whose values only fed Python decisions (``if x.sum() > 0``)
    gm = GraphModule(dict(rec.constants), graph, f"{getattr(fn, '__name__', type(fn).__name__)}_from_tape")
    if isinstance(fn, Module):
        gm.train(fn.training)
    if announce and events.has_subscribers("graph_traced"):
        events.emit("graph_traced", events.GraphTraced(graph, gm, fn, type(gm).__name__, "trace_from_tape"))
    return gm
