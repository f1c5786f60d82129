"""Python source for a graph: one assignment per node, dead values freed as soon as possible.

Operators come out as operators (``add = x + y``), attributes as attributes
(``getattr_1 = x.shape``), tapelab's public functions by their public path
(``tapelab.relu(x)``; ``torch.relu(x)`` under ``install_aliases``, ``_public.shown_name``), and
any other callable or non-literal constant through a named global that ``PythonCode.globals``
supplies to ``exec``.
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
from ._public import PACKAGE, package, shown_name
from .node import Node, _public_path

__all__ = ["PythonCode", "generate", "is_identifier", "is_dotted_identifier", "checked_name"]

_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
           operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
           operator.rshift: ">>", operator.eq: "==", operator.ne: "!=", operator.lt: "<",
           operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}
_LITERALS = (int, float, bool, str, type(None), complex, type(Ellipsis), bytes)


def is_identifier(name) -> bool:
    """True when ``name`` can stand in generated source as a bare name: a ``str`` (not a
    subclass, whose ``repr``/``str`` could be anything) that is a Python identifier and no keyword."""
    return type(name) is str and name.isidentifier() and not keyword.iskeyword(name)


def is_dotted_identifier(path) -> bool:
    """True for ``a.b.c`` where every part is an identifier (see ``is_identifier``)."""
    return type(path) is str and all(is_identifier(p) for p in path.split("."))


def checked_name(name, what: str) -> str:
    """``name`` if it is an identifier; else ``ValueError`` (never pasted into source)."""
    if not is_identifier(name):
        raise ValueError(f"fx codegen: {what} {name!r} is not a valid Python identifier; "
                         "refusing to put it into generated source")
    return name


@dataclass
class PythonCode:
    """Generated source ``src`` for ``def forward(...)`` and the ``globals`` it runs against."""
    src: str
    globals: dict


class _Globals:
    """Names for objects the generated code refers to."""

    def __init__(self, taken: set[str]):
        self.taken = taken   # node names: a global must never be shadowed by a local
        # the package face under the name the program imported it by (``torch`` under install_aliases)
        self.map = {shown_name(PACKAGE): package(), "inf": math.inf, "nan": math.nan, "device": device,
                    "NoneType": type(None)}

    def add(self, obj, hint: str) -> str:
        for name, value in self.map.items():
            if value is obj and name not in ("inf", "nan"):
                return name
        base = re.sub(r"[^0-9A-Za-z_]", "_", str(hint)) or "_global"
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
            base = self.add(prims, 'prims')
            return f"{base}.{fn.__name__}" if is_identifier(fn.__name__) else \
                f"getattr({base}, {str(fn.__name__)!r})"
        path = _public_path(fn)
        if path is not None and is_dotted_identifier(path):
            return path
        name = getattr(fn, "__name__", type(fn).__name__)
        if getattr(fn, "__fx_wrapped__", False):   # fx.wrap's functions: PyTorch's global name, module_function
            name = f"{fn.__module__}_{name}".replace(".", "_")
        return self.add(fn, name)


def _format(a, g: _Globals) -> str:
    if isinstance(a, Node):
        return checked_name(a.name, "node name")
    if isinstance(a, tuple):
        items = ", ".join(_format(x, g) for x in a)
        if hasattr(a, "_fields"):
            return f"{g.add(type(a), type(a).__name__)}({items})"
        return f"({items},)" if len(a) == 1 else f"({items})"
    if isinstance(a, list):
        return "[" + ", ".join(_format(x, g) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{_format(k, g)}: {_format(v, g)}" for k, v in a.items()) + "}"
    if isinstance(a, slice):
        return f"slice({_format(a.start, g)}, {_format(a.stop, g)}, {_format(a.step, g)})"
    # only the exact literal types: a subclass may define any ``__repr__``, so it becomes a global
    if type(a) is float and not math.isfinite(a):
        return repr(a)
    if type(a) in _LITERALS:
        return repr(a)
    if type(a) is dtype:    # not repr: under ``install_aliases`` a dtype prints as ``torch.int64``
        return f"{shown_name(PACKAGE)}.{a.name}"
    return g.add(a, f"_{type(a).__name__.lower()}_constant")


def _call_args(node: Node, g: _Globals, skip: int = 0) -> str:
    parts = [_format(a, g) for a in node.args[skip:]]
    plain = {k: v for k, v in node.kwargs.items() if is_identifier(k)}
    parts += [f"{k} = {_format(v, g)}" for k, v in plain.items()]
    # any other key (``"x); import os; ("``, a keyword, a non-string) is a quoted literal
    odd = {k: v for k, v in node.kwargs.items() if not is_identifier(k)}
    if odd:
        parts.append("**" + _format(odd, g))
    return ", ".join(parts)


def _attr_path(target: str) -> str:
    expr = "self"
    for atom in str(target).split("."):
        expr = f"{expr}.{atom}" if is_identifier(atom) else f'getattr({expr}, "{atom}")'   # PyTorch's quoting
    return expr


def _expression(node: Node, g: _Globals) -> str:
    op, t = node.op, node.target
    if op == "get_attr":
        return _attr_path(t)
    if op == "call_module":
        return f"{_attr_path(t)}({_call_args(node, g)})"
    if op == "call_method":
        method = f"{_format(node.args[0], g)}.{t}" if is_identifier(t) else \
            f"getattr({_format(node.args[0], g)}, {_format(str(t), g)})"
        return f"{method}({_call_args(node, g, 1)})"
    if not node.kwargs:
        if t in _BINARY and len(node.args) == 2:
            return f"{_format(node.args[0], g)} {_BINARY[t]} {_format(node.args[1], g)}"
        if t in _UNARY and len(node.args) == 1:
            return f"{_UNARY[t]}{_format(node.args[0], g)}"
        if t is operator.getitem and len(node.args) == 2:
            return f"{_format(node.args[0], g)}[{_format(node.args[1], g)}]"
        if t is builtins.getattr and len(node.args) == 2 and is_identifier(node.args[1]):
            return f"{_format(node.args[0], g)}.{node.args[1]}"
    return f"{g.callable_name(t)}({_call_args(node, g)})"


def _trace_comment(stack_trace: str) -> str:
    """PyTorch's one-line summary of a node's ``stack_trace``: its innermost frame and code line."""
    lines = stack_trace.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = re.match(r'\s*File "(.+)", line (\d+), in (.+)', lines[i])
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f"# File: {m.group(1)}:{m.group(2)} in {m.group(3)}, code: {code}"
    return "# " + lines[-1].strip() if lines else ""


def generate(graph, root_name: str = "self", indent: str = "    ", verbose: bool = False) -> PythonCode:
    """Source of ``def forward(self, <placeholders>)`` for ``graph``.

    After each statement, names whose last use it was are set to ``None`` so a value's
    memory is freed as soon as the graph is done with it (as PyTorch's codegen does).
    ``verbose`` (``print_readable``'s form): before each run of nodes, where they were traced
    (``# File: ...``), or PyTorch's ``# No stacktrace found for following nodes``.
    """
    checked_name(root_name, "root module name")
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
    shown = None       # the stack trace the last comment summarised ("" after "no stacktrace")
    for node in nodes:
        if verbose and node.op not in ("placeholder", "output") and (node.stack_trace or "") != shown:
            shown = node.stack_trace or ""
            body += [""] if body else []
            body.append(_trace_comment(shown) if shown else "# No stacktrace found for following nodes")
        if node.op == "placeholder":
            name = node.target
            stars = len(name) - len(name.lstrip("*"))
            if stars > 2:
                raise ValueError(f"fx codegen: placeholder {name!r} is not a parameter name")
            checked_name(name[stars:], "placeholder name")
            if stars:
                params.append(name)
            else:
                params.append(f"{name} = {_format(node.args[0], g)}" if node.args else name)
            if node.name != name.lstrip("*"):
                body.append(f"{node.name} = {name.lstrip('*')}")
            continue
        if node.op == "output":
            body.append(f"return {_format(node.args[0], g)}")
            continue
        line = f"{checked_name(node.name, 'node name')} = {_expression(node, g)}"
        dead = [n.name for n in frees.get(node, [])] + ([node.name] if not node.users else [])
        if dead:
            line += ";  " + " = ".join(dead) + " = None"
        body.append(line)
    if not body or not body[-1].startswith("return"):
        body.append("return None")
    # PyTorch's text exactly (three newlines before, the indent after): programs print ``gm.code``
    src = f"\n\n\ndef forward({', '.join([root_name] + params)}):\n" + \
        "".join(f"{indent}{line}\n" if line else "\n" for line in body) + indent
    return PythonCode(src, g.map)
