"""``GraphModule``: an ``nn.Module`` whose ``forward`` is Python generated from a ``Graph``.

The submodules, parameters and buffers the graph refers to (``call_module`` and
``get_attr`` targets) are copied in from the root by reference, so the GraphModule
shares weights with the module it was traced from and trains like any other module.
After editing ``gm.graph``, call ``gm.recompile()`` to regenerate ``gm.code``.

>>> gm = tapelab.fx.symbolic_trace(model)
>>> print(gm.code)
def forward(self, x):
    linear = self.linear(x);  x = None
    relu = tapelab.relu(linear);  linear = None
    return relu
"""
from __future__ import annotations

import ast
import copy
import importlib
import itertools
import linecache
import os
import pathlib
from types import ModuleType

from ..base.pytype import defined_in
from ..nn.modules.module import Module
from ..core.tensor import Tensor
from ..nn.parameter import Parameter
from ..serialization import save
from ._codegen import checked_name, generate, is_dotted_identifier, is_identifier
from ._public import PACKAGE, shown_name
from .graph import Graph

__all__ = ["GraphModule"]

_keys = itertools.count()


def _copy_attr(from_module, to_module, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    _set_field(to_module, field, getattr(from_module, field))


def _assign_attr(obj, to_module, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        to_module = t
    _set_field(to_module, field, obj)


def _set_field(module, field: str, value) -> None:
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        module.register_buffer(field, value)
    else:
        setattr(module, field, value)


class GraphModule(Module):
    """A module generated from ``graph``, with attributes taken from ``root``.

    Args:
        root: the module the graph's ``get_attr``/``call_module`` targets are read from,
            or a dict mapping each target path to its object.
        graph: the ``Graph``; ``gm.graph = g`` later swaps it and recompiles.
        class_name: the name shown by ``print_readable`` and ``repr``.

    Each GraphModule gets its own subclass, so assigning ``forward`` on recompile never
    affects another instance.
    """

    def __new__(cls, *args, **kwargs):
        base = next(t for t in cls.__mro__ if "_per_instance" not in t.__dict__)

        class GraphModuleImpl(base):
            _per_instance = True
        return super().__new__(GraphModuleImpl)

    def __init__(self, root, graph: Graph, class_name: str = "GraphModule"):
        super().__init__()
        type(self).__name__ = class_name
        type(self).__qualname__ = class_name
        if isinstance(root, Module):
            self.__dict__["training"] = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node.name} referenced target {node.target} but that target "
                                           "was not provided in ``root``!")
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise RuntimeError(f"Unsupported type {root} passed for root!")
        self.__dict__["meta"] = {}
        self.graph = graph

    # ------------------------------------------------------------------ graph and code
    @property
    def graph(self) -> Graph:
        """The underlying graph; assigning a new one recompiles."""
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        """The Python source of the generated ``forward``."""
        return self.__dict__["_code"]

    def recompile(self):
        """Regenerate ``forward`` (and ``code``) from ``self.graph``; call after editing it."""
        python_code = self.graph.python_code("self")
        src = python_code.src
        self.__dict__["_code"] = src
        type(self).forward = _forward_from_src(src, dict(python_code.globals))
        return python_code

    def __reduce__(self):
        """Pickled as PyTorch's: the module's state and its generated code (with what the code's
        globals are: modules by name, functions and classes by reference), not the ``Graph``;
        loading runs the code and traces it again, every submodule a leaf."""
        body = {k: v for k, v in self.__dict__.items() if k != "_graph"}
        names = {k: _ModuleRef(getattr(v.__spec__, "name", v.__name__)) if isinstance(v, ModuleType) else v
                 for k, v in self.graph.python_code("self").globals.items() if k != "__builtins__"}
        return _rebuild_graph_module, (body, names)

    def __deepcopy__(self, memo: dict) -> GraphModule:
        """A copy of the state and the graph (not traced again), named ``GraphModule`` as PyTorch's."""
        res = type(self).__new__(type(self))
        memo[id(self)] = res
        body = copy.deepcopy(self.__dict__, memo)
        GraphModule.__init__(res, _holding(body), body["_graph"])
        for k, v in body.items():   # what the graph does not refer to is kept too, as PyTorch does
            res.__dict__.setdefault(k, v)
        return res

    def print_readable(self, print_output: bool = True) -> str:
        """The module as a class definition with its generated forward; printed unless told not."""
        code = generate(self.graph, "self", verbose=True).src.strip("\n").rstrip()
        body = "\n".join("    " + line if line else line for line in code.splitlines())
        text = f"class {type(self).__name__}({shown_name(PACKAGE)}.nn.Module):\n{body}\n"
        if print_output:
            print(text)
        return text

    def __str__(self) -> str:
        return "\n".join([super().__repr__(), self.code,
                          "# To see more debug info, please use `graph_module.print_readable()`"])

    # ------------------------------------------------------------------ submodules
    def add_submodule(self, target: str, m: Module) -> bool:
        """Install ``m`` at the dotted path ``target``, creating empty parent modules on the way.

        Returns False when a path component exists but is not a Module.
        """
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            sub = getattr(mod, item, None)
            if sub is None:
                sub = Module()
                mod.add_module(item, sub)
            if not isinstance(sub, Module):
                return False
            mod = sub
        mod.add_module(field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Remove the submodule at ``target``; returns False if there was none."""
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            mod = getattr(mod, item, None)
            if not isinstance(mod, Module):
                return False
        if not isinstance(getattr(mod, field, None), Module):
            return False
        delattr(mod, field)
        return True

    def delete_all_unused_submodules(self) -> None:
        """Remove every submodule that no ``call_module`` or ``get_attr`` node reaches."""
        used: set[str] = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                used.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                if node.op == "call_module":
                    sub = self.get_submodule(node.target)
                    used.update(f"{node.target}.{name}" for name, _ in sub.named_modules() if name)
        for name, _ in list(self.named_modules()):
            if name and name not in used:
                self.delete_submodule(name)

    # ------------------------------------------------------------------ export
    def to_folder(self, folder: str | os.PathLike, module_name: str = "FxModule") -> None:
        """Write ``module.py`` (a standalone class), ``state_dict.pt`` and ``__init__.py``.

        Submodules of ``tapelab.nn`` are rebuilt from their ``repr``; weights load from the
        state dict (PyTorch's format, as torch's ``to_folder`` writes it). ``from <folder> import FxModule`` works.
        """
        checked_name(module_name, "to_folder module_name")
        folder = pathlib.Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save(self.state_dict(), folder / "state_dict.pt")
        root = shown_name(PACKAGE)     # ``torch`` under install_aliases, as the generated forward says
        init = [f"self.{line}" for line in _build_lines(self, "", root)]
        python_code = self.graph.python_code("self")
        imports = ["import math", "import os as _tapelab_fx_os", f"import {root}", f"from {root} import device",
                   "inf, nan, NoneType = math.inf, math.nan, type(None)"]
        for name, obj in python_code.globals.items():
            if name in (root, "inf", "nan", "device", "NoneType"):
                continue
            mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
            if not is_dotted_identifier(mod) or not is_identifier(qual) or not is_identifier(name):
                raise RuntimeError(f"to_folder: cannot write an import for global {name!r} ({obj!r}); "
                                   "only module-level functions and classes can be exported")
            imports.append(f"from {mod} import {qual} as {name}")
        forward = "\n".join("    " + ln if ln else ln for ln in python_code.src.strip("\n").splitlines())
        body = "\n".join(f"        {ln}" for ln in init)
        src = ("\n".join(imports) + f"\n\n\nclass {module_name}({root}.nn.Module):\n"
               f"    def __init__(self):\n        super().__init__()\n{body}\n"
               f"        self.load_state_dict({root}.load(_tapelab_fx_os.path.join(_tapelab_fx_os.path.dirname("
               "_tapelab_fx_os.path.abspath(__file__)), 'state_dict.pt')))\n\n"
               f"{forward}\n")
        (folder / "module.py").write_text(src)
        (folder / "__init__.py").write_text(f"from .module import {module_name}\n")


def _forward_from_src(src: str, env: dict):
    """The ``forward`` defined by generated source, its lines kept for tracebacks."""
    filename = f"<eval_with_key>.{next(_keys)}"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compile(src, filename, "exec"), env)
    return env["forward"]


class _ModuleRef:
    """A module a generated forward names, pickled as its import name."""

    def __init__(self, name: str):
        self.name = name


def _holding(body: dict, forward=None) -> Module:
    """A module whose state is ``body`` (and whose ``forward`` is ``forward``)."""
    root = Module.__new__(type("_CodeOnlyModule", (Module,), {} if forward is None else {"forward": forward}))
    root.__dict__.update(body)
    return root


# ``trace_all_leaves(root) -> Graph``: a symbolic trace that keeps every submodule a call, which
# ``_symbolic_trace`` (above this module: it builds GraphModules) installs when it is imported
_TRACE_ALL_LEAVES: list = []


def _rebuild_graph_module(body: dict, names: dict) -> GraphModule:
    """Unpickle a GraphModule: the saved code's forward on a module holding the saved state,
    traced again (submodules are leaves, as the original graph called them)."""
    env = {k: importlib.import_module(v.name) if isinstance(v, _ModuleRef) else v for k, v in names.items()}
    root = _holding(body, _forward_from_src(body["_code"], env))
    gm = GraphModule(root, _TRACE_ALL_LEAVES[0](root))
    for k, v in body.items():   # what the graph does not refer to is kept too, as PyTorch does
        gm.__dict__.setdefault(k, v)
    return gm


def _literal_call(text: str, class_name: str) -> bool:
    """True when ``text`` is exactly ``ClassName(<literals>, key=<literals>)``: a layer's
    ``repr`` reaches generated source only then (its fields may hold user strings)."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == class_name):
        return False
    for value in [*tree.args, *(k.value for k in tree.keywords)]:
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
    return all(k.arg is not None for k in tree.keywords)


def _build_lines(module: Module, path: str, root: str) -> list[str]:
    """Statements (relative to ``self``) that rebuild ``module``'s children, params and buffers;
    ``root``: the name the written file imports the package by."""
    lines = []
    for name, p in module._parameters.items():
        if p is not None:
            lines.append(f"{path}register_parameter({name!r}, {root}.nn.Parameter("
                         f"{root}.empty({list(p.shape)}, dtype={p.dtype!r})))")
    for name, b in module._buffers.items():
        if b is not None:
            lines.append(f"{path}register_buffer({name!r}, {root}.empty({list(b.shape)}, dtype={b.dtype!r}))")
    for name, child in module._modules.items():
        if type(child) is Module:
            lines.append(f"{path}add_module({name!r}, {root}.nn.Module())")
            lines += _build_lines(child, f"{path}get_submodule({name!r}).", root)
        elif defined_in(type(child), "nn") and _literal_call(repr(child), type(child).__name__):
            lines.append(f"{path}add_module({name!r}, {root}.nn.{repr(child)})")
        else:
            raise RuntimeError(f"to_folder: cannot rebuild submodule {path}{name} of type "
                               f"{type(child).__qualname__}; only tapelab.nn layers and plain containers")
    return lines
