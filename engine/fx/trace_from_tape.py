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
recorded functionally: later reads of that tensor read the op's node. An in-place write into state
the graph does not own (an input, a parameter or buffer: BatchNorm's running statistics and
``num_batches_tracked`` in training mode) is recorded the same way, and the graph ends by writing
each such tensor's last value back into it (one ``write_state`` node per tensor, which dead-code
elimination keeps), so a replay updates the state as the eager call did; the ops that computed a
written value under ``no_grad`` read their differentiable inputs detached, as they did eagerly.
A train-mode BatchNorm with ``momentum=None`` reads ``num_batches_tracked`` to the host for its
cumulative-average factor; the recorder runs it as graph ops instead (``_lowerings``). Not
supported: in-place mutation through a view after it was recorded (``TraceError``), and fresh
randomness: tensors drawn outside the dispatcher during the run (``randn``, dropout masks) are
recorded as constants and replayed as drawn.

>>> def f(x):
...     return x.relu() if x.shape[0] > 2 else x.sigmoid()
>>> gm = tapelab.fx.trace_from_tape(f, tapelab.randn(4, 3))
>>> gm(tapelab.randn(2, 3))
GuardError: trace_from_tape guard failed for input 'x': traced with shape (4, 3), called with shape (2, 3) ...
"""
from __future__ import annotations

import contextlib
import gc
import inspect
import operator
import sys
from typing import Any, Callable

from ..base import events
from ..base.grad_mode import STATE as GRAD, no_grad
from ..core.dispatch import STATE, Mode, eager, module_scope
from ..nn.modules.module import Module
from ..tape import source_line
from ..core.tensor import Tensor
from .graph import Graph
from ._lowerings import module_lowering
from .graph_module import GraphModule
from .node import Node, has_side_effect, map_aggregate
from .prims import prims
from .proxy import TraceError

__all__ = ["trace_from_tape", "trace_with_output", "GuardError", "guard_inputs", "write_state"]


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


@has_side_effect
def write_state(target: Tensor, value: Tensor) -> None:
    """Write ``value`` into ``target`` (a buffer, parameter or input the traced call wrote in place)."""
    with no_grad():
        target.copy_(value)


_KEPT_READ = 1 << 16     # the most elements of a value read to the host kept for the compiler's guard


class _Recorder(Mode):
    """The dispatcher mode: runs each op eagerly and appends it to the graph."""

    def __init__(self, graph: Graph, params: dict[int, str], whole_layer_ops: bool = False):
        self.graph = graph
        self.whole_layer_ops = whole_layer_ops
        self.nodes: dict[int, tuple[Node, int]] = {}      # id(tensor) -> (node, version when bound)
        self.by_data: dict[int, Node] = {}                 # id(array) -> node, to follow aliases (detach)
        self.keep: list = []                               # keeps ids unique while recording
        self.owner: dict[int, Tensor] = {}                 # id(array) -> the tensor bound with it
        self.params = params
        self.constants: dict[str, Any] = {}
        self.classes: dict[str, str] = {}                  # module path -> class name, as modules run
        self.state: dict[int, tuple[Node, Tensor]] = {}    # id(tensor) -> (its placeholder/get_attr, tensor)
        self.no_grad: set = set()                          # nodes recorded with grad mode off
        self.grad: set = set()                             # nodes whose tensor requires grad
        self.broken: TraceError | None = None              # why recording stopped (the run goes on)
        self.reads: list = []                              # (nodes recorded before, the tensor's node, what, value)

    def host_read(self, tensor, what: str) -> None:
        """Note where in the graph a value went to the host, which tensor's and (one element's) its value
        then: the compiler splits the graph there (``trace_with_output(reads=...)``)."""
        if self.broken is None:
            try:
                node = self.arg(tensor)
            except TraceError:
                node = None
            value = tensor._data.copy() if tensor._data.size <= _KEPT_READ else None   # a large one's is not kept
            self.reads.append((len(self.graph.nodes), node, what, value))

    def call_module(self, module, forward, args: tuple, kwargs: dict):
        path = module.__dict__.get("_tape_name")           # the scope name, set by the outermost call
        if path:
            self.classes[path] = type(module).__qualname__
        lowered = module_lowering(module, args, kwargs)
        if lowered is not None:
            with module_scope(module._scope_name()):
                return lowered()
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
        if t.requires_grad:
            self.grad.add(node)
        self.keep.append(t)

    def write(self, target, src) -> None:
        """An in-place op is writing ``src`` (its recorded result) into ``target``: when ``target`` is a
        whole array (no view), later reads get that node; an input's, parameter's or buffer's last
        value is written back at the graph's end (``finish``)."""
        t, node = self.owner.get(id(target)), self.by_data.get(id(src))
        if t is None or node is None or t._base is not None:
            return
        bound = self.nodes[id(t)][0]
        if bound.op in ("placeholder", "get_attr"):
            self.state[id(t)] = (bound, t)
        elif id(t) not in self.state and bound.op != "call_function":
            return
        self.nodes[id(t)] = (node, t._vc[0] + 1)         # the version the write is about to make
        self.by_data[id(target)] = node

    def finish(self) -> None:
        """Write each mutated input, parameter or buffer back; detach what its value read with grad on."""
        for state_node, t in self.state.values():
            value = self.arg(t)
            self._detach_grad_inputs(value)
            self.graph.create_node("call_function", write_state, (state_node, value), name=f"write_{state_node.name}")

    def _detach_grad_inputs(self, value: Node) -> None:
        """The ops computing ``value`` that ran under ``no_grad`` read their other inputs detached (a
        replay runs with grad on: the running-statistics update must not enter the autograd graph)."""
        seen, stack = set(), [value]
        while stack:
            n = stack.pop()
            if n in seen or n not in self.no_grad:
                continue
            seen.add(n)
            for i in n.all_input_nodes:
                if i in self.no_grad:
                    stack.append(i)
                elif i in self.grad:
                    with self.graph.inserting_before(n):
                        n.replace_input_with(i, self.graph.call_method("detach", (i,)))

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
        if self.broken is not None:
            return out
        try:
            node_args, node_params = self.arg(args), self.arg(params)
        except TraceError as e:
            # raised after the call, not into it: a library may catch and wrap the error (einx's
            # CallOperationError), and the eager run is still right
            self.broken = e
            return out
        node = self._scoped(self.graph.call_function(getattr(prims, op.name), node_args, node_params))
        if not GRAD.enabled:
            self.no_grad.add(node)
        if isinstance(out, tuple):
            for i, o in enumerate(out):
                self.bind(o, self._scoped(self.graph.call_function(operator.getitem, (node, i))))
                if not GRAD.enabled:
                    self.no_grad.add(self.nodes[id(o)][0])
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
        TraceError: after the run, when an op read a tensor written in place after it was
            recorded (the run itself goes on eagerly to its end; ``.result`` holds its result).
        GuardError: later, when the GraphModule is called with inputs unlike the example.
    """
    return trace_with_output(fn, *example_args, announce=announce)[0]


def _kept_outside(rec: _Recorder, result) -> list[str]:
    """Where tensors the traced call made (op results other than its own result) are still held
    by Python objects outside the call: a list, a dict (an object's attribute, a module's global),
    a closure cell. Two scans of the heap (``gc.get_referrers``): what holds the tensors, then what
    holds the tuples and dicts among those, since autograd's nodes keep their inputs in them."""
    from ..core.node import Node as AutogradNode
    outputs, ours = set(), {id(rec.keep), id(rec.owner), id(rec.constants), id(rec.state), id(rec.nodes)}

    def walk(x):
        if isinstance(x, Tensor):
            outputs.add(id(x))
        elif isinstance(x, (list, tuple, dict)):
            ours.add(id(x))
            for v in (x.values() if isinstance(x, dict) else x):
                walk(v)
    walk(result)
    ours.update(id(v) for v in rec.state.values())
    ours.update(_view_dicts(rec.keep))
    made = [t for t in rec.keep if id(t) not in outputs and id(t) not in rec.state     # state written in place
            and rec.nodes[id(t)][0].op in ("call_function", "call_method")]
    if not made or _accounted(rec, made, result):
        return []
    skip = (Tensor, AutogradNode, Node, type(sys._getframe()))
    holders = [r for r in gc.get_referrers(*made) if id(r) not in ours and id(r) != id(made) and not isinstance(r, skip)]
    boxes = [r for r in holders if isinstance(r, (tuple, dict))]
    scratch = {id(made), id(holders), id(boxes)}
    owned = set()
    for owner in gc.get_referrers(*boxes) if boxes else ():
        if id(owner) not in scratch and (isinstance(owner, (AutogradNode, Node)) or id(owner) in ours):
            owned.update(id(r) for r in gc.get_referents(owner))
    made_ids = {id(t) for t in made}
    return sorted({_holder_name(r, made_ids) for r in holders
                   if not isinstance(r, (tuple, dict)) or id(r) not in owned})


def _accounted(rec: _Recorder, made: list, result) -> bool:
    """Whether every reference to each tensor in ``made`` is one the heap scans pass over: from the
    recorder's own containers, the result's, the recorded tensors (a view's base), the autograd
    nodes of those tensors and the tuples and dicts those nodes hold. Counted in those objects
    alone and compared with each tensor's reference count, so the common call (nothing kept
    outside) skips the two ``gc.get_referrers`` scans of the whole heap (50-60 ms of a
    Transformer block's 0.14 s warm compile, with numba and scipy loaded). A reference from
    anywhere else (a list, an attribute, a global, a live frame) sends the caller to the scans."""
    from ..core.node import Node as AutogradNode
    counts = dict.fromkeys(map(id, made), 0)
    roots = [rec.keep, rec.owner, rec.constants, rec.state, rec.nodes, *rec.state.values(), *rec.keep,
             *(t.__dict__ for t in rec.keep if t._base is not None)]
    stack = [result]
    while stack:                       # the result's own tuples, lists and dicts
        x = stack.pop()
        if isinstance(x, (list, tuple, dict)):
            roots.append(x)
            stack.extend(x.values() if isinstance(x, dict) else x)
    nodes = {id(t.grad_fn): t.grad_fn for t in rec.keep if isinstance(t.grad_fn, AutogradNode)}
    for node in nodes.values():
        roots.append(node)
        roots.extend(r for r in gc.get_referents(node) if type(r) in (tuple, dict))
    _count_references(roots, counts)
    roots.clear()
    # the other references are the ``made`` list's, and the loop variable's and ``sys.getrefcount``'s
    # argument's where the interpreter takes them (3.14 may borrow them): measured on an object held
    # by one list alone, in the same expression (a reference counted too few only runs the scans)
    base = min(sys.getrefcount(t) for t in [object()])
    return all(sys.getrefcount(t) - base == counts[id(t)] for t in made)


def _view_dicts(tensors: list) -> set:
    """The ids of the recorded views' instance dicts, where a view keeps its ``_base`` (a split's
    outputs hold the made tensor they alias: the call's own reference, not one kept outside)."""
    return {id(t.__dict__) for t in tensors if t._base is not None}


def _count_references(holders: list, counts: dict) -> None:
    """Add to ``counts[id(x)]`` each reference to ``x`` from ``holders`` (each holder once); a
    function of its own, so no loop variable outlives it holding a counted tensor."""
    seen = set()
    for holder in holders:
        if id(holder) not in seen:
            seen.add(id(holder))
            for r in gc.get_referents(holder):
                if id(r) in counts:
                    counts[id(r)] += 1


def _holder_name(holder, made: set) -> str:
    """``a list``, ``attribute cache of Model``, ``global cache of __main__`` or ``a closure variable``."""
    if isinstance(holder, dict):
        key = next((k for k, v in holder.items() if id(v) in made), "?")
        if "__builtins__" in holder:
            return f"global {key} of {holder.get('__name__')}"
        for owner in gc.get_referrers(holder):
            if getattr(owner, "__dict__", None) is holder:
                return f"attribute {key} of {type(owner).__name__}"
        return "a dict"
    kinds = {"list": "a list", "set": "a set", "tuple": "a tuple", "cell": "a closure variable"}
    if type(holder).__name__ in kinds:
        return kinds[type(holder).__name__]
    key = next((k for k, v in getattr(holder, "__dict__", {}).items() if id(v) in made), "?")
    return f"attribute {key} of {type(holder).__name__}"      # an object keeping its attributes inline


def _mark_segments(graph: Graph, reads: list) -> None:
    """``meta["segment"]`` of each node: how many host reads came before it was recorded."""
    cuts = [count for count, *_ in reads]
    segment = 0
    for i, node in enumerate(graph.nodes):
        while segment < len(cuts) and i >= cuts[segment]:
            segment += 1
        node.meta["segment"] = segment


def trace_with_output(fn: Module | Callable, *example_args, announce: bool = True,
                      whole_layer_ops: bool = False, kept: list | None = None,
                      reads: list | None = None, inside=None) -> tuple[GraphModule, Any]:
    """``trace_from_tape``'s graph and the eager run's own result (``compile`` returns that result
    from the tracing call, so tracing costs no second forward). ``whole_layer_ops``: record an
    ``nn.LSTM``/``nn.GRU`` layer as its whole-sequence ops (``Mode.whole_layer_ops``; ``compile``'s
    graphs run them as eager does) instead of one cell op per time step. ``kept``: a list that
    receives a description of each tensor the call made and left held outside its result (a
    list, an attribute, a global): work a graph would not replay. ``reads``: a list that receives
    ``(node, what, value)`` for each value read to the host (``.item()``, ``bool(t)``), in order; each
    node kept through dead-code elimination, and each op node's ``meta["segment"]`` the number of
    reads before it (the compiler's graph breaks). ``inside``: a context manager factory entered
    inside the recorder around the call (compile's autocast, whose casts the recorder must see)."""
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
    rec = _Recorder(graph, params, whole_layer_ops)
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
    with rec, (inside() if inside is not None else contextlib.nullcontext()):
        result = fn(*example_args)
    if rec.broken is not None:
        rec.broken.result = result       # the call's own eager result (compile returns it)
        raise rec.broken
    if kept is not None:
        kept.extend(_kept_outside(rec, result))
    out = rec.arg(result)
    rec.finish()
    graph.output(out)
    if reads is not None:
        _mark_segments(graph, rec.reads)
        reads.extend((node, what, value) for _, node, what, value in rec.reads)
        read_nodes = {node for _, node, _, _ in rec.reads}
        graph.eliminate_dead_code(lambda n: n in read_nodes or n.is_impure())
    else:
        graph.eliminate_dead_code()   # ops whose values only fed Python decisions (``if x.sum() > 0``)
    gm = GraphModule(dict(rec.constants), graph, f"{getattr(fn, '__name__', type(fn).__name__)}_from_tape")
    if isinstance(fn, Module):
        gm.train(fn.training)
    if announce and events.has_subscribers("graph_traced"):
        events.emit("graph_traced", events.GraphTraced(graph, gm, fn, type(gm).__name__, "trace_from_tape"))
    return gm, result
