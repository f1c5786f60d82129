"""Serve ``import torch`` / ``import torchvision`` from tapelab, to run existing programs unchanged.

``install_aliases()`` moves any real ``torch*`` / ``torchvision*`` entries out of ``sys.modules``
(they are kept and put back later), maps the top names to ``tapelab`` and ``tapelab.vision``, and
puts a finder first on ``sys.meta_path`` that answers ``torch.X`` with the module ``tapelab.X``
(and ``torchvision.X`` with ``tapelab.vision.X``). The two top modules answer to the names they are
imported as (``torch.__name__ == "torch"``, which libraries check), and so do the tensor classes:
``Tensor.__module__`` is ``"torch"`` and each tapelab Tensor subclass's module reads ``torch.*``
(``torch.nn.parameter``), because libraries pick the array library from ``type(x).__module__``
(autoray, under torchquad and quimb, maps ``expand_dims`` to ``unsqueeze`` only for ``"torch"``).
Nothing of another library is patched: only the import table changes, and ``uninstall_aliases()``
(or leaving the ``with`` block) restores it and the names.
A name tapelab does not have raises ``ModuleNotFoundError`` naming the tapelab module it looked for.

Example:
    >>> import tapelab
    >>> with tapelab.install_aliases():
    ...     import torch, torchvision
    ...     torch is tapelab, torchvision is tapelab.vision
    (True, True)
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

__all__ = ["install_aliases", "uninstall_aliases", "Aliases"]

_TARGETS = {"torch": "tapelab", "torchvision": "tapelab.vision"}
# PyTorch modules (and their submodules) tapelab keeps elsewhere because of its layers (checked before
# the prefixes)
_MOVED = {"torch.autograd.profiler": "tapelab.profiler.legacy", "torch._tensor_str": "tapelab.base.repr",
          "torch._inductor": "tapelab._dynamo.inductor", "torch._functorch": "tapelab._dynamo.functorch",
          "torch.cuda.amp": "tapelab.amp.cuda", "torch.cpu.amp": "tapelab.amp.cpu",
          "torch.distributed._tensor": "tapelab.distributed.tensor",   # DTensor's path before PyTorch 2.4
          "torch.utils.model_zoo": "tapelab._model_zoo",   # load_url: above utils in the layers, over hub
          # where libraries import default_collate from (opacus, detectron-style loaders)
          "torch.utils.data._utils": "tapelab.utils.data", "torch.utils.data._utils.collate": "tapelab.utils.data._collate",
          # quantization's module families, at their pre-torch.ao paths (old QAT code imports them there)
          "torch.nn.intrinsic": "tapelab.ao.nn.intrinsic", "torch.nn.qat": "tapelab.ao.nn.qat",
          "torch.nn.quantized": "tapelab.ao.nn.quantized",
          "torch.optim.adamw": "tapelab.optim.adam"}   # AdamW is Adam's subclass, in its module (pykeen)


def _under(name: str, table: dict[str, str]) -> str | None:
    """``name`` as served by the longest entry of ``table`` that it is or lies under, else None."""
    for alias in sorted(table, key=len, reverse=True):
        if name == alias or name.startswith(alias + "."):
            return table[alias] + name[len(alias):]
    return None


def _target(name: str, prefixes: dict[str, str]) -> str | None:
    """The tapelab module name that serves ``name``, or None when ``name`` is not aliased."""
    return (_under(name, _MOVED) if "torch" in prefixes else None) or _under(name, prefixes)


def _moved_child(name: str, prefixes: dict[str, str]) -> str | None:
    """The moved module that ``name`` stands for when ``from torch.utils import model_zoo`` looks the
    child up under its served parent's own name (``tapelab.utils.model_zoo``, which does not exist:
    the module lives elsewhere because of the layers), else None."""
    if "torch" not in prefixes or not name.startswith("tapelab."):
        return None
    for alias, moved in _MOVED.items():
        if _under(alias, prefixes) == name and importlib.machinery.PathFinder.find_spec(
                name.rpartition(".")[2], getattr(sys.modules.get(name.rpartition(".")[0]), "__path__", None)) is None:
            return moved
    return None


class _AliasLoader(importlib.abc.Loader):
    """Hands back an already-imported tapelab module instead of executing anything."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    def __init__(self, prefixes: dict[str, str]) -> None:
        self.prefixes = prefixes

    def find_spec(self, fullname: str, path=None, target=None):
        name = _target(fullname, self.prefixes) or _moved_child(fullname, self.prefixes)
        if name is None:
            return None
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(f"No module named {fullname!r}: tapelab serves it from {name!r}, "
                                      f"which does not exist ({exc})", name=fullname) from None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


class Aliases:
    """The installed aliases; a context manager that uninstalls them on exit."""

    def __init__(self, prefixes: dict[str, str]) -> None:
        self.prefixes = prefixes
        self.saved: dict[str, ModuleType] = {}
        self.names: dict[ModuleType, str] = {}   # the served top modules and their own names
        self.class_modules: dict[type, str] = {}  # the retagged tensor classes and their own modules
        self.finder = _AliasFinder(prefixes)
        self.active = False

    def install(self) -> Aliases:
        self.saved = {n: m for n, m in sys.modules.items() if _target(n, self.prefixes) is not None}
        for name in self.saved:
            del sys.modules[name]
        sys.meta_path.insert(0, self.finder)
        for alias, target in self.prefixes.items():
            module = sys.modules[alias] = importlib.import_module(target)
            self.names[module] = module.__name__
            module.__name__ = alias   # pyro asserts ``torch.__name__ == "torch"`` before patching torch.*
        sys.modules.update(_shadowed(self.prefixes))
        if "torch" in self.prefixes:
            self.class_modules = _classes()
            for cls, own in self.class_modules.items():
                cls.__module__ = _torch_module(cls, own)
        self.active = True
        return self

    def uninstall(self) -> None:
        if not self.active:
            return
        for name in [n for n in sys.modules if _target(n, self.prefixes) is not None]:
            del sys.modules[name]
        sys.modules.update(self.saved)
        for module, name in self.names.items():
            module.__name__ = name
        for cls, own in self.class_modules.items():
            cls.__module__ = own
        self.names, self.class_modules = {}, {}
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        self.active = False

    def __enter__(self) -> Aliases:
        return self

    def __exit__(self, *exc) -> None:
        uninstall_aliases()


def _shadowed(prefixes: dict[str, str]) -> dict[str, ModuleType]:
    """The served names of loaded submodules whose package exposes another object under their name
    (``torch.nn.parallel.replicate``: the function, over its module). Registered at install, so that
    importing one finds it in ``sys.modules``: loading it would set the module over the package's attribute."""
    found = {}
    for name, module in list(sys.modules.items()):
        parent, _, child = name.rpartition(".")
        if not parent or getattr(sys.modules.get(parent), child, module) is module:
            continue
        for alias, target in sorted(prefixes.items(), key=lambda item: len(item[1]), reverse=True):
            if name.startswith(target + "."):
                served = alias + name[len(target):]
                if _target(served, prefixes) == name:
                    found[served] = module
                break
    return found


def _classes() -> dict[type, str]:
    """Every class tapelab's loaded modules define, and every Tensor subclass it defines, with their modules:
    while ``torch`` is served, they name ``torch``'s modules (libraries test ``cls.__module__``: Keras takes
    a DataLoader by ``"torch.utils.data" in cls.__module__``)."""
    from .core.tensor import Tensor
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "tapelab" or name.startswith("tapelab."):
            for obj in list(vars(module).values()):
                if isinstance(obj, type) and obj.__module__ == name:
                    found[obj] = name
    todo = [Tensor]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("tapelab.") and cls not in found:
            found[cls] = cls.__module__
        todo.extend(cls.__subclasses__())
    return found


def _torch_module(cls: type, own: str) -> str:
    """``torch`` for the classes PyTorch defines in C (``Tensor``, and what tapelab's core and base layers
    export at the top: ``Size``, ``dtype``, ``device``, ``Generator``), else ``own`` under ``torch``'s name
    (``torch.utils.data.dataloader``; the alias finder serves that module, so pickles find the class)."""
    layer = own.split(".")[1] if own.count(".") else ""
    top = sys.modules["tapelab"]   # the package being served (read, not imported: it imports this module)
    if own == "tapelab.core.tensor" or layer in ("core", "base") and getattr(top, cls.__name__, None) is cls:
        return "torch"
    return "torch" + own[len("tapelab"):]


_current: list[Aliases] = []


def install_aliases(torch: bool = True, torchvision: bool = True) -> Aliases:
    """Make ``import torch`` resolve to tapelab and ``import torchvision`` to tapelab.vision.

    Lasts until ``uninstall_aliases()``; as a context manager (``with tapelab.install_aliases():``)
    it lasts for the block. Installing again replaces the previous aliases.
    """
    uninstall_aliases()
    prefixes = {k: v for k, v in _TARGETS.items() if {"torch": torch, "torchvision": torchvision}[k]}
    aliases = Aliases(prefixes).install()
    _current.append(aliases)
    return aliases


def uninstall_aliases() -> None:
    """Put back the import table as it was before ``install_aliases`` (real torch modules included)."""
    while _current:
        _current.pop().uninstall()
