"""``Proxy``: the stand-in value that records what is done to it.

During symbolic tracing, ``forward`` runs on Proxies instead of Tensors. Every operator
(``x + y``, ``x[0]``, ``-x``) becomes a ``call_function`` node with an ``operator``
target, every method call (``x.relu()``) a ``call_method`` node, and a bare attribute
(``x.shape``) a ``call_function`` node on ``getattr``. Each returns a new Proxy, so the
trace continues.

A Proxy is not a Tensor, but it takes part in the ``__torch_function__`` protocol as
``torch.fx.Proxy`` does: while a trace runs (or a ``GraphAppendingTracer`` lives, for
graphs built by hand), ``Proxy`` is registered with ``overrides.taking_part``, so ``tapelab.relu(p)`` reaches the dispatcher, which hands the op to
``Proxy.__torch_function__``; that records one ``call_function`` node whose target is the op's
public function (``tapelab.relu``, ``tapelab.nn.functional.gelu``), however the caller named
it. Composite public functions (``F.cross_entropy``) check for tensor-likes at their entry and
arrive here with themselves as the function, so they record as one node too.

What a Proxy cannot do, because the value is unknown while tracing:

- ``bool(p)`` (``if p:``, ``while p:``, ``assert p``) raises ``TraceError``: symbolically
  traced variables cannot be used as inputs to control flow. Use ``concrete_args`` or
  ``tapelab.fx.trace_from_tape``, which specialises control flow to an example.
- ``for v in p`` raises ``TraceError`` (``a, b = p`` works: it records two ``getitem``).
- ``len(p)`` raises ``RuntimeError`` unless ``tapelab.fx.wrap("len")`` was called.
"""
from __future__ import annotations

import dis
import inspect
import operator
from bisect import bisect_left
from typing import Callable

from ..core.overrides import OpFunction, taking_part_while_alive
from ._public import PACKAGE, package, public_function, public_function_named
from .node import Node, map_aggregate

__all__ = ["Proxy", "Attribute", "TraceError", "TracerBase", "GraphAppendingTracer", "first_proxy"]
_OPS = f"{PACKAGE}.ops."   # the op families' modules: a function of theirs records by its public name


class TraceError(ValueError):
    """A traced program did something that symbolic values cannot support."""


class TracerBase:
    """What records nodes into ``self.graph``: ``create_node``, ``create_arg``, ``create_proxy``,
    ``proxy``. ``Tracer`` (symbolic tracing) adds modules, parameters and tensor constants."""

    graph = None
    module_stack: list = []     # (path, class name) of the modules being traced through

    def create_node(self, kind: str, target, args: tuple, kwargs: dict, name: str | None = None,
                    type_expr=None) -> Node:
        """Add a node; inside a module traced through, ``meta["nn_module_stack"]`` maps each
        enclosing module's path to its class name, outermost first."""
        node = self.graph.create_node(kind, target, args, kwargs, name, type_expr)
        if self.module_stack and kind not in ("placeholder", "output"):
            node.meta["nn_module_stack"] = dict(self.module_stack)
        return node

    def proxy(self, node: Node) -> "Proxy":
        return Proxy(node, self)

    def create_proxy(self, kind: str, target, args: tuple, kwargs: dict, name: str | None = None,
                     type_expr=None) -> "Proxy":
        """Create a node from Python arguments (via ``create_arg``) and return its Proxy."""
        node = self.create_node(kind, target, self.create_arg(tuple(args)), self.create_arg(dict(kwargs)),
                                name, type_expr)
        return self.proxy(node)

    def create_arg(self, a):
        """Turn a Python value into a node argument: Proxies become their nodes; containers are
        converted element by element; anything else is kept as a constant."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, tuple):
            t = tuple(self.create_arg(x) for x in a)
            return type(a)(*t) if hasattr(a, "_fields") else t
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        return a


class GraphAppendingTracer(TracerBase):
    """Records onto an existing ``graph``: building graphs by hand from Proxies
    (``Proxy(graph.placeholder("x"))``) and graph transforms that re-emit nodes."""

    def __init__(self, graph):
        self.graph = graph
        self.module_stack = []
        taking_part_while_alive(Proxy, self)   # its Proxies reach ops outside any trace


def first_proxy(args, kwargs) -> "Proxy | None":
    """The first Proxy anywhere in ``args`` and ``kwargs`` (nested containers included), or None."""
    found = []
    map_aggregate((args, kwargs), lambda a: found.append(a) if isinstance(a, Proxy) else None)
    return found[0] if found else None


def _forward(op) -> Callable:
    def method(self, other):
        return self.tracer.create_proxy("call_function", op, (self, other), {})
    return method


def _reflected(op) -> Callable:
    def method(self, other):
        return self.tracer.create_proxy("call_function", op, (other, self), {})
    return method


def _unary(op) -> Callable:
    def method(self):
        return self.tracer.create_proxy("call_function", op, (self,), {})
    return method


def _operator(name: str):
    return getattr(operator, name + "_" if name in ("and", "or") else name)


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
           "rshift")
# Python's operators on a Proxy, each recording its ``operator`` function: a base class built from the
# table, so no class is edited after it is made
_Operators = type("_Operators", (), {
    **{f"__{n}__": _forward(_operator(n)) for n in _BINARY + ("eq", "ne", "lt", "le", "gt", "ge", "getitem")},
    **{f"__r{n}__": _reflected(_operator(n)) for n in _BINARY},
    **{f"__{n}__": _unary(getattr(operator, n)) for n in ("neg", "pos", "invert", "abs")},
})


class Proxy(_Operators):
    """A symbolic value: wraps ``node`` of ``tracer.graph`` and records operations on it.

    Args:
        node: the graph node whose value this Proxy stands for.
        tracer: the ``Tracer`` that records new nodes (default: one appending to ``node.graph``).
    """

    def __init__(self, node: Node, tracer=None):
        self.node = node
        self.tracer = tracer if tracer is not None else GraphAppendingTracer(node.graph)

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __hash__(self) -> int:
        return id(self)

    def __getattr__(self, name: str) -> "Attribute":
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args, **kwargs) -> "Proxy":
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __bool__(self) -> bool:
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def __len__(self) -> int:
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to be "
                           "recorded, please call tapelab.fx.wrap('len') at module scope")

    def __iter__(self):
        frame = inspect.currentframe().f_back
        insts = list(dis.get_instructions(frame.f_code))
        inst = insts[bisect_left(insts, frame.f_lasti, key=lambda i: i.offset)]
        if inst.opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(inst.argval))
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy is used in a "
                         "loop or as a *args or **kwargs function argument. Iterate over a concrete value, "
                         "or trace with tapelab.fx.trace_from_tape, which specialises loops to an example")

    @classmethod
    def __torch_function__(cls, orig_method, types, args=(), kwargs=None) -> "Proxy":
        """Record a call that reached a Proxy as a ``call_function`` node (``torch.fx.Proxy``'s
        hook): an op from the dispatcher records its public function, a guarded composite itself.
        (Tensor methods never get here: ``p.relu()`` is ``Proxy.__getattr__``'s ``call_method``;
        and tapelab's ``Tensor.relu`` is the function ``tapelab.relu``, so no test could tell.)"""
        kwargs = kwargs or {}
        tracer = first_proxy(args, kwargs).tracer
        if isinstance(orig_method, OpFunction):
            op, orig_method = orig_method.op, public_function(orig_method.op)
            if orig_method is None:
                raise TraceError(f"op '{op.name}' received a Proxy, and tapelab has no public function of that "
                                 "name to record: it was reached from a function that does not check for "
                                 "Proxies; mark that function with tapelab.fx.wrap")
        else:
            name = getattr(orig_method, "__name__", None)
            if getattr(orig_method, "__module__", "").startswith(_OPS):   # an op family's function, reached
                orig_method = public_function_named(name) or orig_method  # other than by its public name
            if kwargs and vars(package()).get(name) is orig_method:
                kwargs = _as_given(orig_method, kwargs)
        return tracer.create_proxy("call_function", orig_method, args, kwargs)

    def keys(self):
        return self.tracer.create_proxy("call_method", "keys", (self,), {})


_DEFAULT_TYPES = (type(None), bool, int, float, str)


def _as_given(fn: Callable, kwargs: dict) -> dict:
    """``kwargs`` without those at ``fn``'s default. A top-level function (``tapelab.zeros_like``) hands
    the protocol all its keywords; PyTorch's are builtins whose nodes hold only what the caller passed
    (``torch.zeros_like(x)``, not ``..., dtype = None, device = None, ...``; a keyword given at its
    default is dropped too, which means the same). Functional ones keep theirs, as
    ``torch.nn.functional``'s Python functions pass them all too."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    def at_default(name, value) -> bool:
        p = params.get(name)
        if p is None or p.default is inspect.Parameter.empty:
            return False
        d = p.default
        return d is value or (type(d) is type(value) and type(d) in _DEFAULT_TYPES and d == value)
    return {k: v for k, v in kwargs.items() if not at_default(k, v)}


class Attribute(Proxy):
    """``p.name``: becomes a ``call_method`` node if called, else a ``getattr`` node on first use."""

    def __init__(self, root: Proxy, attr: str):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self) -> Node:
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __repr__(self) -> str:
        return f"Attribute({self.root!r}.{self.attr})"

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)
