"""Symbolic tracing: run ``forward`` on Proxies and record a ``Graph``.

``Tracer.trace(root)`` makes one ``placeholder`` per argument of ``root.forward``, calls
it with Proxies and records every operation. While it runs, a dispatcher ``Mode`` is
active, and three things are seen:

- module calls, through the mode's declared ``call_module`` hook (``Module.__call__``
  asks the innermost mode): a *leaf* module (``is_leaf_module``; by default every
  ``tapelab.nn`` layer except ``Sequential``) becomes one ``call_module`` node; any other
  module is traced through, and the nodes made inside it record the module path in
  ``node.meta["nn_module_stack"]`` (as PyTorch's tracer does).
- parameter reads (``self.weight``), through ``nn.modules.module.reading_parameters``:
  a Parameter of the root gives a ``get_attr`` Proxy.
- calls of tapelab's functions on Proxies, through the ``__torch_function__`` protocol
  (``core/overrides.py``): while the trace runs, ``Proxy`` is registered with
  ``overrides.taking_part``, so an op that receives a Proxy hands it to
  ``Proxy.__torch_function__``, which records one ``call_function`` node whose target is the
  op's public function (``tapelab.relu``, ``tapelab.nn.functional.gelu``), under whatever name
  the caller bound it. Composite public functions (``F.cross_entropy``, ``F.pad``) check for
  tensor-likes at their entry, as PyTorch's do, and record as one node with themselves as target;
  functions marked with ``wrap`` are permanent wrappers that do the same check.

Nothing is swapped in any namespace, so a trace is private to its thread: another thread's
calls of ``tapelab.relu`` on tensors run as usual meanwhile. Ops on real tensors (constants
made at trace time) run eagerly through the mode; a primitive that receives a Proxy with the
protocol switched off (``DisableTorchFunction``) raises a ``TraceError`` that names the op.

Each trace emits the ``graph_traced`` event (``events.GraphTraced``) while anyone
subscribes to it.

>>> class M(tapelab.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.linear = tapelab.nn.Linear(4, 4)
...     def forward(self, x):
...         return tapelab.relu(self.linear(x)) + 1
>>> gm = tapelab.fx.symbolic_trace(M())
>>> [n.op for n in gm.graph.nodes]
['placeholder', 'call_module', 'call_function', 'call_function', 'output']
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import types
from typing import Any, Callable

from ..base import events
from ..base.dispatch_state import STATE
from ..base.pytype import defined_in
from ..core.overrides import taking_part
from ..core.dispatch import Mode, eager
from ..nn.modules.container import Sequential
from ..nn.modules.module import Module, reading_parameters
from ..nn.parameter import Parameter
from ..core.tensor import Tensor
from ._public import PACKAGE
from .graph import Graph
from . import graph_module as _graph_module
from .graph_module import GraphModule
from .proxy import GraphAppendingTracer, Proxy, TraceError, TracerBase, first_proxy

__all__ = ["Tracer", "symbolic_trace", "wrap"]


def wrap(fn_or_name: str | Callable):
    """Record calls of a module-level function as one ``call_function`` node instead of
    tracing through it (use for functions with control flow, or for ``len``).

    Call it at module scope, on the function (as a decorator) or on its name::

        @tapelab.fx.wrap
        def my_norm(x):
            return x / x.abs().max() if x.numel() else x

        def my_norm2(x): ...
        tapelab.fx.wrap("my_norm2")     # the same, for a function defined above

    Either way (also ``tapelab.fx.wrap(my_norm)`` as a statement below the function) the
    function becomes a permanent wrapper that records a node when an argument
    holds a Proxy and otherwise calls the function (one attribute read while nobody traces).
    PyTorch's name form swaps the module's global during each trace; tapelab swaps nothing
    (a trace stays private to its thread), so the name form binds the wrapper to that global
    once, where it is called: ``wrap("f")`` is ``f = wrap(f)``. A builtin's name (``"len"``)
    binds a wrapper of the builtin in that module. Returns the wrapper (decorator) or the name.
    """
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    if isinstance(fn_or_name, str):
        name = fn_or_name
        fn = frame.f_globals.get(name, getattr(builtins, name, None))
        if not callable(fn):
            raise NameError(f"wrap({name!r}): {frame.f_globals.get('__name__')} defines no function {name!r} above "
                            f"this call; define it first, or decorate it with @tapelab.fx.wrap")
    else:
        fn, name = fn_or_name, getattr(fn_or_name, "__name__", None)
        if frame.f_globals.get(name) is not fn:    # a decorator: the ``def`` binds what this returns
            return _recording(fn)
    # ``wrap("f")``, or ``wrap(f)`` as a statement below the def (as PyTorch's examples call it)
    frame.f_globals[name] = wrapper = _recording(fn)
    return fn_or_name if isinstance(fn_or_name, str) else wrapper


def _recording(fn: Callable) -> Callable:
    """``fn`` as a wrapper that records a ``call_function`` node when an argument holds a Proxy of a
    symbolic trace; the target is the wrapper (the name the caller now uses), or a builtin itself
    (``len``). Proxies of a ``GraphAppendingTracer`` run through ``fn``: that is how a graph pass
    inlines a wrapped call (PyTorch's wrapping is active only inside ``symbolic_trace``)."""
    if getattr(fn, "__fx_wrapped__", False):
        return fn

    @functools.wraps(fn)
    def recording(*args, **kwargs):
        if STATE.functions is not None:   # None whenever nobody traces (nor takes part otherwise)
            proxy = first_proxy(args, kwargs)
            if proxy is not None and not isinstance(proxy.tracer, GraphAppendingTracer):
                return proxy.tracer.create_proxy("call_function", target, args, kwargs)
        return fn(*args, **kwargs)
    target = fn if isinstance(fn, types.BuiltinFunctionType) else recording
    recording.__fx_wrapped__ = True
    return recording


class _TracingMode(Mode):
    """The dispatcher mode active during a trace: module calls go to the tracer's
    ``call_module``; ops on real tensors run eagerly. (Ops on Proxies were recorded by the
    protocol before the mode; one that gets here had it switched off and is refused.)"""

    def __init__(self, tracer: "Tracer"):
        self.tracer = tracer

    def dispatch(self, op, args, params):
        if first_proxy(args, params) is not None:
            raise TraceError(f"op '{op.name}' received a Proxy with the __torch_function__ protocol switched "
                             f"off (DisableTorchFunction): it cannot be recorded; trace outside that block")
        return eager(op, args, params)

    def call_module(self, module, forward, args, kwargs):
        return self.tracer.call_module(module, forward, args, kwargs)


@contextlib.contextmanager
def _intercepting(tracer: "Tracer"):
    """Inside: the tracer's mode is active, parameter reads ask the tracer, and Proxies take
    part in the ``__torch_function__`` protocol (so tapelab's functions record calls on them)."""
    with _TracingMode(tracer), reading_parameters(tracer.read_parameter), taking_part(Proxy):
        yield


class Tracer(TracerBase):
    """Turns a module or function into a ``Graph`` by running it on Proxies.

    Override points (as in PyTorch):
        ``is_leaf_module(m, qualname)``: whether ``m`` is recorded as one ``call_module``.
        ``call_module(m, forward, args, kwargs)``: what calling a submodule does.
        ``create_proxy(kind, target, args, kwargs)``: how a node and its Proxy are made.
        ``create_arg(a)``: how a Python value becomes a node argument (tensors become
        ``get_attr`` nodes).
        ``path_of_module(m)``: the dotted name of a submodule of the root.

    Args:
        autowrap_functions: functions to record as ``call_function`` nodes. PyTorch swaps them
            into the root's module during the trace; tapelab swaps nothing, so each must record
            by itself already: made by ``wrap``, or a tapelab function.
    """

    def __init__(self, autowrap_modules=(), autowrap_functions: tuple = (), param_shapes_constant: bool = False):
        for f in autowrap_functions:
            if not getattr(f, "__fx_wrapped__", False) and not (getattr(f, "__module__", None) or "").startswith(PACKAGE):
                raise TypeError(f"Tracer(autowrap_functions=...): {getattr(f, '__qualname__', f)!r} is not recorded "
                                "by itself; decorate it with @tapelab.fx.wrap (tapelab swaps no names while tracing)")
        self.param_shapes_constant = param_shapes_constant
        self.graph: Graph | None = None
        self.root: Module | None = None
        self.tensor_attrs: dict[int, str] = {}
        self.module_stack: list[tuple[str, str]] = []   # (path, class name) of modules traced through

    # ------------------------------------------------------------------ tracing
    def trace(self, root: Module | Callable, concrete_args: dict[str, Any] | None = None) -> Graph:
        """Trace ``root`` (a module, or a plain function) and return the graph; emits
        ``graph_traced`` (with no GraphModule: none is built here).

        Args:
            root: what to trace; for a module, its ``forward``.
            concrete_args: values for some arguments, fixed for this trace (e.g. a flag or
                ``None``); they stay in the signature with that value as default.
        """
        graph = self._record(root, concrete_args)
        _emit_traced(graph, None, root)
        return graph

    def _record(self, root: Module | Callable, concrete_args: dict[str, Any] | None) -> Graph:
        """``trace`` without the event: ``symbolic_trace`` emits once its GraphModule exists."""
        if isinstance(root, Module):
            self.root, fn = root, type(root).forward
        else:
            self.root, fn = Module(), root
        self.graph = Graph()
        self.module_stack = []
        self._bind_root(self.root)
        args = self.create_args_for_root(fn, isinstance(root, Module), concrete_args or {})
        if isinstance(root, Module):
            args = [root, *args]
        with _intercepting(self):
            result = fn(*args)
        self.create_node("output", "output", (self.create_arg(result),), {})
        return self.graph

    def _bind_root(self, root: Module) -> None:
        self.root = root
        self.tensor_attrs = {}
        for name, p in root.named_parameters():
            self.tensor_attrs.setdefault(id(p), name)
        for name, b in root.named_buffers():
            self.tensor_attrs.setdefault(id(b), name)
        self._module_paths = {id(m): name for name, m in root.named_modules()}

    def create_args_for_root(self, fn: Callable, is_module: bool, concrete_args: dict) -> list:
        """Placeholders (as Proxies) for ``fn``'s parameters; concrete ones pass their value."""
        params = list(inspect.signature(fn).parameters.values())
        if is_module:
            params = params[1:]
        unknown = set(concrete_args) - {p.name for p in params}
        if unknown:
            raise TraceError(f"concrete_args names {sorted(unknown)} that are not arguments of "
                             f"{fn.__qualname__}")
        args = []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
                raise TraceError(f"cannot trace {fn.__qualname__}: argument {p} is *args, **kwargs or "
                                 "keyword-only; wrap the call in a function with plain arguments")
            if p.name in concrete_args:
                value = concrete_args[p.name]
                self.create_node("placeholder", p.name, (value,), {})
                args.append(value)
                continue
            default = () if p.default is p.empty else (p.default,)
            args.append(self.create_proxy("placeholder", p.name, default, {}))
        return args

    # ------------------------------------------------------------------ override points
    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """``tapelab.nn`` and ``tapelab.ao.nn`` layers are leaves, except ``Sequential``; user modules are
        traced through."""
        cls = type(m)
        return (defined_in(cls, "nn") or defined_in(cls, "ao.nn")) and not isinstance(m, Sequential)

    def path_of_module(self, mod: Module) -> str:
        """The dotted name of ``mod`` inside the root (``"layers.0"``)."""
        try:
            return self._module_paths[id(mod)]
        except KeyError:
            raise NameError(f"module {type(mod).__name__} is not installed as a submodule of the traced "
                            "root; assign it as an attribute in __init__") from None

    def call_module(self, m: Module, forward: Callable, args: tuple, kwargs: dict):
        """Record a leaf module as ``call_module``; trace through anything else, with its
        path on ``module_stack`` while it runs."""
        path = self.path_of_module(m)
        if self.is_leaf_module(m, path):
            return self.create_proxy("call_module", path, args, kwargs)
        self.module_stack.append((path, type(m).__qualname__))
        try:
            return forward(*args, **kwargs)
        finally:
            self.module_stack.pop()

    def getattr(self, attr: str, attr_val: Any):
        """Reading a module attribute: Parameters become ``get_attr`` Proxies."""
        if isinstance(attr_val, Parameter) and id(attr_val) in self.tensor_attrs:
            return self.create_proxy("get_attr", self.tensor_attrs[id(attr_val)], (), {})
        return attr_val

    def read_parameter(self, module: Module, name: str, value: Any):
        """What ``module.<name>`` gives while tracing, for a Parameter: ``getattr``'s answer."""
        return self.getattr(name, value)

    def create_arg(self, a: Any):
        """Turn a Python value into a node argument: Proxies become their nodes, tensors
        of the root become ``get_attr`` nodes, other tensors are stored on the root as
        ``_tensor_constant<i>``; containers are converted element by element."""
        if isinstance(a, Tensor):
            name = self.tensor_attrs.get(id(a))
            if name is None:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                name = f"_tensor_constant{i}"
                self.root.__dict__[name] = a
                self.tensor_attrs[id(a)] = name
            return self.create_node("get_attr", name, (), {})
        if isinstance(a, Module):
            raise TraceError(f"a module ({type(a).__name__}) cannot be an argument of a traced call; "
                             "call it instead")
        return super().create_arg(a)


def symbolic_trace(root: Module | Callable, concrete_args: dict[str, Any] | None = None) -> GraphModule:
    """Trace ``root`` into a ``GraphModule`` whose generated ``forward`` computes the same.

    Args:
        root: an ``nn.Module`` or a plain function of tensors.
        concrete_args: arguments to fix for the trace (flags, ``None``).
    Returns:
        A ``GraphModule`` sharing ``root``'s submodules and parameters.

    >>> gm = tapelab.fx.symbolic_trace(lambda x: tapelab.relu(x) * 2)
    >>> print(gm.code)
    def forward(self, x):
        relu = tapelab.relu(x);  x = None
        mul = relu * 2;  relu = None
        return mul
    """
    tracer = Tracer()
    graph = tracer._record(root, concrete_args)
    name = _root_name(root)
    gm = GraphModule(tracer.root, graph, "GraphModule" if name == "<lambda>" else name)
    _emit_traced(graph, gm, root)
    return gm


def _root_name(root) -> str:
    return type(root).__name__ if isinstance(root, Module) else getattr(root, "__name__", "GraphModule")


def _emit_traced(graph: Graph, gm: GraphModule | None, root) -> None:
    """The ``graph_traced`` event, built only while someone listens."""
    if events.has_subscribers("graph_traced"):
        events.emit("graph_traced", events.GraphTraced(graph, gm, root, _root_name(root), "symbolic_trace"))


class _KeepModules(Tracer):
    """Every submodule a call: an unpickled GraphModule's graph, traced from its saved code."""

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        return True


_graph_module._TRACE_ALL_LEAVES[:] = [lambda root: _KeepModules().trace(root)]
