"""``Node``: one instruction of an FX graph.

A graph is a list of nodes; each node is one of six opcodes, and its ``target``,
``args`` and ``kwargs`` mean different things per opcode:

================  ==========================  =================================  ==============
opcode            target                      args / kwargs                      value
================  ==========================  =================================  ==============
``placeholder``   the argument name (``x``)   ``args`` = ``(default,)`` or ``()``  a forward input
``get_attr``      dotted path (``l.weight``)  none                               ``root.l.weight``
``call_function`` a Python callable           its arguments                      ``target(*a, **k)``
``call_method``   a method name (``"relu"``)  ``args[0]`` is ``self``            ``a0.relu(*a[1:])``
``call_module``   dotted module path          the module's arguments             ``root.l(*a, **k)``
``output``        ``"output"``                ``args[0]`` is the returned value  the result
================  ==========================  =================================  ==============

Arguments may nest nodes inside tuples, lists, dicts and slices; ``map_arg`` walks them.
Each node knows its ``users`` (nodes whose arguments mention it), so rewrites are local:

>>> for n in gm.graph.nodes:
...     if n.op == "call_function" and n.target is torch.relu:
...         n.target = torch.nn.functional.gelu
>>> gm.recompile()
"""
from __future__ import annotations

import builtins
import operator
from typing import Any, Callable

from ._public import namespaces, shown_name

__all__ = ["Node", "map_arg", "map_aggregate", "Argument", "Target", "has_side_effect", "qualified_name"]

Argument = Any
Target = Callable | str   # what a node calls: a function, or a method / module / attribute name
OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")

_SIDE_EFFECTFUL: set = set()


def has_side_effect(fn: Callable) -> Callable:
    """Mark ``fn`` so dead-code elimination never removes its calls (usable as a decorator).

    Kept here, beside ``Node.is_impure`` which reads the marks, so the node module needs
    nothing from the graph module above it.
    """
    _SIDE_EFFECTFUL.add(fn)
    return fn


def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Apply ``fn`` to every leaf of ``a``, rebuilding tuples, lists, dicts and slices."""
    if isinstance(a, tuple):
        t = tuple(map_aggregate(x, fn) for x in a)
        return type(a)(*t) if hasattr(a, "_fields") else t
    if isinstance(a, list):
        return [map_aggregate(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a: Argument, fn: Callable[["Node"], Argument]) -> Argument:
    """Apply ``fn`` to every Node inside ``a`` (other leaves are kept)."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _collect_nodes(a: Argument) -> dict:
    found: dict = {}
    map_arg(a, lambda n: found.setdefault(n))
    return found


_OPERATOR_NAMES = {getattr(operator, n): f"operator.{n}" for n in dir(operator) if not n.startswith("_")}


def _public_path(fn) -> str | None:
    """The name code can call ``fn`` by: a builtin's name, ``tapelab.<f>`` or
    ``tapelab.nn.functional.<f>`` (``torch.<f>`` under ``install_aliases``); None if it has none of these."""
    name = getattr(fn, "__name__", None)
    if name is None:
        return None
    if getattr(builtins, name, None) is fn:
        return name
    for prefix, ns in namespaces():
        if getattr(ns, name, None) is fn:
            return f"{prefix}.{name}"
    return None


def qualified_name(fn) -> str:
    """The name a graph listing shows for a ``call_function`` target: ``operator.add``,
    ``tapelab.relu``, ``tapelab.nn.functional.relu``, ``getattr``, else ``module.qualname``."""
    if fn in _OPERATOR_NAMES:
        return _OPERATOR_NAMES[fn]
    path = _public_path(fn)
    if path is not None:
        return path
    name = getattr(fn, "__name__", repr(fn))
    module = getattr(fn, "__module__", None)
    module = shown_name(module) if isinstance(module, str) and module else "<unknown>"
    return f"{module}.{getattr(fn, '__qualname__', name)}"


class Node:
    """One instruction: ``name = opcode[target](*args, **kwargs)``.

    Fields:
        graph: the owning ``Graph``. name: the unique value name used in generated code.
        op: one of the six opcodes. target: see the module table.
        args, kwargs: arguments (may contain other Nodes); assigning them updates ``users``.
        users: dict (ordered set) of nodes that use this one.
        meta: free-form metadata for passes (``tensor_meta`` from ``ShapeProp``, ...).
        type: an optional annotation of the value's type. stack_trace: where it was traced.

    Nodes form a doubly linked list owned by the graph (``prev``, ``next``); move a node
    with ``prepend``/``append`` and rewire values with ``replace_all_uses_with``.
    """

    def __init__(self, graph, name: str, op: str, target, args: tuple, kwargs: dict, return_type=None):
        if op not in OPCODES:
            raise ValueError(f"unknown opcode {op!r}; expected one of {', '.join(OPCODES)}")
        if op == "call_function" and not callable(target):
            raise ValueError(f"call_function target must be callable, got {target!r}")
        if op in ("get_attr", "call_method", "call_module", "placeholder") and not isinstance(target, str):
            raise ValueError(f"{op} target must be a string, got {target!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.type = return_type
        self.users: dict[Node, None] = {}
        self.meta: dict = {}
        self.stack_trace: str | None = None
        self._input_nodes: dict[Node, None] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._prev = self._next = self
        self._erased = False
        self._update_args_kwargs(args, kwargs)

    # ------------------------------------------------------------------ arguments
    @property
    def args(self) -> tuple:
        """The positional arguments; assigning replaces them and updates ``users``."""
        return self._args

    @args.setter
    def args(self, a: tuple) -> None:
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self) -> dict:
        """The keyword arguments; assigning replaces them and updates ``users``."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: dict) -> None:
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self) -> list["Node"]:
        """Every Node mentioned in ``args`` and ``kwargs``, in order, without repeats."""
        return list(self._input_nodes)

    def _update_args_kwargs(self, args: tuple, kwargs: dict) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args = tuple(map_aggregate(tuple(args), lambda x: x))
        self._kwargs = dict(kwargs)
        self._input_nodes = _collect_nodes((self._args, self._kwargs))
        for new in self._input_nodes:
            new.users.setdefault(self)

    def update_arg(self, idx: int, arg: Argument) -> None:
        """Set ``args[idx] = arg``."""
        args = list(self._args)
        args[idx] = arg
        self.args = tuple(args)

    def update_kwarg(self, key: str, arg: Argument) -> None:
        """Set ``kwargs[key] = arg``."""
        self.kwargs = {**self._kwargs, key: arg}

    def replace_input_with(self, old: "Node", new: "Node") -> None:
        """Replace every occurrence of ``old`` in this node's arguments with ``new``."""
        swap = (lambda n: new if n is old else n)
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def replace_all_uses_with(self, replace_with: "Node",
                              delete_user_cb: Callable[["Node"], bool] = lambda user: True) -> list["Node"]:
        """Make every user of this node use ``replace_with`` instead; returns the users changed.

        ``delete_user_cb(user)`` can veto a user (return False to leave it alone).
        """
        changed = [u for u in list(self.users) if delete_user_cb(u)]
        for user in changed:
            user.replace_input_with(self, replace_with)
        return changed

    # ------------------------------------------------------------------ position
    @property
    def next(self) -> "Node":
        """The following node (the graph's root sentinel after the last node)."""
        return self._next

    @property
    def prev(self) -> "Node":
        """The preceding node (the graph's root sentinel before the first node)."""
        return self._prev

    def prepend(self, x: "Node") -> None:
        """Move ``x`` (of the same graph) to just before this node."""
        if x is self:
            return
        x._remove_from_list()
        p = self._prev
        p._next, x._prev, x._next, self._prev = x, p, self, x

    def append(self, x: "Node") -> None:
        """Move ``x`` (of the same graph) to just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    # ------------------------------------------------------------------ queries
    def is_impure(self) -> bool:
        """True when removing this node could change behaviour even if its value is unused:
        inputs, the output, in-place methods (``add_``) and functions marked by
        ``fx.has_side_effect``."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_method":
            return self.target.endswith("_") and not self.target.endswith("__")
        if self.op == "call_function":
            return self.target in _SIDE_EFFECTFUL or self.kwargs.get("inplace") is True
        if self.op == "call_module":
            mod = self.graph.owning_module
            sub = _get_attr_path(mod, self.target) if mod is not None else None
            return bool(getattr(sub, "inplace", False))
        return False

    def format_node(self) -> str:
        """The node as a line of the graph's IR listing, e.g.
        ``%add : [num_users=1] = call_function[target=operator.add](args = (%x, 1), kwargs = {})``."""
        if self.op == "placeholder":
            default = f" (default={self.args[0]!r})" if self.args else ""
            return f"%{self.name} : [num_users={len(self.users)}] = placeholder[target={self.target}]{default}"
        if self.op == "get_attr":
            return f"%{self.name} : [num_users={len(self.users)}] = get_attr[target={self.target}]"
        if self.op == "output":
            return f"return {self.args[0]!r}"
        target = qualified_name(self.target) if self.op == "call_function" else self.target
        return (f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target={target}]"
                f"(args = {_format_ir(self.args)}, kwargs = {_format_ir_kwargs(self.kwargs)})")

    def __repr__(self) -> str:
        return self.name


def _format_ir(a: Argument) -> str:
    if isinstance(a, Node):
        return f"%{a.name}"
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        inner = ", ".join(_format_ir(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(_format_ir(x) for x in a) + "]"
    if isinstance(a, dict):
        return _format_ir_kwargs(a, quote=True)
    return repr(a)


def _format_ir_kwargs(k: dict, quote: bool = False) -> str:
    return "{" + ", ".join(f"{repr(key) if quote else key}: {_format_ir(v)}" for key, v in k.items()) + "}"


def _get_attr_path(obj, target: str):
    for atom in target.split("."):
        obj = getattr(obj, atom, None)
        if obj is None:
            return None
    return obj
