"""``Interpreter`` runs a graph node by node; ``Transformer`` runs it to build a new graph.

An Interpreter is the graph's meaning spelled out in Python: each opcode is one method,
and overriding a method changes what that kind of node does. The call tree::

    run()                          drain steps(), return the output value
    └── steps()                    a generator: yields (node, value) after every node
        └── run_node(node)         fetch the node's argument values, dispatch on node.op
            ├── placeholder()      the next positional input (or the default)
            ├── get_attr()         fetch_attr(target)
            ├── call_function()    target(*args, **kwargs)
            ├── call_method()      getattr(args[0], target)(*args[1:], **kwargs)
            ├── call_module()      fetch_attr(target)(*args, **kwargs)
            └── output()           args[0]

Because ``steps()`` is a generator, a forward pass can be stepped one node at a time
with the kernel idle in between (the debugger does this); ``env`` holds the live values.
An exception from a node gains a line "While executing <node>" naming it.

>>> class NegSigmoid(Interpreter):
...     def call_function(self, target, args, kwargs):
...         if target is tapelab.sigmoid:
...             return -super().call_function(target, args, kwargs)
...         return super().call_function(target, args, kwargs)
>>> NegSigmoid(gm).run(x)

>>> for node, value in Interpreter(gm).steps(x):
...     print(node.name, tuple(value.shape) if hasattr(value, "shape") else value)
"""
from __future__ import annotations

from typing import Any, Iterator

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_arg
from .proxy import Proxy

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Execute ``module.graph`` on concrete values.

    Args:
        module: the ``GraphModule`` (or any module with a ``graph``) to run; attribute and
            submodule targets are fetched from it.
        garbage_collect_values: drop a value from ``env`` after its last use.
        graph: run this graph instead of ``module.graph``.
    """

    def __init__(self, module, garbage_collect_values: bool = True, graph: Graph | None = None):
        self.module = module
        self.graph = graph if graph is not None else module.graph
        self.submodules = dict(module.named_modules())
        self.env: dict[Node, Any] = {}
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        self.current_node: Node | None = None
        self.user_to_last_uses: dict[Node, list[Node]] = {}
        seen: set[Node] = set()
        for node in reversed(self.graph.nodes):
            for inp in node.all_input_nodes:
                if inp not in seen:
                    seen.add(inp)
                    self.user_to_last_uses.setdefault(node, []).append(inp)

    def run(self, *args, initial_env: dict[Node, Any] | None = None, enable_io_processing: bool = True):
        """Run the graph on ``args`` and return what its output node returns.

        Args:
            initial_env: values for some nodes, which are then not executed.
        """
        result = None
        for node, value in self.steps(*args, initial_env=initial_env):
            if node.op == "output":
                result = value
        return result

    def boxed_run(self, args_list: list):
        """``run`` taking its arguments as one list, which it clears."""
        args = list(args_list)
        args_list.clear()
        return self.run(*args)

    def steps(self, *args, initial_env: dict[Node, Any] | None = None) -> Iterator[tuple[Node, Any]]:
        """Run the graph lazily: yield ``(node, value)`` after executing each node.

        Nothing runs until the first ``next()``; abandoning the generator leaves the pass
        unfinished. The last pair is the output node and the result.
        """
        self.env = dict(initial_env or {})
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                value = self.run_node(node)
            except Exception as e:
                if self.extra_traceback:
                    msg = f"While executing {node.format_node()}"
                    e.args = (f"{e.args[0]}\n\n{msg}" if e.args else msg,) + tuple(e.args[1:])
                    if isinstance(e, KeyError):
                        raise RuntimeError(*e.args) from e
                raise
            self.env[node] = value
            if self.garbage_collect_values:
                for dead in self.user_to_last_uses.get(node, ()):
                    self.env.pop(dead, None)
            yield node, value

    def run_node(self, n: Node) -> Any:
        """Run one node: fetch its argument values, then call the method named by ``n.op``."""
        self.current_node = n
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ------------------------------------------------------------------ one method per opcode
    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Any:
        """The next positional input; its default (``args[0]``) when inputs run out."""
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one was "
                               "not passed in!") from None

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Any:
        """The attribute of the module at the dotted path ``target``."""
        return self.fetch_attr(target)

    def call_function(self, target, args: tuple, kwargs: dict) -> Any:
        """``target(*args, **kwargs)``."""
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        """``args[0].<target>(*args[1:], **kwargs)``."""
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        """Call the submodule at ``target``."""
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args: tuple, kwargs: dict) -> Any:
        """The value the graph returns."""
        return args[0]

    # ------------------------------------------------------------------ helpers
    def fetch_attr(self, target: str) -> Any:
        """Walk the dotted path ``target`` from the module."""
        obj = self.module
        for i, atom in enumerate(target.split(".")):
            if not hasattr(obj, atom):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(target.split('.')[:i + 1])}")
            obj = getattr(obj, atom)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        """``n``'s arguments with every Node replaced by its value."""
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args, n: Node):
        """Replace the Nodes in ``args`` by their values in ``env``."""
        def load(node: Node):
            if node not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {node}! Run Graph.lint() "
                                   "to diagnose such issues")
            return self.env[node]
        return map_arg(args, load)


class Transformer(Interpreter):
    """Rebuild a graph by running it on Proxies; override methods to rewrite nodes.

    Each opcode method returns a Proxy in ``self.new_graph``; what an override returns
    replaces the node. ``transform()`` returns the new ``GraphModule``. While it runs,
    calling tapelab functions on Proxies records them, as during tracing.

    >>> class ReluToGelu(Transformer):
    ...     def call_function(self, target, args, kwargs):
    ...         if target is tapelab.relu:
    ...             target = tapelab.nn.functional.gelu
    ...         return super().call_function(target, args, kwargs)
    >>> new_gm = ReluToGelu(gm).transform()
    """

    def __init__(self, module):
        super().__init__(module)
        from ._symbolic_trace import Tracer
        self.new_graph = Graph()
        self.tracer = Tracer()
        self.tracer.graph = self.new_graph
        self.tracer._bind_root(module)
        self.tracer.is_leaf_module = lambda m, qualname: True

    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        default = args[0] if args else ...
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_function(self, target, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def transform(self) -> GraphModule:
        """Run the transformation and return the new ``GraphModule``."""
        from ._symbolic_trace import _intercepting
        with _intercepting(self.tracer):
            result = self.run()
        self.new_graph.output(self.tracer.create_arg(result))
        return GraphModule(self.module, self.new_graph)
