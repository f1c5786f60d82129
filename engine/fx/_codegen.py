"""Python source for a graph: one assignment per node, dead values freed as soon as possible.

Operators come out as operators (``add = x + y``), attributes as attributes
(``getattr_1 = x.shape``), tapelab's public functions by their public path
(``tapelab.relu(x)``), and any other callable or non-literal constant through a named
global that ``PythonCode.globals`` supplies to ``exec``.
"""
from __future__ import annotations

import builtins
import keyword
import math
import operator
import re
from dataclasses import dataclass

from ..base.dtype import dtype
from ..base.device import device
from ._public import package
from .node import Node, _public_path

__all__ = ["PythonCode", "generate"]

_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
           operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
           operator.rshift: ">>", operator.eq: "==", operator.ne: "!=", operator.lt: "<",
           operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}
_LITERALS = (int, float, bool, str, type(None), complex, type(Ellipsis), bytes)


@dataclass
class PythonCode:
    """Generated source ``src`` for ``def forward(...)`` and the ``globals`` it runs against."""
    src: str
    globals: dict


class _Globals:
    """Names for objects the generated code refers to."""

    def __init__(self, taken: set[str]):
        self.taken = taken   # node names: a global must never be shadowed by a local
        self.map = {"tapelab": package(), "inf": math.inf, "nan": math.nan, "device": device,
                    "NoneType": type(None)}

    def add(self, obj, hint: str) -> str:
        for name, value in self.map.items():
            if value is obj and name not in ("inf", "nan"):
                return name
        base = re.sub(r"\W", "_", hint) or "_global"
        if base[0].isdigit() or keyword.iskeyword(base) or hasattr(builtins, base):
            base = "_" + base
        name, i = base, 0
        while name in self.map or name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.map[name] = obj
        return name

    def callable_name(self, fn) -> str:
        from .prims import Primitive, prims
        if isinstance(fn, Primitive):
            return f"{self.add(prims, 'prims')}.{fn.__name__}"
        return _public_path(fn) or self.add(fn, getattr(fn, "__name__", type(fn).__name__))


def _format(a, g: _Globals) -> str:
    if isinstance(a, Node):
        return a.name
    if isinstance(a, tuple):
        items = ", ".join(_format(x, g) for x in a)
        if hasattr(a, "_fields"):
            return f"{g.add(type(a), type(a).__name__)}({items})"
        return f"({items},)" if len(a) == 1 else f"({items})"
    if isinstance(a, list):
        return "[" + ", ".join(_format(x, g) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v, g)}" for k, v in a.items()) + "}"
    if isinstance(a, slice):
        return f"slice({_format(a.start, g)}, {_format(a.stop, g)}, {_format(a.step, g)})"
    if isinstance(a, float) and not math.isfinite(a):
        return repr(a)
    if isinstance(a, _LITERALS):
        return repr(a)
    if isinstance(a, dtype):
        return repr(a)
    return g.add(a, f"_{type(a).__name__.lower()}_constant")


def _call_args(node: Node, g: _Globals, skip: int = 0) -> str:
    parts = [_format(a, g) for a in node.args[skip:]]
    parts += [f"{k} = {_format(v, g)}" for k, v in node.kwargs.items()]
    return ", ".join(parts)


def _attr_path(target: str) -> str:
    expr = "self"
    for atom in target.split("."):
        expr = f"{expr}.{atom}" if atom.isidentifier() and not keyword.iskeyword(atom) else \
            f"getattr({expr}, {atom!r})"
    return expr


def _expression(node: Node, g: _Globals) -> str:
    op, t = node.op, node.target
    if op == "get_attr":
        return _attr_path(t)
    if op == "call_module":
        return f"{_attr_path(t)}({_call_args(node, g)})"
    if op == "call_method":
        return f"{_format(node.args[0], g)}.{t}({_call_args(node, g, 1)})"
    if not node.kwargs:
        if t in _BINARY and len(node.args) == 2:
            return f"{_format(node.args[0], g)} {_BINARY[t]} {_format(node.args[1], g)}"
        if t in _UNARY and len(node.args) == 1:
            return f"{_UNARY[t]}{_format(node.args[0], g)}"
        if t is operator.getitem and len(node.args) == 2:
            return f"{_format(node.args[0], g)}[{_format(node.args[1], g)}]"
        if t is builtins.getattr and len(node.args) == 2 and isinstance(node.args[1], str) \
                and node.args[1].isidentifier():
            return f"{_format(node.args[0], g)}.{node.args[1]}"
    return f"{g.callable_name(t)}({_call_args(node, g)})"


def generate(graph, root_name: str = "self", indent: str = "    ") -> PythonCode:
    """Source of ``def forward(self, <placeholders>)`` for ``graph``.

    After each statement, names whose last use it was are set to ``None`` so a value's
    memory is freed as soon as the graph is done with it (as PyTorch's codegen does).
    """
    nodes = list(graph.nodes)
    g = _Globals({n.name for n in nodes})
    last_use: dict[Node, Node] = {}
    for node in reversed(nodes):
        for inp in node.all_input_nodes:
            last_use.setdefault(inp, node)
    frees: dict[Node, list[Node]] = {}
    for value, user in last_use.items():
        frees.setdefault(user, []).append(value)
    params, body = [], []
    for node in nodes:
        if node.op == "placeholder":
            name = node.target
            if name.startswith("*"):
                params.append(name)
            else:
                params.append(f"{name} = {_format(node.args[0], g)}" if node.args else name)
            if node.name != name.lstrip("*"):
                body.append(f"{node.name} = {name.lstrip('*')}")
            continue
        if node.op == "output":
            body.append(f"return {_format(node.args[0], g)}")
            continue
        line = f"{node.name} = {_expression(node, g)}"
        dead = [n.name for n in frees.get(node, [])] + ([node.name] if not node.users else [])
        if dead:
            line += ";  " + " = ".join(dead) + " = None"
        body.append(line)
    if not body or not body[-1].startswith("return"):
        body.append("return None")
    src = f"\n\ndef forward({', '.join([root_name] + params)}):\n" + \
        "".join(f"{indent}{line}\n" for line in body)
    return PythonCode(src, g.map)
