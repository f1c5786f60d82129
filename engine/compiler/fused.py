"""A fusion group as one op: ``FusedOp`` runs the group's kernel forward and its backward.

``lower(gm)`` replaces each fusible group of a traced graph by one ``FusedOp`` call. The op is
an ``Op`` that is not in the registry (it exists per compiled graph): the dispatcher, the
tape, the profiler and capture treat it as any primitive, under the name
``fused(mul, add, tanh)``. Its vjp is itself compiled from the members' declarations: on the
first backward the group is run eagerly with ``trace_from_tape`` watching while
``autograd.grad`` walks the members' own vjps, and that graph (recompute, elementwise
gradient chain, ``sum_to`` for broadcast inputs) is lowered the same way, its elementwise
part into kernels with several outputs.
"""
from __future__ import annotations

import hashlib
import time
import warnings
from operator import itemgetter

import numpy as np

from ..autograd.engine import grad as _autograd_grad
from ..base import backend as _backend
from ..base.grad_mode import STATE as GRAD, enable_grad, no_grad
from ..base.device import CPU
from ..base.meta import has_data
from ..base.simarray import launch_kernel
from ..core.creation import empty
from ..core.dispatch import STATE, _result, apply, eager, keeps_float32
from ..base import dtype as _tdtype
from ..core.registry import ALL, REGISTRY, Op
from ..core.tensor import Tensor
from ..fx.graph import Graph
from ..fx.graph_module import GraphModule
from ..fx.passes.fusion import elementwise_groups, op_name
from ..fx.passes.shape_prop import ShapeProp
from ..fx.trace_from_tape import guard_inputs, trace_from_tape
from . import cpu, cuda, plans, pool
from .kernel import Kernel
from .symbolic import NotElementwise, Sym, input_sym, trace_op

__all__ = ["FusedOp", "FusedCall", "lower", "STATS", "TRANSCENDENTAL"]


# members whose value costs a polynomial and a division or more per element (fastmath's exp32, tanh32,
# erf32, log32): a fused op's backward recomputes its members from the inputs, the step's reads them saved
# (``frontend._recompute_costly``), and the step's backward does not recompute them (``step._recomputed``)
TRANSCENDENTAL = frozenset({"tanh", "sigmoid", "exp", "expm1", "log", "log1p", "log2", "log10", "erf", "erfc",
                            "gelu", "silu", "mish", "softplus", "elu", "selu", "celu", "logsigmoid", "pow",
                            "sin", "cos", "tan", "atan", "asinh", "atanh"})

STATS = {"kernels": 0, "kernel_seconds": 0.0, "create_graph_fallbacks": 0}
_WARNED_CREATE_GRAPH: set = set()


def _dtype_of(np_dtype):
    return getattr(_tdtype, np.dtype(np_dtype).name)


def _np_dtype(meta) -> np.dtype | None:
    dt = getattr(meta, "dtype", None)
    return None if dt is None else np.dtype(dt.np)


class FusedOp(Op):
    """One fusion group. ``kernel`` describes the loop; ``replay`` runs the members eagerly (for
    tracing the backward); ``backend`` is ``"numba"``, ``"numpy"`` or ``"auto"``."""

    __slots__ = ("kernel", "replay", "backend", "_runners", "_backwards", "differentiable")

    def __init__(self, kernel: Kernel, replay, *, differentiable: bool, backend: str = "auto"):
        for slot in Op.__slots__:           # not registered: one op per compiled group
            setattr(self, slot, None)
        self.name, self.kernel, self.replay, self.backend = kernel.name, kernel, replay, backend
        self.fwd, self.fwd_out = self._forward, self._forward_out
        self.vjp = self._vjp if differentiable else None
        self.differentiable = differentiable
        self.saves, self.save_output, self.elementwise = ALL, False, False
        self.n_extra, self.is_view, self.kind = len(kernel.outputs) - 1, False, "compute"
        self.aliases = self.inplace = ()
        size = int(np.prod(kernel.shape, dtype=np.int64))
        self.cost = lambda shapes, out, n=size * max(len(kernel.members), 1): n
        self.backward_name = f"{kernel.name}Backward"
        self._runners: dict = {}
        self._backwards: dict = {}

    @property
    def members(self) -> list:
        return self.kernel.members

    @property
    def source(self) -> str:
        """The generated cpu source (numba loops, or the numpy chain without numba)."""
        return cpu.numba_source(self.kernel) if self._cpu_numba() else cpu.numpy_source(self.kernel)

    @property
    def cuda_source(self) -> str:
        return cuda.source(self.kernel)

    def _cpu_numba(self) -> bool:
        return self.backend == "numba" or (self.backend == "auto" and cpu.numba_available())

    def _runner(self, where: str):
        """The kernel for ``"cpu"`` or ``"cuda"``, built (or loaded from the disk cache) on first use."""
        run = self._runners.get(where)
        if run is None:
            t0 = time.perf_counter()
            run = cuda.load(self.kernel) if where == "cuda" else cpu.load(self.kernel, self._cpu_numba())
            self._runners[where] = run
            if where == "cpu":
                self.fast = self._fast_path(run)
            STATS["kernels"] += 1
            STATS["kernel_seconds"] += time.perf_counter() - t0
        return run

    def _fast_path(self, run):
        """The op's own dispatch path while nobody watches (``apply`` calls ``op.fast``, as the
        dispatcher's per-op paths): cpu tensors of the kernel's dtypes go straight into the loop and
        the result through the dispatcher's ``_result`` (one node); anything else (another device or
        dtype, a view whose base began to require grad) takes ``eager``. A compiled chain16 step
        spends its time in dispatch, not in the loop: this saves ``eager``/``_general`` and the
        forward's device tests on each of its two kernel calls."""
        dtypes = tuple(np.dtype(dt) for dt, _ in self.kernel.inputs)
        n, multi = len(dtypes), bool(self.n_extra)

        def fast(args, params):
            if len(args) == n and not params:
                arrays, req = [], False
                for a, dt in zip(args, dtypes):
                    if not (isinstance(a, Tensor) and a._device is CPU and a._data.dtype == dt
                            and (a.requires_grad or a._base is None or not a._vc[0])):
                        break
                    arrays.append(a._data)
                    if a.requires_grad:
                        req = True
                else:
                    outs = run(*arrays)
                    return _result(self, args, params, CPU, req, outs if multi else outs[0])
            return eager(self, args, params)
        return fast

    def call(self, picks: tuple, n_flat: int, fallback):
        """A compiled entry's whole call when its lowered graph is this one op on its ``n_flat``
        placeholders, reading ``picks`` of them (chain16): the guard key already holds each tensor's
        dtype, device and requires_grad, so the call reads the arrays, runs the loop and wraps the
        result (one node) without the graph's ``forward``, ``apply`` and ``fast`` frames and their
        checks. Generated as straight-line Python of the entry's arity (no argument tuple, loop or
        list built per call: 2.3 -> 1.7 us of a chain16 call). ``fallback`` (the graph's forward)
        runs while someone watches (``STATE.slow``: a tape, the profiler, a capture) and for a stale
        view."""
        flat = [f"f{i}" for i in range(n_flat)]
        args, every = [flat[i] for i in picks], ", ".join(flat)
        lines = [f"def call({every}):", "    if STATE.slow:", f"        return fallback({every})", "    req = False"]
        for a in args:
            lines += [f"    if {a}.requires_grad:", "        req = True",
                      f"    elif {a}._base is not None and {a}._vc[0]:", f"        return fallback({every})"]
        lines += [f"    outs = run({', '.join(a + '._data' for a in args)})",
                  f"    return _result(op, ({''.join(a + ', ' for a in args)}), {{}}, CPU, req, "
                  f"outs{'' if self.n_extra else '[0]'})"]
        return _define(lines, {"STATE": STATE, "fallback": fallback, "run": self._runner("cpu"), "op": self,
                               "_result": _result, "CPU": CPU}, f"compiled call of {self.name}")

    def _forward(self, xp, *arrays):
        if xp is np:                         # the cpu (a replay's call, the one-node step's): the loop first
            run = self._runners.get("cpu") or self._runner("cpu")
            outs = run(*arrays)
            return outs if self.n_extra else outs[0]
        if _backend.is_cupy(xp):
            outs = self._runner("cuda")(*arrays)
        elif _backend.is_numpy(xp):
            outs = self._runner("cpu")(*arrays)
        else:
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
            outs = tuple(xp.empty(() if self.kernel.reduce and j == self.n_extra else shape, o.dtype)
                         for j, o in enumerate(self.kernel.outputs))
            if has_data(xp):                 # the simulated cuda device: the cpu loop as one device kernel
                run, k = self._runner("cpu"), len(outs)
                launch_kernel(lambda *a: run(*a[k:], out=a[:k]), self.name, *outs, *arrays)
        return outs if self.n_extra else outs[0]

    def _forward_out(self, xp, *arrays, out: tuple):
        """The forward into ``out`` (capture's replay): the cpu kernel writes there itself; elsewhere
        the result is copied in."""
        if xp is np or _backend.is_numpy(xp):
            (self._runners.get("cpu") or self._runner("cpu"))(*arrays, out=out)
            return
        res = self._forward(xp, *arrays)
        for o, r in zip(out, res if self.n_extra else (res,)):
            xp.copyto(o, r)

    def _vjp(self, g, out, *inputs):
        key = tuple([(x.requires_grad, x._data.shape) for x in inputs])   # a dynamic size traces its own
        if GRAD.enabled:                 # create_graph=True: the gradient must itself be differentiable
            return self._members_vjp(g, inputs, tuple(n for n, _ in key))
        bw = self._backwards.get(key)
        if bw is None:
            bw = self._backwards[key] = self._trace_backward(g, inputs, tuple(n for n, _ in key), _on_cpu(g))
        if out is None and bw.reads_output:       # traced after the forward chose not to save it
            with no_grad():
                out = apply(self, *inputs)
        direct = bw.direct
        if direct is not None:          # one kernel: applied without the graph's Python around it
            if g._device is CPU and not STATE.slow:
                if direct.run is None and self.vjp == self._vjp:   # the first backward traced: this op's vjp
                    self.vjp = direct.front(key, bw.reads_output, self._vjp)
                res = (direct.run or direct.build())(g, out, *inputs)
                if res is not None:
                    return res
            res = apply(direct.op, *direct.pick((g, out, *inputs)))
            return direct.gather(res if direct.op.n_extra else (res,))
        grads = iter(bw.forward(g, out, *inputs))
        return tuple([next(grads) if n else None for n, _ in key])

    def _members_vjp(self, g, inputs, needs):
        """The members' own ops and vjps, recorded for autograd (double backward through a group:
        the compiled backward kernels have no derivative of their own). Counted in ``STATS``."""
        STATS["create_graph_fallbacks"] += 1
        if self.name not in _WARNED_CREATE_GRAPH:
            _WARNED_CREATE_GRAPH.add(self.name)
            warnings.warn(f"tapelab.compile: create_graph=True through {self.name}: its gradient runs the "
                          "members' own ops (the compiled backward kernels have no derivative)", UserWarning,
                          stacklevel=2)
        y = self.replay(*inputs)
        want = [x for x, n in zip(inputs, needs) if n]
        got = iter(_autograd_grad(y, want, g, create_graph=True, allow_unused=True, materialize_grads=True))
        return tuple(next(got) if n else None for n in needs)

    def prepare_backward(self, needs: tuple, on_cpu: bool) -> None:
        """Trace and lower the backward now (at compile time) on meta tensors of the inputs' shapes
        (the trace needs the ops, not their values, so nothing is computed); the forward saves its
        output only when that backward reads it."""
        key = tuple((n, tuple(shape)) for n, (_, shape) in zip(needs, self.kernel.inputs))
        if key not in self._backwards and any(needs):
            g = empty(self.kernel.out_shape, dtype=_dtype_of(self.kernel.outputs[0].dtype), device="meta")
            xs = [empty(shape, dtype=_dtype_of(dt), device="meta") for dt, shape in self.kernel.inputs]
            bw = self._backwards[key] = self._trace_backward(g, xs, needs, on_cpu)
            self.save_output = bw.reads_output

    def _trace_backward(self, g, inputs, needs, on_cpu: bool):
        """The members' vjps, traced through the dispatcher and lowered into kernels. A vjp that
        reads the group's output (tanh's, gelu's) reads the forward's saved result instead of a
        recomputation: the replayed output's uses move to the ``y`` placeholder."""
        replay = self.replay

        def backward(g, y, *xs):
            leaves = [x.detach().requires_grad_() if n else x for x, n in zip(xs, needs)]
            with enable_grad():
                out = replay(*leaves)
            want = [x for x, n in zip(leaves, needs) if n]
            got = _autograd_grad(out, want, g, allow_unused=True)
            return (*(gr if gr is not None else x.new_zeros(x.shape) for gr, x in zip(got, want)), out)
        y = empty(tuple(g.shape), dtype=_dtype_of(self.kernel.outputs[0].dtype), device="meta")
        examples = [x.detach() if isinstance(x, Tensor) else x for x in (g, y, *inputs)]
        with no_grad():
            gm = trace_from_tape(backward, *examples, announce=False)
        graph = gm.graph
        y_node = [n for n in graph.nodes if n.op == "placeholder"][1]
        output = next(n for n in graph.nodes if n.op == "output")
        *grads, replayed = output.args[0]
        replayed.replace_all_uses_with(y_node)
        output.args = (tuple(grads),)
        for n in list(graph.nodes):      # the replay's leaves: the backward runs under no_grad, reads only
            if n.op == "call_function" and op_name(n) == "detach" and n.args[0].op == "placeholder":
                n.replace_all_uses_with(n.args[0])
                graph.erase_node(n)
        graph.eliminate_dead_code()
        gm.recompile()
        reads_output = any(u.target is not guard_inputs for u in y_node.users)
        _fold_expands(gm, [_meta(a) for a in examples])
        gm = lower(gm, [_meta(a) for a in examples], differentiable=False, backend=self.backend, on_cpu=on_cpu)
        gm.reads_output = reads_output
        direct = _one_kernel(gm)
        if direct is not None:           # the kernel's arguments from (g, y, *inputs), its gradients from its outputs
            op, picks, order = direct
            it = iter(order)
            direct = _Direct(op, picks, tuple(next(it) if n else None for n in needs), len(inputs))
        gm.direct = direct
        return gm


class _Direct:
    """A backward that is one kernel: its arguments are ``picks`` of ``(g, y, *inputs)`` and input k's
    gradient is output ``slots[k]`` (one output may be two inputs'; None: no gradient). ``run`` (made by
    ``build`` at first use) is that call as straight-line Python of the kernel's arity: the checks of
    the op's ``fast`` path inline (cpu tensors of the kernel's dtypes, no view whose base has been
    written since: else None, and the caller dispatches), the loop on the arrays, its outputs wrapped
    as the gradients (no node: the backward runs under no_grad). The picks, a loop over the arguments,
    ``map`` and the gathering were ~3 us of Python around a chain16 backward's ~1 us loop."""

    __slots__ = ("op", "picks", "slots", "n_inputs", "pick", "gather", "run")

    def __init__(self, op: FusedOp, picks: list, slots: tuple, n_inputs: int):
        self.op, self.picks, self.slots, self.n_inputs = op, tuple(picks), slots, n_inputs
        self.pick, self.gather, self.run = _getter(picks), _gathered(slots), None

    def _params(self) -> list:
        return ["g", "y", *[f"x{k}" for k in range(self.n_inputs)]]

    def _body(self, indent: str, fail: str, scope: dict) -> list:
        """The call's lines at ``indent``: each picked argument checked (``fail`` where one is not a
        cpu tensor of the kernel's dtype, or a view whose base has been written since), the loop, the
        gradients returned; the names it reads are added to ``scope``."""
        params = self._params()
        scope.update({"Tensor": Tensor, "CPU": CPU, "wrap": Tensor._wrap, "run": self.op._runner("cpu")})
        lines = []
        for j, p in enumerate(self.picks):
            a, scope[f"t{j}"] = params[p], np.dtype(self.op.kernel.inputs[j][0])
            lines += [f"if not (isinstance({a}, Tensor) and {a}._device is CPU and ({a}._base is None or not {a}._vc[0])):",
                      f"    {fail}",
                      f"d{j} = {a}._data",
                      f"if d{j}.dtype is not t{j} and d{j}.dtype != t{j}:",
                      f"    {fail}"]
        lines.append(f"o = run({', '.join(f'd{j}' for j in range(len(self.picks)))})")
        used = sorted({s for s in self.slots if s is not None})
        lines += [f"w{s} = wrap(o[{s}], False, None, 0, [0], CPU)" for s in used]   # one tensor per output
        lines.append(f"return ({''.join(('None' if s is None else f'w{s}') + ', ' for s in self.slots)})")
        return [indent + line for line in lines]

    def build(self):
        scope: dict = {}
        lines = [f"def direct({', '.join(self._params())}):", *self._body("    ", "return None", scope)]
        self.run = _define(lines, scope, f"direct backward of {self.op.name}")
        return self.run

    def front(self, key: tuple, reads_output: bool, slow):
        """The op's vjp for the backward of ``key`` (each input's requires_grad and shape): ``run`` when
        the call is that key's, with grad mode off, nobody watching and a cpu gradient, else ``slow``
        (the op's ``_vjp``, which finds the backward by its key). Saves building and looking up the key
        per call (~0.7 us of a chain16 step). ``run``'s lines are inlined (one frame fewer a call); where
        its checks fail, ``slow`` decides as for any other call."""
        xs = [f"x{k}" for k in range(self.n_inputs)]
        every = ", ".join(["g", "y", *xs])
        tests = ["not GRAD.enabled", "not STATE.slow", "g._device is CPU"] + ["y is not None"] * reads_output
        scope = {"GRAD": GRAD, "STATE": STATE, "slow": slow}
        if self.run is None:
            self.build()
        for k, (needs, shape) in enumerate(key):
            tests += [f"{xs[k]}.requires_grad is {needs}", f"{xs[k]}._data.shape == s{k}"]
            scope[f"s{k}"] = shape
        lines = [f"def vjp({every}):", f"    if {' and '.join(tests)}:",
                 *self._body("        ", f"return slow({every})", scope), f"    return slow({every})"]
        return _define(lines, scope, f"vjp of {self.op.name}")


def _define(lines: list, scope: dict, what: str):
    """The function the source ``lines`` define, its globals ``scope`` (the generated calls' helper)."""
    exec(compile("\n".join(lines) + "\n", f"<tapelab {what}>", "exec"), scope)
    return scope[lines[0][4:lines[0].index("(")]]


def _getter(picks) -> itemgetter:
    """``picks`` of a sequence, always as a tuple (``itemgetter`` of one index gives the item)."""
    return itemgetter(*picks) if len(picks) > 1 else lambda seq: (seq[picks[0]],)


def _gathered(slots: tuple):
    """The gradients' tuple from the kernel's outputs: input k's is output ``slots[k]`` (one output may be
    two inputs'), None where ``slots[k]`` is."""
    if None in slots:
        return lambda res: tuple([None if j is None else res[j] for j in slots])
    return _getter(slots)


class FusedCall:
    """The FX target of a fused group: ``apply``'s the op (``__name__`` names the members)."""

    __slots__ = ("op", "__name__")

    def __init__(self, op: FusedOp):
        self.op = op
        self.__name__ = "fused_" + "_".join(op.members)

    def __call__(self, *args):
        return apply(self.op, *args)

    def __repr__(self) -> str:
        return self.op.name


def _fusible_op(node):
    name = op_name(node) if node.op == "call_function" else None
    op = REGISTRY.get(name or "")
    if op is None or op.kind != "compute" or op.is_view or op.n_extra or isinstance(op, FusedOp):
        return None
    meta = node.meta.get("tensor_meta")
    if meta is None or type(meta) is tuple:
        return None
    dt = _np_dtype(meta)
    if dt not in cpu.LOOP_DTYPES or dt.kind not in "fb" and dt != cpu.BF16:
        return None
    return op


def _sym_args(node, value_of):
    """The node's args with Nodes replaced by ``value_of(node)``."""
    def one(a):
        from ..fx.node import Node
        if isinstance(a, Node):
            return value_of(a)
        if isinstance(a, (tuple, list)):
            return type(a)(one(x) for x in a)
        return a
    return tuple(one(a) for a in node.args), {k: one(v) for k, v in node.kwargs.items()}


def _traced(op: Op, node, value_of) -> Sym:
    """``node``'s op on Syms as the dispatcher calls it: a bfloat16 or half tensor times or over a Python
    float computes with the float a float32 and rounds once (``dispatch.keeps_float32``), where numpy's
    weak scalar would round the float to the tensor's dtype first."""
    args, kwargs = _sym_args(node, value_of)
    dt = _np_dtype(node.meta["tensor_meta"])
    if any(type(a) is float for a in args) and keeps_float32(op, dt):
        return trace_op(op, tuple(np.float32(a) if type(a) is float else a for a in args), kwargs).astype(dt)
    return trace_op(op, args, kwargs)


def _fusible(node, vector_only: bool = False) -> bool:
    """Whether ``node`` is an elementwise op a kernel can compute; ``vector_only``: without a scalar libm
    call in its loop (``cpu.calls_libm``: a numba kernel's sin is 5x slower than numpy's)."""
    op = _fusible_op(node)
    if op is None:
        return False
    inputs = {}

    def value_of(n):
        m = n.meta.get("tensor_meta")
        if m is None or type(m) is tuple:
            raise NotElementwise("non-tensor input")
        if _np_dtype(m) not in cpu.LOOP_DTYPES:
            raise NotElementwise(f"a {_np_dtype(m)} input")
        return inputs.setdefault(n, input_sym(len(inputs), _np_dtype(m)))
    try:
        out = _traced(op, node, value_of)
    except NotElementwise:
        return False
    return (out.dtype == _np_dtype(node.meta["tensor_meta"]) and cpu.rounds_as_eager(out)
            and not (vector_only and cpu.calls_libm(out)))


def _describe(members: list, outputs: list, reduce: str | None = None) -> tuple:
    """``(Kernel, external input nodes)`` for ``members`` (graph order) computing ``outputs``."""
    syms, externals = {}, {}

    def value_of(n):
        if n in syms:
            return syms[n]
        if n not in externals:
            externals[n] = input_sym(len(externals), _np_dtype(n.meta["tensor_meta"]))
        return externals[n]
    names = []
    for m in members:
        syms[m] = _traced(REGISTRY[op_name(m)], m, value_of)
        names.append(op_name(m))
    shape = tuple(np.broadcast_shapes(*(tuple(m.meta["tensor_meta"].shape) for m in outputs)))
    ins = [(str(_np_dtype(n.meta["tensor_meta"])), tuple(n.meta["tensor_meta"].shape)) for n in externals]
    label = ", ".join(names + [reduce] * bool(reduce))
    kernel = Kernel(f"fused({label})", ins, [syms[o] for o in outputs], shape, names, reduce)
    return kernel, list(externals)


def _replay(members: list, inputs: list, outputs: list):
    """A function running the members eagerly through ``prims`` (the backward is traced from it)."""
    from ..fx.node import Node
    steps = [(m, m.target, m.args, dict(m.kwargs)) for m in members]   # the graph drops these nodes

    def run(*xs):
        env = dict(zip(inputs, xs))

        def val(a):
            if isinstance(a, Node):
                return env[a]
            if isinstance(a, (tuple, list)):
                return type(a)(val(x) for x in a)
            return a
        for m, target, args, kwargs in steps:
            env[m] = target(*val(args), **{k: val(v) for k, v in kwargs.items()})
        res = tuple(env[o] for o in outputs)
        return res if len(res) > 1 else res[0]
    return run


def _by_shape(outs: list) -> list:
    """``outs`` in lists of one shape each (first appearance order): a kernel writes every output at
    its loop's shape, so RMSNorm's ``rsqrt(mean(x*x) + eps)`` (N, 1) that the backward reads cannot
    come out of the (N, D) loop that multiplies it."""
    groups: dict = {}
    for o in outs:
        groups.setdefault(tuple(o.meta["tensor_meta"].shape), []).append(o)
    return list(groups.values())


def _ancestors(node, group: set) -> list:
    """Members of ``group`` that ``node`` depends on (itself included), in graph order."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(i for i in n.all_input_nodes if i in group)
    return seen


def lower(gm: GraphModule, example_args: list, *, differentiable: bool = True, backend: str = "auto",
          on_cpu: bool | None = None, prepare: bool = True, codegen: bool = True):
    """Replace each fusible group of ``gm`` by one ``FusedOp`` call; returns ``gm`` recompiled
    (``codegen=False``: its graph only, for a caller that generates its own code from the nodes,
    the one-node step's halves: their Python source was 5% of a warm compile).

    With ``differentiable`` each value that leaves a group gets its own single-output kernel
    (recomputing shared members: one autograd node per output); without, one kernel with
    several outputs per shape of the values leaving the group computes them. ``on_cpu`` (default: every example is a cpu tensor)
    builds the cpu kernels now. ``prepare``: build each kernel and trace each group's backward now
    (else at first use: a graph that runs only where the one-node step cannot, ``step.py``)."""
    if on_cpu is None:
        on_cpu = all(_on_cpu(a) for a in example_args)
    _propagate(gm, example_args)
    graph: Graph = gm.graph
    for node in list(graph.nodes):      # the caller's key (or the op's fixed shapes) guards already
        if node.op == "call_function" and node.target is guard_inputs:
            graph.erase_node(node)
    if on_cpu:
        pool.fuse_relu_pool(gm)          # before grouping: the relu is the pool's, not an elementwise group's
    # a lone relu that the one-node step makes inside its linear's call (``plans.epilogues``) stays the op
    epilogue = plans.epilogues(graph.nodes, op_name) if on_cpu else {}
    fused, deferred = [], []
    numba_loops = on_cpu and (backend == "numba" or (backend == "auto" and cpu.numba_available()))
    fusible = (lambda node: _fusible(node, vector_only=True)) if numba_loops else _fusible
    for group in elementwise_groups(gm, fusible=fusible, min_size=1, merge_siblings=True):
        gset = set(group)
        escaping = [m for m in group if any(u not in gset for u in m.users)]
        jobs = [[o] for o in escaping] if differentiable else _by_shape(escaping)
        for outs in jobs:
            need = set().union(*(_ancestors(o, gset) for o in outs))
            members = [m for m in group if m in need]
            # a trailing sum() (or mean()) joins the kernel at any size. The fused sum keeps no elementwise output,
            # so its backward recomputes the group (tanh, sigmoid's exp) and gets the 0-d gradient as a
            # scalar; that beats writing the output, summing it in a second pass and reading the
            # gradient's 4-byte-a-value broadcast back, on this project's machine, where these loops are
            # memory-bound (alternating rounds, chain6 fwd+bwd: 1M float32 2.27 against 2.36 ms, 32K
            # 0.13 against 0.18 ms, 4M 10.7 against 11.7 ms; keeping tanh's output for the backward
            # instead of recomputing it lost too: 2.93 against 2.82 ms at 1M; session 19: with tanh and
            # sigmoid both, saving won, 3.1 -> 2.1 ms at 1M, so the frontend runs such a one-op graph as the
            # one-node step, ``frontend._recompute_costly``)
            total = _trailing_reduction(outs) if on_cpu else None
            side = _side_reduction(outs) if on_cpu and not differentiable and total is None else None
            if side is not None and all(u is side or u in gset for u in side.args[0].users):
                # read outside the group only by the sum (a forward-and-backward loop's sigmoid): not written
                outs = [o for o in outs if o is not side.args[0]]
            if members == [outs[0]] and outs[0] in epilogue and total is None and side is None:
                continue
            kernel, inputs = _describe(members, outs if side is None else [*outs, side.args[0]],
                                       op_name(total if side is None else side) if total or side else None)
            if len(kernel.lines()[0]) < 2 and total is None:   # one ufunc: numpy's own loop is the kernel
                continue
            has_cuda = cuda.supported(kernel)
            if not on_cpu and not has_cuda:     # a ufunc without a CUDA form (logaddexp's kin): op by op
                continue
            replay = (_replay(members + [total], inputs, [total]) if total is not None
                      else _replay(members, inputs, outs))
            # a group whose output no gradient reaches (a sign or a comparison of the inputs, LFQ's
            # codes) is no autograd node, as its members are none in eager
            grads = differentiable and any(bool(o.meta["tensor_meta"].requires_grad) for o in outs)
            op = FusedOp(kernel, replay, differentiable=grads, backend=backend)
            if on_cpu and len(members) == 1 and total is None and not _pays(op, members[0], inputs):
                continue
            if total is not None:               # the reduction's node is what the kernel replaces
                outs = [total]
            elif side is not None:              # the kernel's last output replaces the reduction's node
                outs = [*outs, side]
            with graph.inserting_after(outs[-1]):
                call = graph.call_function(FusedCall(op), tuple(inputs))
            call.meta["fused"] = {"name": kernel.name, "members": [m.name for m in members],
                                  "source": op.source,
                                  "cuda_source": op.cuda_source if has_cuda else None}
            if len(outs) == 1:
                call.meta["tensor_meta"] = outs[0].meta["tensor_meta"]
                outs[0].replace_all_uses_with(call)
                call.args = tuple(inputs)
            else:
                import operator
                for j, o in enumerate(outs):
                    with graph.inserting_after(call):
                        item = graph.call_function(operator.getitem, (call, j))
                    item.meta["tensor_meta"] = o.meta["tensor_meta"]
                    o.replace_all_uses_with(item)
                    item.args = (call, j)
            needs = tuple(bool(n.meta["tensor_meta"].requires_grad) for n in inputs) if grads else None
            deferred.append((op, needs, on_cpu))
            fused.append(op)
        graph.eliminate_dead_code()
    _toposort(graph)
    if codegen:
        gm.recompile()
    gm.fused_ops = fused
    gm.deferred = deferred
    if prepare:
        prepare_kernels(gm)
    return gm


def prepare_kernels(gm: GraphModule) -> None:
    """Build the lowered graph's cpu kernels and trace its groups' backwards now (``lower`` does,
    unless told not to), so compile time is spent at compile time."""
    for op, needs, on_cpu in gm.deferred:
        if on_cpu:
            op._runner("cpu")
        if needs is not None:
            op.prepare_backward(needs, on_cpu)
    gm.deferred = []


def _fold_expands(gm: GraphModule, example_args: list) -> None:
    """Users of an ``expand`` that are fusible elementwise ops and broadcast its input to the same shape
    anyway read the input itself: a fused sum's backward expands its 0-d gradient, and the kernel then
    reads it as a scalar instead of a materialised tensor (no expand dispatch, and the one-kernel
    backward is applied without its graph). An elementwise op of an expand alone (and constants)
    runs before the expand first: a fused mean's backward divides its expanded 0-d gradient."""
    _propagate(gm, example_args)
    for node in _expands(gm):
        for user in list(node.users):
            if user.all_input_nodes != [node] or not _fusible(user):
                continue
            with gm.graph.inserting_before(user):
                early = gm.graph.call_function(user.target, *_reading(user, node, node.args[0]))
                late = gm.graph.call_function(node.target, (early, *node.args[1:]), node.kwargs)
            user.replace_all_uses_with(late)
            gm.graph.erase_node(user)
        if not node.users:
            gm.graph.erase_node(node)
    _propagate(gm, example_args)
    for node in _expands(gm):
        src, shape = node.args[0], tuple(node.meta["tensor_meta"].shape)
        if type(src.meta.get("tensor_meta")) is tuple or "tensor_meta" not in src.meta:
            continue
        for user in list(node.users):
            meta = user.meta.get("tensor_meta")
            if meta is None or type(meta) is tuple or tuple(meta.shape) != shape or not _fusible(user):
                continue
            others = [tuple(a.meta["tensor_meta"].shape) for a in user.all_input_nodes if a is not node]
            if tuple(np.broadcast_shapes(tuple(src.meta["tensor_meta"].shape), *others)) == shape:
                user.replace_input_with(node, src)
        if not node.users:
            gm.graph.erase_node(node)
    gm.recompile()


def _expands(gm: GraphModule) -> list:
    """The graph's ``expand`` calls of a node."""
    from ..fx.node import Node
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and op_name(n) == "expand" and isinstance(n.args[0], Node)]


def _reading(user, old, new) -> tuple:
    """``user``'s args and kwargs with ``new`` in place of ``old``."""
    def swap(a):
        return new if a is old else a
    return tuple(map(swap, user.args)), {k: swap(v) for k, v in user.kwargs.items()}


def _whole_reduction(node, user) -> bool:
    """Whether ``user`` is a ``sum()`` or ``mean()`` of all of the float ``node`` (no dims, dtype or keepdim)."""
    meta = node.meta.get("tensor_meta")
    return not (user.op != "call_function" or op_name(user) not in ("sum", "mean") or user.args != (node,)
                or meta is None or _np_dtype(meta).kind != "f" or any(user.kwargs.get(k) not in (None, False)
                                                                      for k in ("dims", "dim", "keepdim", "dtype"))
                or set(user.kwargs) - {"dims", "dim", "keepdim", "dtype"})


def _trailing_reduction(outs: list):
    """The ``sum()`` or ``mean()`` node (whole tensor, no dtype) that is the only user of the group's
    one float output, or None: the kernel then accumulates it in the same loop. A squared-mean loss,
    ``(y * y).mean()``, is then one op each way in place of two."""
    if len(outs) != 1 or len(outs[0].users) != 1:
        return None
    user = next(iter(outs[0].users))
    return user if _whole_reduction(outs[0], user) else None


def _side_reduction(outs: list):
    """A whole ``sum()``/``mean()`` node of one of the outputs a kernel writes anyway, or None: the kernel
    then also accumulates it, as its last output, in the same loop. The one-node step's forward of
    chain1M keeps sigmoid's output for its backward and sums it: a second pass over 4 MB (0.17 ms of
    a 2.4 ms step on this project's Xeon)."""
    return next((u for o in outs for u in o.users if _whole_reduction(o, u)), None)


def _pays(op: FusedOp, member, inputs: list) -> bool:
    """Whether one op's kernel beats the op's own forward, timed once on arrays of the real shapes
    (best of 3 each; dispatch costs both the same). A lone ``silu`` (four numpy passes) pays; a
    ``gelu`` whose eager forward is already one fused loop (``engine/kernels``) does not, and
    fusing it would only add the kernel's call. The answer is kept beside the compiled kernels
    (``cpu.cache_dir()/pays``, keyed by the kernel's digest, the op and the shapes), so the same
    program compiles to the same graph in every later process on this machine."""
    metas = [n.meta["tensor_meta"] for n in inputs]
    key = hashlib.sha256(repr((op.kernel.digest, op_name(member), [(tuple(m.shape), str(_np_dtype(m)))
                                                                     for m in metas])).encode()).hexdigest()[:24]
    known = _PAYS.get(key)
    if known is None:
        path = cpu.cache_dir() / "pays" / key
        try:
            known = _PAYS[key] = path.read_bytes() == b"1"
        except OSError:
            known = _PAYS[key] = _timed_pays(op, member, inputs)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                cpu.write_atomically(path, b"1" if known else b"0")
            except OSError:       # a cache that cannot be written is only a cache
                pass
    return known


_PAYS: dict = {}


def _timed_pays(op: FusedOp, member, inputs: list) -> bool:
    arrays = {n: np.full(tuple(n.meta["tensor_meta"].shape), 0.5, _np_dtype(n.meta["tensor_meta"])) for n in inputs}
    args, kwargs = _sym_args(member, arrays.__getitem__)
    eager_fwd = REGISTRY[op_name(member)].fwd
    kernel = op._runner("cpu")
    xs = [arrays[n] for n in inputs]

    def best(f) -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return min(times)
    return best(lambda: kernel(*xs)) < 0.9 * best(lambda: eager_fwd(np, *args, **kwargs))


def _one_kernel(gm) -> tuple | None:
    """``(op, argument positions, output indices)`` when ``gm`` is one fused kernel reading only its
    placeholders and returning its outputs (a group's backward, usually), else None."""
    import operator
    nodes = list(gm.graph.nodes)
    places = [n for n in nodes if n.op == "placeholder"]
    calls = [n for n in nodes if n.op == "call_function" and isinstance(n.target, FusedCall)]
    output = nodes[-1]
    if len(calls) != 1 or any(n.op == "get_attr" for n in nodes) or calls[0].kwargs:
        return None
    call = calls[0]
    if not all(a in places for a in call.args) or not isinstance(output.args[0], (tuple, list)):
        return None
    rest = [n for n in nodes if n not in places and n is not call and n is not output]
    if not all(n.target is operator.getitem and n.args[0] is call for n in rest):
        return None
    order = []
    for o in output.args[0]:
        if o is call and not call.target.op.n_extra:
            order.append(0)
        elif o in rest:
            order.append(o.args[1])
        else:
            return None
    return call.target.op, [places.index(a) for a in call.args], order


def _meta(a):
    if isinstance(a, Tensor) and a.device.type != "meta":
        return empty(a.shape, dtype=a.dtype, device="meta").requires_grad_(a.requires_grad)
    return a


class _MetaShapeProp(ShapeProp):
    """Shapes, dtypes and ``requires_grad`` without computing: inputs and parameters enter as meta
    tensors (a Transformer block's propagation costs its dispatches, not a second forward)."""

    def get_attr(self, target, args, kwargs):
        return _meta(super().get_attr(target, args, kwargs))


def _propagate(gm: GraphModule, example_args: list) -> None:
    """Each node's ``tensor_meta``, from meta tensors of the examples (the parameters enter as meta
    tensors too: real examples beside them met a meta weight in the first op that read both)."""
    try:
        _MetaShapeProp(gm).propagate(*[_meta(a) for a in example_args])
    except Exception:  # noqa: BLE001 - an op without a meta form (a value-dependent shape): run it
        ShapeProp(gm).propagate(*example_args)


def _on_cpu(a) -> bool:
    return not isinstance(a, Tensor) or a.device.type == "cpu"


def _toposort(graph: Graph) -> None:
    """Reorder nodes so every value is defined before use, otherwise keeping their order: a
    kernel sits after its last output's position, and users of its earlier outputs move down."""
    order, seen = [], set()
    for root in list(graph.nodes):
        stack = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if ready:
                order.append(n)
                continue
            if n in seen:
                continue
            seen.add(n)
            stack.append((n, True))
            stack.extend((i, False) for i in reversed(n.all_input_nodes) if i not in seen)
    prev = order[0]
    for n in order[1:]:
        if prev.next is not n:
            prev.append(n)
        prev = n
