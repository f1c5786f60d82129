"""Nodes of the dynamic autograd graph (``tensor.grad_fn``) and the documented walk API.

Every node has ``name()``, ``next_functions`` (a tuple of ``(node, output_nr)`` with
``(None, 0)`` for inputs that need no gradient), ``metadata`` (a dict for users and
tools), and ``saved_tensors``. ``OpNode`` is one recorded primitive; ``AccumulateGrad``
sinks gradients into a leaf; ``autograd.Function`` adds its own node type, and
``autograd/views.py`` the nodes of in-place ops on views. Below the dispatcher, which
records ``OpNode``s; the Tensor methods that reach nodes (``register_hook``,
``retain_grad``, a leaf's ``_accumulator``) are declared here and bound by
``ops.install_methods``.
"""
from __future__ import annotations

import itertools
import sys
import weakref

from ..base.device import of_array
from ..base.dispatch_state import LOCAL, STATE as _DISPATCH
from .hooks import RemovableHandle
from .tensor import Tensor

__all__ = ["Node", "OpNode", "AccumulateGrad", "graph_leaves"]

_seq = itertools.count()
RETAIN = 1 << 30   # pre_hooks key offset of retain_grad hooks

FREED_MSG = ("Trying to backward through the graph a second time (or directly access saved tensors "
             "after they have already been freed). Saved intermediate values of the graph are freed "
             "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
             "backward through the graph a second time or if you need to access saved tensors after "
             "calling backward.")


class Node:
    """Base of every grad_fn."""

    __slots__ = ("edges", "seq", "pre_hooks", "hooks", "_metadata", "_tape_seq", "__weakref__")
    n_outputs = 1
    plain = False   # a recorded op's node whose run is OpNode.run (the engine inlines it)
    node_name = None   # a name fixed by the node's type (node_type's classes); None: ``name()`` says it

    def __lt__(self, other) -> bool:
        """Never: the engine's ready heap holds ``(-seq, node)``, and nodes of one ``seq`` (the leaves'
        AccumulateGrad nodes) tie there, so heapq orders them as PyTorch's priority queue does (its
        sifts are libstdc++'s): ``(b * a).backward()`` fires b's hooks before a's, as in PyTorch."""
        return False

    def name(self) -> str:
        return type(self).__name__

    @property
    def tape_seq(self) -> int | None:
        """Sequence number of the dispatched op that created this node, if anyone was recording.

        It is the ``seq`` of the ``op`` event (and of the tape record), so a backward step
        can be matched to the forward op that made it.
        """
        return getattr(self, "_tape_seq", None)

    @property
    def next_functions(self) -> tuple:
        return tuple(e if e is not None else (None, 0) for e in self.edges)

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` runs after this node; may return new grad_inputs."""
        if self.hooks is None:
            self.hooks = []
        self.hooks.append(fn)
        return _Handle(self.hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before this node; may return new grad_outputs."""
        return self._add_prehook(-1, fn)

    def _add_prehook(self, key, fn):
        """``key`` is an output number (a tensor hook), -1 (a node pre-hook) or ``RETAIN + nr``."""
        if self.pre_hooks is None:
            self.pre_hooks = {}
        lst = self.pre_hooks.setdefault(key, [])
        lst.append(fn)
        return _Handle(lst, fn)

    def _add_retain_hook(self, nr: int, fn):
        """``retain_grad``'s hook: runs after the tensor hooks of output ``nr``, as in PyTorch."""
        return self._add_prehook(RETAIN + nr, fn)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"

    # engine protocol: run(grad_outputs) -> one gradient (or None) per edge; release() frees buffers
    def release(self) -> None:
        pass


class _Handle(RemovableHandle):
    """The ``RemovableHandle`` of a hook kept in a list (a node's and a tensor's hooks run in order):
    ``isinstance(h, torch.utils.hooks.RemovableHandle)`` holds, as for PyTorch's tensor hooks."""

    def __init__(self, lst, fn):
        super().__init__()
        self._list, self._fn = lst, fn

    def remove(self) -> None:
        if self._fn in self._list:
            self._list.remove(self._fn)


# Set for good once a non-leaf is detached in place (``detach_``) while nodes may hold it as an input;
# from then on OpNode.run (which the engine uses instead of its inline copy) re-grades its inputs.
DETACHED_IN_PLACE = [False]


def _regraded(inputs: tuple, edges: list) -> tuple:
    """``inputs`` with each tensor that has an edge but no longer requires grad (``detach_`` after the
    op ran: pykeen's regularizer detaches its summed term once the loss has used it) replaced by a
    stand-in that does, sharing its data and version counter: PyTorch computes an input's gradient
    by the edge the forward recorded, where the vjps here read ``requires_grad``."""
    if not any(e is not None and isinstance(t, Tensor) and not t.requires_grad for t, e in zip(inputs, edges)):
        return inputs
    return tuple(Tensor._wrap(t._data, True, None, 0, t._vc, t._device)
                 if e is not None and isinstance(t, Tensor) and not t.requires_grad else t
                 for t, e in zip(inputs, edges))


def vjp_below_subclasses(op, g, out, inputs, params):
    """An op's vjp with Tensor subclasses' ``__torch_function__`` off: PyTorch's autograd engine runs
    the backward formulas below Python, so a loss that is a subclass (fastai's ``TensorBase``) still
    gives plain Tensor gradients, and a subclass never sees the backward's ops."""
    local = LOCAL
    local.subclasses_off += 1
    try:
        return op.vjp(g, out, *inputs, **params)
    finally:
        local.subclasses_off -= 1


class OpNode(Node):
    """A recorded application of a registered op."""

    __slots__ = ("op", "inputs", "params", "out_data", "out_vc", "versions", "freed_by", "module",
                 "_shapes",   # set by release() only for ops that saved no values
                 "_packed")   # set by saved_tensors_hooks (autograd/graph.py) only: (inputs, output, unpack)

    plain = True

    def __init__(self, op, inputs, params, edges, out_data, out_vc, versions):
        self.op, self.inputs, self.params, self.edges = op, inputs, params, edges
        self.out_data, self.out_vc, self.versions = out_data, out_vc, versions
        self.seq = next(_seq)
        self.pre_hooks = self.hooks = self._metadata = self.freed_by = None
        self.module = ""

    def name(self) -> str:
        if self.node_name is not None:   # fixed when the node was made (node_type)
            return self.node_name
        name = self.op.backward_name
        if type(name) is str:
            return name
        inputs = self.inputs if self.inputs is not None else getattr(self, "_shapes", None)
        if inputs is None:   # freed: the inputs' count is still the edges'
            return name((None,) * len(self.edges), self.params)
        return name(tuple(a.ndim if isinstance(a, Tensor) else len(a[0]) if type(a) is _Meta else None
                          for a in inputs), self.params)

    @property
    def next_functions(self) -> tuple:
        """The base's, less the edges of values a pass-through op's companion kept (``Op.n_kept``)."""
        edges = Node.next_functions.fget(self)
        kept = self.op.n_kept
        return edges[:-kept] if kept else edges

    @property
    def saved_tensors(self) -> tuple:
        """The tensors whose values the vjp reads (inputs in order, then the output)."""
        if self.inputs is None and getattr(self, "_packed", None) is not None:
            versions = self.versions
            self._restored()
            return tuple(self.inputs[i] if i >= 0 else self._output() for i, _ in versions)
        if self.inputs is None:
            raise RuntimeError(FREED_MSG)
        if not self.versions:
            return ()
        return tuple(self.inputs[i] if i >= 0 else self._output() for i, _ in self.versions)

    def __getattr__(self, name: str):
        """``grad_fn._saved_<arg>``: what the node saved under ATen's argument name (``_saved_self``,
        ``_saved_other``, ``_saved_result``, ``_saved_dim``). Tensors come through the unpack hook at
        each access, as PyTorch's do; an input the backward does not need reads None; a released
        node's tensors raise PyTorch's freed-buffers error."""
        if not name.startswith("_saved_"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        arg = name[7:]
        op = self.op
        if arg == "result" and op.save_output:
            return self._read_saved(-1)
        names = _ATEN_ARGS.get(op.name, ("self", "other"))
        if arg in names and op.saves != "none":
            i = names.index(arg)
            items = self.inputs if self.inputs is not None else self._packed[0] if self._has_packed() else None
            if items is not None and i < len(items) and not isinstance(items[i], (Tensor, Packed)):
                return items[i]   # a number operand
            if items is not None and i < len(items):
                return self._read_saved(i) if any(j == i for j, _ in self.versions or ()) else None
            if items is None:
                raise RuntimeError(FREED_MSG)
        if arg.endswith("_sym_sizes") and arg[:-10] in names and self.inputs is not None:
            i = names.index(arg[:-10])
            if i < len(self.inputs) and isinstance(self.inputs[i], Tensor):
                return tuple(self.inputs[i].shape)
        if arg in self.params:
            return self.params[arg]
        raise AttributeError(f"'{self.name()}' object has no attribute '{name}'")

    def __dir__(self):
        """The attributes, with the ``_saved_<arg>`` tensors this node has (torchviz's ``show_saved`` lists them)."""
        op = self.op
        names = _ATEN_ARGS.get(op.name, ("self", "other"))
        n = len(self.edges) - op.n_kept
        saved = [f"_saved_{a}" for a in names[:n]] if op.saves != "none" else []
        return [*super().__dir__(), *saved, *(["_saved_result"] if op.save_output else [])]

    def _has_packed(self) -> bool:
        try:
            return self._packed is not None
        except AttributeError:
            return False

    def _read_saved(self, i: int):
        """Saved input ``i`` (-1: the output), unpacked afresh where ``saved_tensors_hooks`` packed it."""
        if self.inputs is None and self._has_packed():
            items, out, unpack = self._packed
            return unpack((out if i < 0 else items[i]).value)
        if self.inputs is None:
            raise RuntimeError(FREED_MSG)
        return self._output() if i < 0 else self.inputs[i]

    def _output(self):
        """Bookkeeping: the saved output value, re-labelled as this node's output for the vjp."""
        return Tensor._wrap(self.out_data, True, self, 0, self.out_vc, of_array(self.out_data))

    def run(self, grads):
        inputs = self.inputs
        if inputs is None:
            inputs = self._restored()
        versions = self.versions
        if versions is not None:
            out_vc = self.out_vc
            for i, v in versions:
                if (inputs[i]._vc if i >= 0 else out_vc)[0] != v:
                    self._check_versions()   # raises, naming the tensor
        g = grads[0]
        if g is None:
            return (None,) * len(self.edges)
        if DETACHED_IN_PLACE[0]:
            inputs = _regraded(inputs, self.edges)
        op = self.op
        out = Tensor._wrap(self.out_data, True, self, 0, self.out_vc, g._device) if op.save_output else None
        if _DISPATCH.functions is not None:
            return vjp_below_subclasses(op, g, out, inputs, self.params)
        return op.vjp(g, out, *inputs, **self.params)

    def _restored(self) -> tuple:
        """The inputs after ``release``: shape-only stand-ins when the op saved no values, else an error;
        or, where ``saved_tensors_hooks`` packed the saved values, those values unpacked (the hooks
        own them from then on: no version check)."""
        packed = getattr(self, "_packed", None)
        if packed is not None:
            items, out, unpack = packed
            self._packed = self.versions = None
            inputs = list(items)
            for i in pack_order(self.op, len(items)):
                if type(items[i]) is Packed:
                    inputs[i] = _unpacked(unpack(items[i].value), self.edges[i] is not None)
            if out is not None:
                self.out_data = unpack(out.value)._data
            self.inputs = inputs = tuple(inputs)
            return inputs
        shapes = getattr(self, "_shapes", None)
        if shapes is None:
            raise RuntimeError(f"{FREED_MSG} (The buffers of {self.name()} were freed by "
                               f"{self.freed_by}; pass retain_graph=True to the first call, "
                               f"or re-run the cell that builds the graph.)")
        self.inputs = inputs = tuple(_stand_in(*a) if type(a) is _Meta else a for a in shapes)
        return inputs

    def _check_versions(self):
        stale_output = False
        for i, v in self.versions:
            t = self.inputs[i] if i >= 0 else None
            vc = t._vc if t is not None else self.out_vc
            if vc[0] != v:
                if t is None and self.op.recomputes_output:
                    stale_output = True
                    continue
                shape = list(t.shape) if t is not None else list(self.out_data.shape)
                dt = (t.dtype if t is not None else None)
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [{dt or 'output'} {shape}], which is "
                    f"{'input ' + str(i) if i >= 0 else 'the output'} of {self.name()}, is at version "
                    f"{vc[0]}; expected version {v} instead. Hint: enable anomaly detection to find "
                    "the operation that failed to compute its gradient, with "
                    "tapelab.autograd.set_detect_anomaly(True).")
        if stale_output:   # the inputs are as saved: the output they made, anew
            self._recompute_output()

    def _recompute_output(self) -> None:
        """``out_data`` made again from the saved inputs (``Op.recomputes_output``), with a counter of its own."""
        arrays = [a._data if isinstance(a, Tensor) else a for a in self.inputs]
        dev = of_array(arrays[0])
        self.out_data = self.op.fwd(dev._xp or dev.xp, *arrays, **self.params)
        self.out_vc = [0]
        self.versions = [(i, v) for i, v in self.versions if i >= 0] + [(-1, 0)]

    def release(self, by: str = "backward()") -> None:
        """Free the saved values. An op that saved none keeps shape-only stand-ins of its
        inputs, so a second backward through it works, as it does in PyTorch."""
        if self.versions is None and self.inputs is not None:
            self._shapes = tuple([_Meta((a._data.shape, a._data.dtype, a._device)) if isinstance(a, Tensor) else a
                                  for a in self.inputs])
        self.inputs = self.out_data = None
        self.freed_by = by


_NODE_TYPES: dict[str, type] = {}


def node_type(op, args: tuple, params: dict) -> type:
    """The class of the node recording ``op`` on ``args``: a subclass of ``OpNode`` named as PyTorch's node
    (``type(y.grad_fn).__name__ == "MulBackward0"``, which torchviz and graph walkers print), one per
    name, which stays the node's name once its inputs are freed; an op whose node name is fixed keeps its
    class (``op.node_type``)."""
    name = op.backward_name
    fixed = type(name) is str
    if not fixed:
        name = name(tuple([a._data.ndim if isinstance(a, Tensor) else None for a in args]), params)   # (a list: no generator frame; the array's ndim: no property frame)
    cls = _NODE_TYPES.get(name)
    if cls is None:
        cls = _NODE_TYPES[name] = type(name, (OpNode,), {"__slots__": (), "__module__": __name__, "node_name": name})
    if fixed:
        op.node_type = cls
    return cls


# ATen's argument names where an op's inputs are not ``(self, other)``: the ``_saved_<arg>`` names
_ATEN_ARGS = {"pow": ("self", "exponent"), "matmul": ("self", "mat2"),
              "convolution": ("input", "weight"), "convolution_transpose": ("input", "weight")}


def _unpacked(t, needs_grad: bool):
    """An unpacked saved value as the vjp reads it: vjps compute an input's gradient only where the
    input requires grad, which a value the hooks rebuilt (from numpy, another dtype) may not."""
    if needs_grad and isinstance(t, Tensor) and not t.requires_grad:
        return t.detach().requires_grad_(True)
    return t


def pack_order(op, n: int) -> range | list:
    """The order PyTorch's nodes save their inputs in (the pack hook sees them so): an elementwise binary
    op or a matrix product saves ``other`` before ``self`` (``mul``, ``div``, ``pow``, ``mm``)."""
    if n >= 2 and (op.elementwise or op.name == "matmul"):
        return [1, 0, *range(2, n)]
    return range(n)


class Packed:
    """What a ``saved_tensors_hooks`` pack hook returned for one saved value."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Meta(tuple):
    """(shape, dtype, device) of a released input."""

    __slots__ = ()


def _stand_in(shape, dtype, dev):
    """A zero-strided array of this shape, dtype and device: all a shape-only vjp reads.

    Bookkeeping, not an op: it stands in for a freed input inside this node and no vjp
    reads its values (the op saved none)."""
    xp = dev.xp
    return Tensor._wrap(xp.broadcast_to(xp.zeros((), dtype), shape), False, None, 0, [0], dev)


class AccumulateGrad(Node):
    """Sinks a gradient into ``variable.grad`` of a leaf tensor.

    The leaf owns this node and the node refers back weakly: a leaf nobody holds any more
    has no ``.grad`` anyone could read, so its gradient is dropped.
    """

    __slots__ = ("_variable",)

    def __init__(self, variable):
        self._variable = weakref.ref(variable)
        self.edges = ()
        self.seq = sys.maxsize  # leaves run as soon as they are ready
        self.pre_hooks = self.hooks = self._metadata = None
        self._tape_seq = None   # made by no op; set, so reading tape_seq (per step, while watched) fails no lookup (0.9 us)

    @property
    def variable(self):
        return self._variable()

    @property
    def saved_tensors(self) -> tuple:
        return ()


# ---------------------------------------------------------------- Tensor methods declared here
def _accumulator(self: Tensor) -> AccumulateGrad:
    """This leaf's AccumulateGrad node; it holds the leaf weakly, so no reference cycle forms."""
    try:
        return self._accum
    except AttributeError:
        acc = self._accum = AccumulateGrad(self)
        return acc


def edge_to(t: Tensor) -> tuple:
    """The edge a new node holds to an input that requires grad: ``(grad_fn, output number)``, or
    the leaf's accumulator and 0. A view whose base changed in place since it was made gets its
    grad_fn regenerated first (PyTorch's grad_fn accessor compares version counters the same way)."""
    fn = t.grad_fn
    if t._vc[0] and t._base is not None:
        fn = t._view_grad_fn()
    if fn is not None:
        return fn, t._out_nr
    try:
        return t._accum, 0
    except AttributeError:
        return _accumulator(t), 0


def register_hook(self: Tensor, hook):
    """``hook(grad) -> Tensor or None`` runs when this tensor's gradient is computed."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        return self.grad_fn._add_prehook(self._out_nr, hook)
    # a leaf's hooks are its AccumulateGrad's tensor pre-hooks, as in PyTorch: the walk then finds
    # every hook of a node on the node (run before its node pre-hooks, as for any output)
    return _accumulator(self)._add_prehook(0, hook)


def register_post_accumulate_grad_hook(self: Tensor, hook):
    """``hook(tensor)`` runs after this leaf's ``.grad`` has been accumulated in a backward pass
    (an optimizer step per parameter inside backward, as PyTorch's)."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    hooks = self.__dict__.setdefault("_post_accumulate_hooks", [])
    hooks.append(hook)
    return _Handle(hooks, hook)


def retain_grad(self: Tensor) -> None:
    """Keep ``.grad`` for this non-leaf tensor after backward."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None or getattr(self, "_retains", False):
        return
    self._retains = True
    ref = weakref.ref(self)

    def keep(grad):
        t = ref()
        if t is not None:
            g = grad.detach() if not grad.requires_grad else grad
            t.grad = g.clone() if t.grad is None else t.grad + g
    self.grad_fn._add_retain_hook(self._out_nr, keep)


def graph_leaves(roots) -> list:
    """The leaves (tensors that accumulate gradients) the autograd graphs of the tensors ``roots``
    reach, each once, in the order a depth-first walk meets them (DDP's unused-parameter search,
    distributed autograd's gradients)."""
    seen, found, order = set(), set(), []
    stack = [t.grad_fn for t in roots if getattr(t, "grad_fn", None) is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None and id(var) not in found:
            found.add(id(var))
            order.append(var)
        stack.extend(fn for fn, _ in node.next_functions if fn is not None)
    return order


OPERATORS = {"_accumulator": _accumulator, "register_hook": register_hook, "retain_grad": retain_grad,
             "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook}
