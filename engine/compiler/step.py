"""A compiled call as one autograd node: a generated forward over arrays and one traced joint backward.

The lowered graph runs each op through the dispatcher and its backward through the engine's walk
over one node per op: a dispatch-bound step (tiny_mlp, 8x32 through four layers) spends most of its
time there, not in arithmetic. As AOT autograd does, ``build`` traces the call's forward and its
backward together once (``trace_from_tape`` while ``autograd.grad`` walks the ops' declared vjps, so
the backward is the ops' own formulas in the engine's order), splits that joint graph at the
output (what the backward reads from the forward is saved), fuses each half's elementwise groups
(``fused.lower``, several outputs per kernel) and generates two straight-line Python functions over
arrays that call each op's declared forward (``Op.fwd``) or kernel directly, with no dispatch and
no tape in between. The call is then one op, ``Step.op`` (``compiled(<Module>)``): one tape and
profiler record, one autograd node (``members`` lists its ops, ``sources`` holds the two generated
functions), whose vjp runs the generated backward and hands out every input's and parameter's
gradient at once; parameter hooks and ``.grad`` accumulation are the engine's, as for any op. The
saved arrays are the node's param, dropped by a backward that does not retain the graph. A 0-d result
whose whole joint graph is one fused loop (chain1M) runs that loop instead (``Step.unit``): the result
and its gradients for ``loss.backward()``'s cotangent 1 in one pass, which that backward hands out.

A call that returns a tuple or list of tensors (nanoGPT's ``(logits, loss)``) is one node with one
output per tensor (``output_nr`` 0..k-1, as a multi-output op, ``_StepNode``): the joint backward
takes one gradient per output, zeros for an output that got none (``loss.backward()`` alone), and
the node checks the version of each output the backward reads. The dispatcher records one result
per op, so a tape or the profiler watching such a call sees the lowered graph's ops instead.

Not built (the call runs the lowered graph, ``explain`` says why): a node that is not a declared
compute op (a state write, a random draw, a Python function), an operand the dispatcher would
promote or convert (mixed dtypes, a half-precision float), a result that is not tensors needing a
gradient (a ``None`` or a number among them, an input or its view, two views of one value), a
backward that made a tensor outside the dispatcher, a graph off the cpu.
Per call the lowered graph runs instead while a ``Mode`` watches (a tracer, a capture: they see
each op), for a dynamic entry's other sizes and for tensors moved off the cpu; a
``create_graph=True`` backward runs the graph's own ops (a differentiable gradient; one warning).
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from ..autograd.engine import _RUNNING, grad as _autograd_grad
from ..base.device import CPU
from ..base.grad_mode import STATE as GRAD, enable_grad, is_grad_enabled
from ..core.creation import ones
from ..core.dispatch import STATE, _result, apply
from ..core.node import OpNode, edge_to
from ..core.registry import REGISTRY
from ..core.tensor import Tensor
from ..fx.graph import Graph
from ..fx.graph_module import GraphModule
from ..fx.interpreter import Interpreter
from ..fx.node import Node, _get_attr_path
from ..fx.passes.fusion import op_name
from ..fx.prims import prims
from ..fx.trace_from_tape import guard_inputs, trace_from_tape
from . import fused as _fused
from .fused import TRANSCENDENTAL, FusedCall
from .plans import cat_copying, epilogues, joined_copies, linear_relu, planned, writing_into, written_into
from .pool import RELU_MAX_POOL, _Call as _PoolCall, _Unregistered

__all__ = ["Step", "build"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# factories whose values are their arguments' alone (no draw, no uninitialised memory, no data held):
# the generated forward makes them each call (nanoGPT's ``torch.arange(0, t)`` positions)
_CONSTANT_FACTORIES = frozenset({"full", "arange", "linspace", "logspace", "eye"})
_WARNED_CREATE_GRAPH: set = set()


class Unbuildable(Exception):
    """Why a call is not one node (the message is what ``explain`` reports)."""


class _StepOp(_Unregistered):
    """The step's op; ``members`` lists the ops it runs, as a ``FusedOp``'s does (tape and profiler
    records name the op, a view reads its members from ``node.op``)."""

    __slots__ = ("members",)


_UNIT = object()    # first of a ``saved`` list that ``Step._forward_unit`` filled
_HANDED = object()  # ... once a capture's backward op handed its gradients out (another backward recomputes)


def _made(saved: list) -> bool:
    """Whether ``saved`` holds ``unit``'s gradients (not the generated forward's values)."""
    return bool(saved) and (saved[0] is _UNIT or saved[0] is _HANDED)


class Step:
    """A compiled entry's call as one op: ``__call__`` takes the entry's flat arguments."""

    def __init__(self, name: str, traced, flat: tuple, members: list, fwd, bwd, tensor_at: list, attrs: list,
                 reads: list, outs: list, container):
        self.traced = traced
        # several results: their (shape, dtype) (a missing gradient's zeros) and tuple or list; None: one tensor
        self.outs, self.container = tuple(outs), container
        self.reads = tuple(reads)      # the results the backward reads (saved among its values)
        self.values = tuple(None if isinstance(a, Tensor) else a for a in flat)   # the Python values traced
        self.tensor_at, self.attrs = tensor_at, tuple(attrs)
        self.shapes = tuple(flat[i]._data.shape for i in tensor_at)
        self.members = members
        self.fwd_fn, self.bwd_fn = fwd, bwd
        self.sources = (fwd.source, bwd.source)
        # the backward reads the output itself (saved among its values): the node checks its version,
        # so an in-place write into the result before backward raises as eager's would
        self.op = _StepOp(f"compiled({name})", self._forward, self._vjp, save_output=container is None and bool(reads))
        self.op.backward_name = "CompiledFunctionBackward"     # torch's name for every compiled call's node
        self.op.members = tuple(members)
        self._backward_ops: dict = {}     # which inputs need a gradient -> the backward as one op (a capture's)
        self.unit = None     # a 0-d result's forward and backward for ``g = 1`` as one loop (``_unit_loop``)
        self._unit_op = None     # a capture's forward by ``unit`` (``_captured_unit``), made at its first use

    def __call__(self, *flat):
        tensors = [flat[i] for i in self.tensor_at]
        # a tracer sees each op, and a dynamic entry's other sizes: the lowered graph; a capture takes the
        # step whole (``Mode.whole_compiled_steps``) when it is one result
        if ((STATE.modes and (self.container is not None or not all(m.whole_compiled_steps for m in STATE.modes)))
                or tuple([t._data.shape for t in tensors]) != self.shapes):
            return self.traced.forward(*flat)
        args = (*tensors, *self.attrs)
        saved: list = []             # the forward's values the backward reads: the node's own param
        req = plain = False          # what ``_general`` checks, for these operands: then ``_result``'s node
        for t in args:
            if t._device is not CPU:            # a module moved since: its lowered graph
                return self.traced.forward(*flat)
            if t._base is not None and t._vc[0] and not t.requires_grad:
                plain = True
            if t.requires_grad:
                req = True
        if self.container is not None:
            if plain or STATE.slow:  # the dispatcher records one result per op: the lowered graph's ops
                return self.traced.forward(*flat)
            return self._results(args, req, self.fwd_fn(*[t._data for t in tensors]))
        if plain or STATE.slow:      # a stale view's refresh; a tape, the profiler: the dispatcher tells them
            if STATE.modes and req and GRAD.enabled and self.unit is not None and self.unit.out is not None:
                return apply(self._captured_unit(), *args, saved=saved)
            return apply(self.op, *args, saved=saved)
        if self.unit is not None and req and GRAD.enabled:
            out = self._forward_unit([t._data for t in tensors], saved)
        else:
            out = self._forward(np, *[t._data for t in tensors], saved=saved)
        return _result(self.op, args, {"saved": saved}, CPU, req, out)

    def _results(self, args: tuple, req: bool, values: tuple):
        """The several results of one forward, outputs 0..k-1 of one ``_StepNode`` when a gradient is
        needed (its param ``saved``: the values the backward reads)."""
        k = len(self.outs)
        vcs = [[0] for _ in range(k)]
        node = None
        if req and is_grad_enabled():
            node = _StepNode(self.op, args, {"saved": list(values[k:])},
                             tuple(edge_to(a) if a.requires_grad else None for a in args),
                             [(i, a._vc[0]) for i, a in enumerate(args)], k,
                             [(j, vcs[j], 0) for j in self.reads])
        return self.container(Tensor._wrap(v if type(v) is np.ndarray else np.asarray(v), node is not None, node, j,
                                           vcs[j], CPU) for j, v in enumerate(values[:k]))

    def _forward(self, xp, *arrays, saved: list):
        """The generated forward; the values it saves go into ``saved``, which the node keeps as its
        param (as long as the node, as an op's saved inputs: no table, no finalizer)."""
        if xp is not np:
            raise RuntimeError(f"{self.op.name}: the one-node step runs on cpu numpy arrays only")
        out, *kept = self.fwd_fn(*arrays[:len(self.tensor_at)])
        saved[:] = kept
        return out if type(out) is np.ndarray else np.asarray(out)

    def _forward_unit(self, arrays: list, saved: list):
        """The result by ``unit``'s loop, which also makes the gradients for ``g = 1``: ``saved`` holds
        ``_UNIT`` and them (``_saved`` makes the generated forward's values where another ``g`` comes)."""
        out, *grads = self.unit(*arrays, np.ones((), self.outs[0][1]))
        saved[:] = [_UNIT, *grads]
        return out if type(out) is np.ndarray else np.asarray(out)

    def _captured_unit(self) -> _StepOp:
        """The step's op for a capture (a mode taking the step whole) where ``unit`` writes into given arrays:
        its forward is ``_forward_unit_into``, so a replay runs the one loop, and the backward op the capture
        records hands out (writes in place) the gradients that loop made."""
        if self._unit_op is None:
            op = self._unit_op = _StepOp(self.op.name, self._forward_unit_into, self._vjp,
                                         save_output=self.op.save_output)
            op.backward_name, op.members = self.op.backward_name, self.op.members
        return self._unit_op

    def _forward_unit_into(self, xp, *arrays, saved: list):
        """``_forward_unit`` where ``saved`` keeps the gradients a previous call made (a captured replay's
        ``saved`` is the capture's own list): ``unit`` writes this call's into those same arrays, which the
        capture's backward op took as its outputs (the parameters' ``.grad``), so no copy follows."""
        if xp is not np:
            raise RuntimeError(f"{self.op.name}: the one-node step runs on cpu numpy arrays only")
        arrays, one = arrays[:len(self.tensor_at)], np.ones((), self.outs[0][1])
        if len(saved) > 1 and _made(saved):
            out, *grads = self.unit.out(*arrays, one, out=(np.empty((), self.outs[0][1]), *saved[1:]))
        else:
            out, *grads = self.unit(*arrays, one)
        saved[:] = [_UNIT, *grads]
        return out if type(out) is np.ndarray else np.asarray(out)

    def _unit_grads(self, g, saved: list):
        """The gradients ``unit`` made beside the forward, when ``g`` is the cotangent it assumed (1) and no
        backward took them yet; else None."""
        if len(saved) > 1 and saved[0] is _UNIT and g.dtype == self.outs[0][1] and g == 1:
            return saved[1:]
        return None

    def _handed(self, g, saved: list):
        """``_unit_grads`` for a capture's backward op, marking them taken: a second backward of the same
        forward (a retained graph) computes its own, whatever its cotangent is at a replay."""
        grads = self._unit_grads(g, saved)
        if grads is not None:
            saved[0] = _HANDED
        return grads

    def _kept(self, saved: list, arrays) -> list:
        """The generated forward's values the generated backward reads: ``saved``, or where ``unit`` ran,
        made now from the inputs (``saved`` left as it is: a replay's next forward writes into it)."""
        return self.fwd_fn(*arrays)[1:] if _made(saved) else saved

    def _saved(self, saved: list, arrays: list) -> list:
        """``saved`` as the generated backward reads it: where ``_forward_unit`` ran, the generated
        forward's values, made now from the inputs (the node checked their versions: unchanged)."""
        if _made(saved):
            saved[:] = self.fwd_fn(*arrays)[1:]
        return saved

    def _vjp(self, g, out, *inputs, saved: list):     # noqa: ARG002 - out: read through ``saved``
        """``g``: the result's gradient, or for several results the list of theirs (None: none came)."""
        if GRAD.enabled:           # create_graph=True: the gradient must itself be differentiable
            return self._members_vjp(g, inputs)
        values = [t._data for t in inputs[:len(self.tensor_at)]]
        if STATE.modes:            # a capture that takes the step whole: the backward as one op it records
            return self._backward_as_op(g, inputs, saved)
        gs = [g] if self.container is None else g
        dev = next(x for x in gs if x is not None)._device
        arrays = [x._data if x is not None else np.zeros(shape, dt) for x, (shape, dt) in zip(gs, self.outs)] \
            if self.container is not None else [g._data]
        grads = self._unit_grads(arrays[0], saved)
        if grads is not None:
            del saved[1:]          # handed out (``.grad`` may become them): a retained graph's next backward recomputes
        else:
            grads = self.bwd_fn(*arrays, *self._saved(saved, values), *values)
        walk = _RUNNING.walk
        if walk is not None and not walk.retain_graph:
            saved.clear()        # as the engine releases an op's saved inputs: the activations go now
        return tuple(None if a is None else Tensor._wrap(a if type(a) is np.ndarray else np.asarray(a),
                                                          False, None, 0, [0], dev)
                     for a in grads)

    def _backward_as_op(self, g, inputs, saved: list):
        """The generated backward dispatched as one op (``CompiledFunctionBackward``) whose results are the
        gradients of the inputs that need one; its params hold the forward's ``saved`` list itself, so a
        replay's backward reads the values that replay's forward saved."""
        mask = tuple(t.requires_grad for t in inputs)
        op = self._backward_ops.get(mask)
        if op is None:
            op = self._backward_ops[mask] = _StepOp(self.op.backward_name, self._backward_arrays, None,
                                                    save_output=False)
            op.n_extra, op.members = sum(mask) - 1, self.op.members
            if self.bwd_fn.out is not None:
                op.fwd_out = self._backward_arrays_out
        outs = apply(op, g, *inputs, saved=saved, mask=mask)
        outs = iter(outs if isinstance(outs, tuple) else (outs,))
        return tuple(next(outs) if m else None for m in mask)

    def _backward_arrays(self, xp, g, *arrays, saved: list, mask: tuple):
        """The gradients of the inputs in ``mask``: those ``unit`` made for this ``g`` (the arrays themselves:
        a capture takes them as this op's output buffers), else the generated backward's."""
        values = arrays[:len(self.tensor_at)]
        grads = self._handed(g, saved) or self.bwd_fn(g, *self._kept(saved, values), *values)
        outs = tuple(xp.zeros_like(a) if d is None else d for d, a, m in zip(grads, arrays, mask) if m)
        return outs if len(outs) > 1 else outs[0]

    def _backward_arrays_out(self, xp, g, *arrays, saved: list, mask: tuple, out: tuple):
        """``_backward_arrays`` written into ``out`` (a captured replay's gradient buffers; where ``unit``
        wrote them, those buffers are its gradients, and nothing is written); a gradient the kernel does not
        make (None) is zeroed there."""
        given = iter(out)
        full = [next(given) if m else None for m in mask]
        values = arrays[:len(self.tensor_at)]
        grads = self._handed(g, saved)
        if grads is None:
            grads = self.bwd_fn.out(g, *self._kept(saved, values), *values, out=tuple(full))
        for d, o in zip(grads, full):
            if d is None and o is not None:
                o.fill(0)
            elif o is not None and d is not o:
                np.copyto(o, d)

    def _members_vjp(self, g, inputs):
        """The traced graph's own ops and vjps, recorded for autograd (double backward)."""
        if self.op.name not in _WARNED_CREATE_GRAPH:
            _WARNED_CREATE_GRAPH.add(self.op.name)
            warnings.warn(f"tapelab.compile: create_graph=True through {self.op.name}: its gradient runs the "
                          "graph's own ops (the generated one-node backward has no derivative)", UserWarning,
                          stacklevel=2)
        flat = list(self.values)
        for i, t in zip(self.tensor_at, inputs):
            flat[i] = t
        y = self.traced(*flat)
        ys, gs = ([y], [g]) if self.container is None else zip(*[(a, b) for a, b in zip(y, g) if b is not None])
        want = [t for t in inputs if t.requires_grad]
        got = iter(_autograd_grad(list(ys), want, list(gs), create_graph=True, allow_unused=True,
                                  materialize_grads=True))
        return tuple(next(got) if t.requires_grad else None for t in inputs)


class _StepNode(OpNode):
    """The node of a step with several results: output ``j`` is result ``j``; its ``run`` hands the
    op's vjp every output's gradient at once (the engine's buffer, None where none came) and checks
    the versions of the inputs and of each result the backward reads."""

    __slots__ = ("n_outputs", "out_versions")
    plain = False

    def __init__(self, op, inputs: tuple, params: dict, edges: tuple, versions: list, n_outputs: int,
                 out_versions: list):
        super().__init__(op, inputs, params, edges, None, None, versions)
        self.n_outputs, self.out_versions = n_outputs, out_versions

    def run(self, grads):
        inputs = self.inputs
        if inputs is None:
            inputs = self._restored()      # raises: a step saves values
        for i, v in self.versions:
            if inputs[i]._vc[0] != v:
                self._check_versions()     # raises, naming the tensor
        for j, vc, v in self.out_versions:
            if vc[0] != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: output {j} of {self.name()} is at version {vc[0]}; expected version {v} instead.")
        if all(g is None for g in grads):
            return (None,) * len(self.edges)
        return self.op.vjp(list(grads), None, *inputs, **self.params)


def build(gm: GraphModule, flat: tuple, result, name: str, backend: str = "auto") -> Step:
    """The one-node step of the traced graph ``gm`` called on ``flat`` (run once more, forward and
    backward, while the joint graph is recorded; ``result`` is the traced call's own, whose shape the
    output's gradient takes); raises ``Unbuildable`` with the reason. Call it
    before ``fused.lower(gm)``: the step runs the lowered ``gm`` while a mode watches and for
    ``create_graph=True``."""
    _check_forward(gm, flat)
    tensor_at = [i for i, a in enumerate(flat) if isinstance(a, Tensor)]
    attrs = _attr_tensors(gm)
    leaves = [flat[i] for i in tensor_at] + attrs
    if not any(t.requires_grad for t in leaves):
        raise Unbuildable("one-node step: nothing requires a gradient")
    results = [result] if isinstance(result, Tensor) else list(result)
    k = len(results)
    joint = _joint(gm, flat, results, leaves)
    _save_attention_weights(joint.graph)
    _joined_slices(joint.graph)
    step_fwd, step_bwd = _split(joint, len(flat), tensor_at, k)
    fwd_gm = _lowered(joint, step_fwd, [flat[i] for i in tensor_at], backend)
    metas = _output_metas(fwd_gm)
    bwd_gm = _lowered(joint, step_bwd, [*metas, *[_fused._meta(flat[i]) for i in tensor_at]], backend)
    members = [_label(n) for n in fwd_gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    # a result the backward reads, itself or through a view either way (the memory is shared: eager's
    # version counter is, so an in-place write into it raises there)
    roots = {_view_root(n) for n in step_fwd[2][k:]}
    reads = [j for j, o in enumerate(step_fwd[2][:k]) if _view_root(o) in roots]
    container = None if isinstance(result, Tensor) else type(result)
    step = Step(name, gm, tuple(flat), members, _generate(fwd_gm, "step_forward"), _generate(bwd_gm, "step_backward"),
                tensor_at, attrs, reads, [(tuple(m.shape), np.dtype(m.dtype.np)) for m in metas[:k]], container)
    if container is None and result.ndim == 0:
        step.unit = _unit_loop(joint, [flat[i] for i in tensor_at], len(flat), tensor_at, result, backend)
    return step


_LOOP_EXTRAS = frozenset({"sum", "mean", "expand"})    # what one fused loop takes beside elementwise ops


def _unit_loop(joint, tensors: list, n_flat: int, tensor_at: list, result: Tensor, backend: str):
    """The joint graph of a 0-d result as one generated function ``(inputs, g) -> (result, *gradients)``
    where it lowers to one fused loop (chain1M: ``sigmoid(tanh(x*w+1)*x).sum()``), else None. The loop
    computes the backward beside the forward in registers: with ``g = 1``, ``loss.backward()``'s own
    cotangent, its gradients are the generated backward's (the same ops on the same float32 values:
    numba's loops contract no multiply-add), without writing the saved activations and reading them
    back in a second pass (1M elements: one ~1.4 ms loop against 1.25 + 0.6 ms)."""
    places = [n for n in joint.graph.nodes if n.op == "placeholder"]
    outputs = list(joint.graph.output_node().args[0])
    needed = _ancestors([o for o in outputs if isinstance(o, Node)])   # not the input guards (as ``_split``)
    nodes = [n for n in joint.graph.nodes if n in needed and n.op != "placeholder"]
    inputs = [places[i] for i in tensor_at] + [places[n_flat]]
    if any(i.op == "placeholder" and i not in inputs for n in nodes for i in n.all_input_nodes):
        return None      # a number argument read as a value: the two generated loops take it
    for n in nodes:      # first the ops alone: no lowering (and no kernel built) for a graph with a product
        op = REGISTRY.get(op_name(n) or "") if n.op == "call_function" and n.target not in (
            operator.getitem, guard_inputs) else None
        if n.op == "call_function" and op is not None and not op.elementwise and op.name not in _LOOP_EXTRAS:
            return None
    examples = [*map(_fused._meta, tensors), _fused.empty((), dtype=result.dtype, device="meta")]
    gm = _lowered(joint, (inputs, nodes, outputs), examples, backend)
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    if len(calls) != 1 or not isinstance(calls[0].target, FusedCall):
        return None
    return _generate(gm, "step_unit")


def _view_root(n: Node) -> Node:
    """The node whose value ``n`` views (itself when it is no view)."""
    while n.args and isinstance(n.args[0], Node) and (
            (n.op == "call_method" and n.target == "detach") or (n.op == "call_function" and n.target not in (
                operator.getitem, guard_inputs) and getattr(REGISTRY.get(op_name(n)), "is_view", False))):
        n = n.args[0]
    return n


def _label(n: Node) -> str:
    return repr(n.target) if isinstance(n.target, (FusedCall, _PoolCall)) else op_name(n)


def _check_forward(gm: GraphModule, flat: tuple) -> None:
    """Raise ``Unbuildable`` when the traced graph holds anything but declared compute ops."""
    out = gm.graph.output_node().args[0]
    outs = [out] if isinstance(out, Node) else list(out) if type(out) in (tuple, list) and out else [None]
    if not all(isinstance(o, Node) for o in outs):
        raise Unbuildable("one-node step: the call returns something else than a tensor or a tuple or list of them")
    # a result is a new tensor of the node's: one that shares an input's or another result's memory would
    # lose the view's autograd link (an in-place write into it)
    roots = [_view_root(o) for o in outs]
    if len(set(roots)) < len(roots) or any(r.op in ("placeholder", "get_attr") for r in roots):
        raise Unbuildable("one-node step: a result is an input or a view of one, or two results share memory")
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr", "output") or n.target is guard_inputs or n.target is operator.getitem:
            continue
        if n.op == "call_method" and n.target == "detach":
            continue
        _declared(n)
    if any(isinstance(a, Tensor) and a.device.type != "cpu" for a in flat):
        raise Unbuildable("one-node step: an input is not on the cpu")


def _declared(n: Node):
    """The registered op a node calls, or ``Unbuildable``."""
    name = op_name(n) if n.op == "call_function" else None
    op = REGISTRY.get(name or "")
    if op is None:
        label = getattr(n.target, "__name__", str(n.target))
        raise Unbuildable(f"one-node step: {n.name} calls {label}, not a declared op")
    if op.kind != "compute" and op.name not in _CONSTANT_FACTORIES:
        raise Unbuildable(f"one-node step: {n.name} is a {op.kind} op ({op.name}), not a compute op")
    return op


def _attr_tensors(gm) -> list:
    """The tensors the graph reads as attributes, once each, in graph order."""
    out, seen = [], set()
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            t = _get_attr_path(gm, n.target)
            if isinstance(t, Tensor) and id(t) not in seen:
                seen.add(id(t))
                out.append(t)
    return out


def _joint(gm, flat: tuple, results: list, leaves: list):
    """The forward and backward recorded together: placeholders ``flat`` then each result's gradient,
    the output ``(*results, grad of each leaf or None)``, the attributes as constants (the same tensors).
    The trace differentiates hook-free aliases of the leaves (a hook must neither run at compile
    time nor be baked into the graph: the engine runs it each step)."""
    if not all(isinstance(r, Tensor) and r.requires_grad and np.dtype(r.dtype.np) in _FLOATS for r in results):
        raise Unbuildable("one-node step: a result is not a floating tensor that requires grad")
    k = len(results)
    alias = {id(t): t.detach().requires_grad_(t.requires_grad) for t in leaves}
    real = {id(a): t for t, a in ((t, alias[id(t)]) for t in leaves)}
    args = [alias.get(id(a), a) if isinstance(a, Tensor) else a for a in flat]
    need = [alias[id(t)] for t in leaves if t.requires_grad]

    def joint(*xs):
        inputs, gs = xs[:-k], xs[-k:]
        with enable_grad():
            out = _Aliased(gm, alias).run(*inputs)
        outs = [out] if isinstance(out, Tensor) else list(out)
        return (*outs, *_autograd_grad(outs, need, list(gs), allow_unused=True))
    gs = [ones(tuple(r.shape), dtype=r.dtype) for r in results]
    joint_gm = trace_from_tape(joint, *args, *gs, announce=False)
    for n in joint_gm.graph.nodes:
        if n.op == "get_attr":
            t = _get_attr_path(joint_gm, n.target)
            if isinstance(t, Tensor) and id(t) in real:
                setattr(joint_gm, n.target, real[id(t)])     # the step reads the parameter itself, live
            elif isinstance(t, Tensor) and t.ndim:
                raise Unbuildable(f"one-node step: the backward read a tensor made outside the dispatcher ({n.name})")
    # the gradients of leaves that do not require grad are None: the output lists only needed ones
    output = joint_gm.graph.output_node()
    vals = list(output.args[0])
    got = iter(vals[k:])
    output.args = ((*vals[:k], *[next(got) if t.requires_grad else None for t in leaves]),)
    return joint_gm


def _save_attention_weights(graph: Graph) -> None:
    """Each attention whose backward the joint graph recomputes from ``q, k, v`` keeps its weights
    instead, as eager does while nobody watches (``_fused_attention``: the trace records the one
    op, whose backward recomputes ``q kᵀ`` and the softmax): the forward becomes
    ``scaled_dot_product_attention_forward`` (the output and the weights) and the backward reads
    those weights (``saved=True``). The same arrays from the same calls, so every value is
    unchanged; the backward loses a batched GEMM and a softmax (a Transformer block's ~0.2 ms)."""
    forwards = {}
    for n in graph.nodes:
        if n.op == "call_function" and op_name(n) == "scaled_dot_product_attention":
            forwards[(n.args, tuple(n.kwargs.items()))] = n
    weights: dict = {}
    for n in list(graph.nodes):
        if n.op != "call_function" or op_name(n) != "scaled_dot_product_attention_backward" or "saved" in n.kwargs:
            continue
        f = forwards.get((n.args[1:], tuple(n.kwargs.items())))
        if f is None:
            continue
        if f not in weights:
            with graph.inserting_after(f):
                both = graph.call_function(prims.scaled_dot_product_attention_forward, f.args, dict(f.kwargs))
            with graph.inserting_after(both):
                out = graph.call_function(operator.getitem, (both, 0))
            with graph.inserting_after(out):
                weights[f] = graph.call_function(operator.getitem, (both, 1))
            f.replace_all_uses_with(out)
            graph.erase_node(f)
        n.args = (*n.args, weights[f])
        n.kwargs = {**n.kwargs, "saved": True}


def _joined_slices(graph: Graph) -> None:
    """A split's backward as one ``cat``: the trace records ``q, k, v = qkv.split(d, dim=2)`` as three
    slices, so the joint backward held three ``slice_backward`` (each a zero array of the whole shape
    with one gradient written in) and the adds summing them, three full-size arrays made, filled and
    read again (a GPT block's qkv: 0.33 ms of a 13 ms step). Where an add tree's leaves are
    ``slice_backward`` values used only there, of one shape, whose slices of one dim tile it, the tree
    is ``cat`` of their gradients in order: the same values (each element is its one gradient; the
    sum also turned a -0.0 gradient into 0.0, as eager's one-buffer split backward does not)."""
    def is_add(n: Node) -> bool:
        return (n.op == "call_function" and op_name(n) == "add" and len(n.args) == 2
                and all(isinstance(a, Node) for a in n.args) and n.kwargs in ({}, {"alpha": 1}))
    for n in list(graph.nodes):
        if not is_add(n):
            continue
        adds, leaves, stack = [n], [], list(n.args)
        while stack:
            a = stack.pop(0)
            if is_add(a) and len(a.users) == 1:
                adds.append(a)
                stack.extend(a.args)
            else:
                leaves.append(a)
        if not all(op_name(a) == "slice_backward" and len(a.users) == 1 and len(a.args) == 1 for a in leaves):
            continue
        shape = leaves[0].kwargs.get("shape")
        spans = []
        for a in leaves:
            key = a.kwargs.get("key")
            if a.kwargs.get("shape") != shape or type(key) is not tuple or not key:
                break
            d = len(key) - (2 if key[-1] is Ellipsis else 1)
            cut = key[d]
            if (type(cut) is not slice or cut.step not in (None, 1) or d >= len(shape)
                    or any(k != slice(None) for k in key[:d])):
                break
            start, stop, _ = cut.indices(shape[d])
            spans.append((d, start, stop, a))
        else:
            spans.sort(key=lambda t: t[1])
            dims = {t[0] for t in spans}
            ends = [t[1] for t in spans[1:]] == [t[2] for t in spans[:-1]]
            if len(dims) == 1 and ends and spans[0][1] == 0 and spans[-1][2] == shape[spans[0][0]]:
                with graph.inserting_before(n):
                    cat = graph.call_function(prims.cat, tuple(t[3].args[0] for t in spans),
                                              {"dim": spans[0][0], "skip": False})
                n.replace_all_uses_with(cat)
                for a in adds + [t[3] for t in spans]:
                    graph.erase_node(a)


class _Aliased(Interpreter):
    """Runs the traced graph with its attribute tensors replaced by their aliases."""

    def __init__(self, gm, alias: dict):
        super().__init__(gm)
        self.alias = alias

    def get_attr(self, target, args, kwargs):
        t = super().get_attr(target, args, kwargs)
        return self.alias.get(id(t), t)


def _split(joint, n_flat: int, tensor_at: list, k: int):
    """The joint graph's forward and backward, each ``(inputs, nodes, outputs)`` in graph order: the
    forward returns its ``k`` results and the values the backward reads (saved), the backward takes
    the results' gradients, those values and the tensor inputs, and returns one gradient per leaf."""
    places = [n for n in joint.graph.nodes if n.op == "placeholder"]
    output = joint.graph.output_node()
    outs, grads = list(output.args[0][:k]), output.args[0][k:]
    fwd = _ancestors(outs)
    # a forward op's other results (an attention's weights, ``_save_attention_weights``) are the
    # forward's: the backward reads them as saved values, not the op's tuple
    fwd |= {n for n in joint.graph.nodes if n.target is operator.getitem and n.args[0] in fwd}
    bwd = _ancestors([g for g in grads if isinstance(g, Node)]) - fwd
    order = {n: i for i, n in enumerate(joint.graph.nodes)}
    fwd_nodes = sorted((n for n in fwd if n.op not in ("placeholder",)), key=order.__getitem__)
    bwd_nodes = sorted((n for n in bwd if n.op not in ("placeholder",)), key=order.__getitem__)
    inputs = [places[i] for i in tensor_at]
    again = _recomputed(fwd, bwd_nodes, outs, set(inputs), order)
    if again:
        bwd_nodes = sorted({*bwd_nodes, *again}, key=order.__getitem__)
    saved = sorted({i for n in bwd_nodes for i in n.all_input_nodes
                    if i in fwd and i not in again and i.op not in ("placeholder", "get_attr")}, key=order.__getitem__)
    for n in (*fwd_nodes, *bwd_nodes):
        if n.op == "call_function" and n.target not in (operator.getitem, guard_inputs):
            _declared(n)
    gnodes = places[n_flat:n_flat + k]
    return ((inputs, fwd_nodes, [*outs, *saved]),
            ([*gnodes, *saved, *inputs], bwd_nodes, [g if isinstance(g, Node) else None for g in grads]))


def _recomputed(fwd: set, bwd_nodes: list, outs: list, inputs: set, order: dict) -> set:
    """The forward values the backward computes again instead of reading them saved: an elementwise op
    without a transcendental function (mul, add, sub, div), read only by elementwise ops on both sides
    (so no op needs it as an array in the forward: the fused kernel keeps it in a register) and made
    from values the backward has anyway (the tensor ``inputs``, the parameters, values saved for
    another reader, or others recomputed). The saved set never grows; the same ops on the same
    values, so the same floats. A GPT block's tanh GELU saved six arrays of its fused kernel (a
    write each in the forward, a read in the backward): it now saves two, as AOT autograd's
    partitioner recomputes the cheap ones (chain kernels of mul and add measured 3x faster
    recomputed than read back, ``frontend._recompute_costly``)."""
    def cheap(n: Node) -> bool:
        op = REGISTRY.get(op_name(n) or "") if n.op == "call_function" and n.target is not operator.getitem else None
        return op is not None and op.elementwise and op.kind == "compute" and not op.n_extra \
            and op.name not in TRANSCENDENTAL
    results = set(outs)
    readers = {}
    for n in bwd_nodes:
        for i in n.all_input_nodes:
            if i in fwd and i.op not in ("placeholder", "get_attr"):
                readers.setdefault(i, []).append(n)
    again: set = set()
    for s in sorted(readers, key=order.__getitem__):
        if (s not in results and cheap(s) and all(cheap(u) for u in readers[s])
                and all(cheap(u) for u in s.users if u in fwd)
                and all(i in inputs or i.op == "get_attr" or i in readers or i in again for i in s.all_input_nodes)):
            again.add(s)
    return again


def _ancestors(roots: list) -> set:
    seen, stack = set(), list(roots)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def _lowered(joint, part: tuple, examples: list, backend: str) -> GraphModule:
    """One half of the joint graph as its own GraphModule, its elementwise groups fused (``lower``
    propagates the examples' shapes through it: each node's ``tensor_meta``)."""
    inputs, nodes, outputs = part
    graph = Graph()
    env: dict = {}
    for n in inputs:
        env[n] = graph.placeholder(n.name)
    for n in nodes:
        for i in n.all_input_nodes:
            if i not in env and i.op == "get_attr":
                env[i] = graph.get_attr(i.target)
        if n.op == "get_attr":
            env[n] = env.get(n) or graph.get_attr(n.target)
            continue
        env[n] = graph.node_copy(n, env.__getitem__)
    for o in outputs:
        if isinstance(o, Node) and o not in env and o.op == "get_attr":
            env[o] = graph.get_attr(o.target)
    graph.output(tuple(env[o] if isinstance(o, Node) else None for o in outputs))
    gm = GraphModule(joint, graph, "step")
    if _fused._expands(gm):
        # a sum's gradient expanded to the loop's shape: its kernel reads the 0-d gradient as a scalar
        # (a stride-0 operand was copied whole before the loop: 4 MB for chain1M's backward)
        _fused._fold_expands(gm, examples)
    gm = _fused.lower(gm, examples, differentiable=False, backend=backend, on_cpu=True,
                      codegen=False)
    for n in gm.graph.nodes:
        _check_operands(n)
    return gm


def _output_metas(gm: GraphModule) -> list:
    """The meta tensors of a lowered graph's outputs (the forward half's: the backward's examples)."""
    return [_fused.empty(tuple(m.shape), dtype=m.dtype, device="meta")
            for m in (o.meta["tensor_meta"] for o in gm.graph.output_node().args[0])]


def _check_operands(n: Node) -> None:
    """``Unbuildable`` when the dispatcher would promote or convert an operand of ``n`` (the generated
    code hands arrays and numbers to the forward as they are; a fused kernel takes its own dtypes)."""
    if n.op != "call_function" or n.target in (operator.getitem, guard_inputs) or isinstance(
            n.target, (FusedCall, _PoolCall)):
        return
    op = REGISTRY[op_name(n)]
    dts = []
    for a in (*n.args, *n.kwargs.values()):
        if isinstance(a, Node):
            m = a.meta.get("tensor_meta")
            if m is None or type(m) is tuple:
                continue
            dts.append(np.dtype(m.dtype.np))
        elif isinstance(a, (list, tuple)) and any(isinstance(x, Node) for x in a):
            raise Unbuildable(f"one-node step: {n.name} ({op.name}) takes a list of tensors")
    for dt in dts:
        if dt.kind in "fc" and dt not in _FLOATS:
            raise Unbuildable(f"one-node step: {n.name} ({op.name}) reads {dt}: the dispatcher converts half floats")
    if op.promote is not None:
        nums = [a for a in n.args if type(a) in (int, float, bool)]
        if len(set(dts)) > 1 or (dts and nums and dts[0].kind != "f"):
            raise Unbuildable(f"one-node step: {n.name} ({op.name}) needs promotion ({', '.join(map(str, dts))})")


class _Generated:
    """A generated function and its source (``source``, for the views and explain); ``out``: the same
    function writing its results into given arrays, where one fused kernel makes them all (else None)."""

    __slots__ = ("fn", "source", "out")

    def __init__(self, fn, source: str, out=None):
        self.fn, self.source, self.out = fn, source, out

    def __call__(self, *a):
        return self.fn(*a)


def _generate(gm: GraphModule, fname: str) -> "_Generated":
    """Straight-line Python over arrays: each node calls its op's declared forward (or the fused
    kernel's loop) on the arrays its inputs computed. The placeholders come first, then the
    attributes' arrays (read from the tensors at each call: an optimizer's in-place step is seen)."""
    names: dict = {}
    glob: dict = {"np": np, "_asarray": np.asarray, "_ndarray": np.ndarray}
    params, lines, attrs = [], [], []
    kernel_line: dict = {}      # a fused kernel's node -> (its line's index, the call without ``)``)
    picks: dict = {}            # a getitem node -> (the kernel node, output index)
    k = 0
    absorbed = epilogues(gm.graph.nodes, op_name)            # relu node -> the linear node that makes it
    made_with = {lin: relu for relu, lin in absorbed.items()}
    joins = joined_copies(gm.graph.nodes, op_name)            # cat node -> its inputs' reshapes it absorbs
    copied = {a for cat, parts in joins.items() for a, p in zip(cat.args, parts) if p is not None}
    into = written_into(gm.graph.nodes, op_name)   # cat node -> (the op writing its parts, the views between, places)
    writers = {producer: cat for cat, (producer, _, _) in into.items()}
    deferred = {n: cat for cat, (_, chain, _) in into.items() for n in chain}
    held: dict = {cat: [] for cat in into}         # a written cat's lines: run where the op did not write

    def const(value) -> str:
        nonlocal k
        k += 1
        glob[f"c{k}"] = value
        return f"c{k}"

    def ref(a) -> str:
        if isinstance(a, Node):
            return names[a]
        if a is None or type(a) in (bool, int, str):
            return repr(a)
        return const(a)
    for n in gm.graph.nodes:
        v = f"v{len(names)}"
        emit = held[deferred[n]] if n in deferred else held[n] if n in into else lines
        if n.op == "placeholder":
            names[n] = v
            params.append(v)
        elif n.op == "get_attr":
            names[n] = v
            attrs.append((v, _get_attr_path(gm, n.target)))
        elif n.op == "call_method" and n.target == "detach":
            names[n] = names[n.args[0]]
        elif n.op == "call_function" and n.target is operator.getitem:
            names[n] = v
            picks[n] = (n.args[0], n.args[1])
            emit.append(f"{v} = {names[n.args[0]]}[{n.args[1]}]")
        elif n in absorbed:
            names[n] = names[absorbed[n]]
        elif n in copied:                  # the cat reading it copies its source
            names[n] = names[n.args[0]]
        elif n.op == "call_function":
            names[n] = v
            args = ", ".join(ref(a) for a in n.args)
            kwargs = "".join(f", {key}={ref(val)}" for key, val in n.kwargs.items())
            if isinstance(n.target, FusedCall):
                op = n.target.op
                run = const(op._runner("cpu"))
                kernel_line[n] = (len(lines), f"{v} = {run}({args}", op.n_extra + 1)
                lines.append(f"{v} = {run}({args})" + ("" if op.n_extra else "[0]"))
                continue
            op = RELU_MAX_POOL if isinstance(n.target, _PoolCall) else REGISTRY[op_name(n)]
            f = const(linear_relu(op.fwd, REGISTRY["relu"].fwd) if n in made_with
                      else cat_copying(op.fwd, joins[n]) if n in joins
                      else _writing(op.fwd, writers[n], into[writers[n]][2]) if n in writers else planned(op))
            emit.append(f"{v} = {f}(np, {args}{kwargs})" if args else f"{v} = {f}(np{kwargs})")
            if not op.n_extra:
                # as the dispatcher's ``_result``: a numpy scalar from a reduction becomes an array
                emit.append(f"if type({v}) is not _ndarray and not hasattr({v}, '__dlpack__'): {v} = _asarray({v})")
            if n in into:
                made = f"{names[into[n][0]]}[-1]"
                lines.extend([f"if {made} is not None:", f"    {v} = {made}", "else:"]
                             + [f"    {line}" for line in held[n]])
        elif n.op == "output":
            lines.append("return (" + "".join(f"{ref(o)}, " for o in n.args[0]) + ")")
            results = n.args[0]
    head = ", ".join(params + [a for a, _ in attrs])
    # attribute arrays are read from their tensors each call; the generated function takes them last
    src = f"def {fname}({head}):\n" + "".join(f"    {line}\n" for line in lines)
    out_src = _out_variant(fname, head, lines, results, kernel_line, picks)
    code = compile(src + (out_src or ""), f"<tapelab.compile {fname}>", "exec")
    exec(code, glob)
    fn, fn_out = glob[fname], glob.get(fname + "_out")
    tensors = tuple(t for _, t in attrs)
    if not tensors:
        return _Generated(fn, src, fn_out)
    return _Generated(lambda *a: fn(*a, *[t._data for t in tensors]), src,
                      fn_out and (lambda *a, out: fn_out(*a, *[t._data for t in tensors], out=out)))


def _writing(op_fwd, cat: Node, places: tuple):
    """``op_fwd`` writing its gradients into the parts of ``cat``'s result (``plans.writing_into``)."""
    return writing_into(op_fwd, tuple(cat.meta["tensor_meta"].shape), _fused._np_dtype(cat.meta["tensor_meta"]),
                        places)


def _out_variant(fname: str, head: str, lines: list, results, kernel_line: dict, picks: dict) -> str | None:
    """``<fname>_out(..., out)``: the function with its one fused kernel writing into ``out`` (one array
    per result, None for a result not wanted, which the kernel then allocates), when every array result is
    an output of that one kernel, each of its outputs once (a captured replay's backward then writes the
    gradients into their buffers instead of copying them there); else None."""
    at = {}                                  # kernel output index -> result position
    kernels = set()
    for j, r in enumerate(results):
        if r is None:
            continue
        node, idx = picks.get(r, (r, 0))
        if node not in kernel_line or idx in at:
            return None
        kernels.add(node)
        at[idx] = j
    if len(kernels) != 1:
        return None
    (node,) = kernels
    i, call, n_out = kernel_line[node]
    if sorted(at) != list(range(n_out)):
        return None
    outs = "".join(f"out[{at[m]}], " for m in range(n_out))
    body = list(lines)
    body[i] = f"{call}, out=({outs}))" + ("" if n_out > 1 else "[0]")
    return f"def {fname}_out({head}, out):\n" + "".join(f"    {line}\n" for line in body)
