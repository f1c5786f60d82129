"""``Graph``: the FX intermediate representation, a list of ``Node``s in execution order.

A graph reads top to bottom like the ``forward`` it came from::

    graph():
        %x : [num_users=1] = placeholder[target=x]
        %linear : [num_users=1] = call_module[target=linear](args = (%x,), kwargs = {})
        %relu : [num_users=1] = call_function[target=tapelab.relu](args = (%linear,), kwargs = {})
        return relu

Build one by hand with the opcode helpers (``placeholder``, ``call_function``, ...,
``output``), or get one from ``symbolic_trace``. New nodes go at the insertion point
(the end, unless inside ``with graph.inserting_before(node):``); ``lint()`` checks the
invariants and ``python_code()`` turns the graph back into Python.

>>> g = Graph()
>>> x = g.placeholder("x")
>>> y = g.call_function(tapelab.relu, (x,))
>>> g.output(y)
>>> print(g.python_code("self").src)
def forward(self, x):
    relu = tapelab.relu(x);  x = None
    return relu
"""
from __future__ import annotations

import builtins
import contextlib
import keyword
import re
from collections import defaultdict
from typing import Any, Callable, Iterator

from ._codegen import PythonCode, generate
from .node import Node, map_arg, qualified_name

__all__ = ["Graph", "PythonCode"]


def _snake_case(s: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s).lower()


class _Namespace:
    """Unique, legal Python identifiers for node names (``add``, ``add_1``, ``getattr_1``)."""

    _suffix = re.compile(r"(.*)_(\d+)$")

    def __init__(self):
        self.used: set[str] = set()
        self.base_count: dict[str, int] = defaultdict(int)

    def create_name(self, candidate: str) -> str:
        candidate = re.sub(r"[^0-9a-zA-Z_]+", "_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = "_" + candidate
        m = self._suffix.match(candidate)
        base, num = (candidate, None) if m is None else (m.group(1), int(m.group(2)))
        candidate = base if num is None else f"{base}_{num}"
        if not num:
            num = self.base_count[base]
        while candidate in self.used or keyword.iskeyword(candidate) or hasattr(builtins, candidate) \
                or candidate in ("self", "tapelab", "inf", "nan", "device", "NoneType"):
            num += 1
            candidate = f"{base}_{num}"
        self.used.add(candidate)
        self.base_count[base] = num
        return candidate


class _NodeList:
    """A live view of the graph's nodes in order (``reversed`` walks backwards)."""

    def __init__(self, root: Node, reverse: bool = False):
        self._root, self._reverse = root, reverse

    def __iter__(self) -> Iterator[Node]:
        step = "_prev" if self._reverse else "_next"
        cur = getattr(self._root, step)
        while cur is not self._root:
            nxt = getattr(cur, step)
            if not cur._erased:
                yield cur
            cur = nxt

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._root, not self._reverse))

    def __repr__(self) -> str:
        return repr(list(self))


class Graph:
    """The IR: a doubly linked list of nodes plus a namespace of their names.

    Args:
        owning_module: the ``GraphModule`` this graph belongs to (set by GraphModule).
    """

    def __init__(self, owning_module=None):
        self._root = Node(self, "", "output", "output", (), {})
        self._root._prev = self._root._next = self._root
        self._namespace = _Namespace()
        self._insert = self._root.prepend
        self.owning_module = owning_module

    def __getstate__(self) -> dict:
        """Pickled without its owning module (a GraphModule pickles its attributes and graph apart)."""
        return {**self.__dict__, "owning_module": None}

    # ------------------------------------------------------------------ nodes
    @property
    def nodes(self) -> _NodeList:
        """The nodes in execution order (a live view; safe to erase while iterating)."""
        return _NodeList(self._root)

    def find_nodes(self, *, op: str, target=None) -> list[Node]:
        """Nodes with opcode ``op`` (and ``target``, if given)."""
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    def output_node(self) -> Node:
        """The ``output`` node (the last node)."""
        last = self._root._prev
        if last is self._root or last.op != "output":
            raise RuntimeError("graph has no output node; call graph.output(value) first")
        return last

    def create_node(self, op: str, target, args: tuple | None = None, kwargs: dict | None = None,
                    name: str | None = None, type_expr: Any = None) -> Node:
        """Create a node and insert it at the current insertion point.

        Args:
            op: the opcode. target: see ``Node``. args, kwargs: its arguments.
            name: a name hint (made unique); by default derived from ``target``.
            type_expr: an optional type annotation for the value.
        Returns:
            The new ``Node``.
        """
        args = tuple(args or ())
        kwargs = dict(kwargs or {})
        for n in _nodes_in((args, kwargs)):
            if n.graph is not self:
                raise RuntimeError(f"argument {n} of new node belongs to another graph; "
                                   "copy it with node_copy first")
        candidate = name if name is not None else self._target_to_str(op, target)
        node = Node(self, self._namespace.create_name(candidate), op, target, args, kwargs, type_expr)
        self._insert(node)
        return node

    @staticmethod
    def _target_to_str(op: str, target) -> str:
        if op in ("call_method", "call_module", "get_attr", "placeholder"):
            return _snake_case(target.lstrip("*").replace(".", "_"))
        if op == "output":
            return "output"
        return _snake_case(getattr(target, "__name__", type(target).__name__))

    def placeholder(self, name: str, type_expr: Any = None, default_value: Any = ...) -> Node:
        """An input of ``forward`` named ``name`` (``default_value`` makes it optional)."""
        args = () if default_value is ... else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any = None) -> Node:
        """Read ``root.<qualified_name>`` (a parameter, buffer or constant)."""
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_function(self, the_function: Callable, args: tuple | None = None, kwargs: dict | None = None,
                      type_expr: Any = None) -> Node:
        """Call a free function: ``the_function(*args, **kwargs)``."""
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any = None) -> Node:
        """Call a method on ``args[0]``: ``args[0].method_name(*args[1:], **kwargs)``."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_module(self, module_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any = None) -> Node:
        """Call the submodule at ``module_name`` of the owning module."""
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def output(self, result, type_expr: Any = None) -> Node:
        """The value ``forward`` returns (a Node, or a tuple/list/dict of them)."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    # ------------------------------------------------------------------ editing
    @contextlib.contextmanager
    def inserting_before(self, n: Node | None = None):
        """New nodes go just before ``n`` (the start of the graph if None) inside this block."""
        old = self._insert
        self._insert = (n or self._root._next).prepend
        try:
            yield
        finally:
            self._insert = old

    @contextlib.contextmanager
    def inserting_after(self, n: Node | None = None):
        """New nodes go just after ``n`` (in order) inside this block (the end if None)."""
        old = self._insert
        self._insert = (n._next if n is not None else self._root).prepend
        try:
            yield
        finally:
            self._insert = old

    def erase_node(self, to_erase: Node) -> None:
        """Remove a node that has no users."""
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} "
                               f"users in the graph: {list(to_erase.users)}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        to_erase._update_args_kwargs((), {})
        to_erase._remove_from_list()
        to_erase._erased = True

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any] = lambda x: x) -> Node:
        """Copy ``node`` (maybe from another graph) into this one; ``arg_transform`` maps its
        input nodes to this graph's nodes."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        new = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        new.meta = dict(node.meta)
        new.stack_trace = node.stack_trace
        return new

    def graph_copy(self, g: "Graph", val_map: dict, return_output_node: bool = False):
        """Append every node of ``g`` except its output to this graph.

        ``val_map`` maps nodes of ``g`` to nodes here (pre-fill it to bind placeholders);
        it is filled in as nodes are copied. Returns the copied output *value* (or the
        output node itself with ``return_output_node=True``).
        """
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                out = map_arg(node.args[0], lambda n: val_map[n])
                return (out, node) if return_output_node else out
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Remove nodes whose values are never used and that have no side effects.

        Returns whether anything was removed.
        """
        impure = is_impure_node or (lambda n: n.is_impure())
        changed = False
        for node in reversed(self.nodes):
            if not node.users and not impure(node):
                self.erase_node(node)
                changed = True
        return changed

    # ------------------------------------------------------------------ checking and showing
    def lint(self) -> None:
        """Check the invariants: known opcodes, unique names, every argument defined earlier
        in this graph, users consistent with arguments, a single trailing output, and
        call_module/get_attr targets present on the owning module."""
        seen: set[Node] = set()
        names: set[str] = set()
        nodes = list(self.nodes)
        for i, node in enumerate(nodes):
            if node.graph is not self:
                raise RuntimeError(f"Node {node} does not belong to this Graph")
            if node.name in names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            names.add(node.name)
            for inp in node.all_input_nodes:
                if inp not in seen:
                    raise RuntimeError(f"Argument '{inp}' of Node '{node}' was used before it has been "
                                       "defined! Please check that Nodes in the graph are topologically ordered")
                if node not in inp.users:
                    raise RuntimeError(f"Node {inp} does not list user {node}")
            if node.op == "output" and i != len(nodes) - 1:
                raise RuntimeError(f"output node {node} is not the last node of the graph")
            if self.owning_module is not None and node.op in ("get_attr", "call_module"):
                from .node import _get_attr_path
                if _get_attr_path(self.owning_module, node.target) is None:
                    raise RuntimeError(f"Node {node} target {node.target} references nonexistent attribute "
                                       f"of {type(self.owning_module).__name__}")
            seen.add(node)

    def python_code(self, root_module: str = "self") -> PythonCode:
        """The graph as Python source of ``forward`` plus the globals that source needs."""
        return generate(self, root_module)

    def __str__(self) -> str:
        lines = ["graph():"]
        lines += [f"    {n.format_node()}" for n in self.nodes]
        return "\n".join(lines)

    def print_tabular(self) -> None:
        """Print opcode, name, target, args and kwargs of every node as a table
        (with the ``tabulate`` package when installed, else a plain aligned table)."""
        rows = [[n.op, n.name, _short_target(n), str(n.args), str(n.kwargs)] for n in self.nodes]
        headers = ["opcode", "name", "target", "args", "kwargs"]
        try:
            from tabulate import tabulate
            print(tabulate(rows, headers=headers))
            return
        except ImportError:
            pass
        widths = [max(len(r[i]) for r in rows + [headers]) for i in range(5)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        print(fmt.format(*headers).rstrip())
        print("  ".join("-" * w for w in widths))
        for r in rows:
            print(fmt.format(*r).rstrip())


def _short_target(n: Node) -> str:
    if n.op == "call_function":
        return qualified_name(n.target)
    return str(n.target)


def _nodes_in(a) -> list[Node]:
    found: list[Node] = []
    map_arg(a, found.append)
    return found
