"""``weights_only=True``: unpickling restricted to an allow-list, PyTorch 2.6+'s security model.

A pickle is a program; unpickling runs it. The restricted unpickler runs only the instructions
that build data: it resolves a global only if it is allowed (tensors and their rebuild functions,
storages, dtypes, ``torch.Size``, ``torch.device``, ``OrderedDict``, ``Counter``, ``set``, and what
the user allows with :func:`add_safe_globals` or :class:`safe_globals`), calls only allowed
globals, builds state only into tensors, ``OrderedDict`` and user-allowed types, appends only to
lists and sets items only in dicts. Anything else raises ``pickle.UnpicklingError`` with PyTorch's
messages, before it runs. Globals from ``sys``, ``os``, ``posix`` and ``nt`` are refused even when
allowed by the user.
"""
from __future__ import annotations

import _compat_pickle
import pickle
from collections import Counter, OrderedDict
from pickle import UnpicklingError
from typing import Any, Callable

from ..core.tensor import Tensor
from . import _names
from ._storage import set_obj_state

__all__ = ["add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals",
           "WeightsOnlyUnpickler", "failure_message", "allowed_global"]

_BLOCKED_MODULES = ("sys", "os", "posix", "nt")
_SAFE_GLOBALS: set = set()

UNSAFE_MESSAGE = (
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` "
    "from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will likely succeed, "
    "but it can result in arbitrary code execution. Do it only if you got the file from a "
    "trusted source.")
_DOCS_MESSAGE = ("\n\nCheck the documentation of torch.load to learn more about types accepted by default with "
                 "weights_only https://pytorch.org/docs/stable/generated/torch.load.html.")


# ---------------------------------------------------------------- the user's allow-list (torch.serialization API)
def add_safe_globals(safe_globals: list[Callable | tuple[Callable, str]]) -> None:
    """Allow these functions/classes in ``weights_only`` loads. Each item is an object (known by its
    ``__module__.__qualname__``) or ``(object, "full.path")`` for a checkpoint naming it differently."""
    _SAFE_GLOBALS.update(safe_globals)


def get_safe_globals() -> list[Callable | tuple[Callable, str]]:
    """The user-added globals allowed in ``weights_only`` loads."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals() -> None:
    """Forget every user-added global."""
    _SAFE_GLOBALS.clear()


class safe_globals:
    """``with safe_globals([MyClass]): tapelab.load(f)``: allow globals for the block only."""

    def __init__(self, safe_globals: list[Callable | tuple[Callable, str]]):
        self.safe_globals = safe_globals

    def __enter__(self) -> None:
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc) -> None:
        _SAFE_GLOBALS.difference_update(self.safe_globals)


def _user_globals() -> dict[str, Any]:
    out = {}
    for entry in _SAFE_GLOBALS:
        if isinstance(entry, tuple):
            if len(entry) != 2:
                raise ValueError(f"Expected tuple of length 2 (global, str of callable full path), but got "
                                 f"tuple of length: {len(entry)}")
            if type(entry[1]) is not str:
                raise TypeError(f"Expected second item in tuple to be str of callable full path, but got: "
                                f"{type(entry[1])}")
            out[entry[1]] = entry[0]
        else:
            out[f"{entry.__module__}.{entry.__qualname__}"] = entry
    return out


def allowed_global(module: str, name: str):
    """The object an allowed ``module.name`` stands for; raises PyTorch's UnpicklingError otherwise.

    A user-allowed tapelab class also allows the PyTorch name it stands for, so allowing
    ``tapelab.nn.Linear`` lets a PyTorch file's ``torch.nn.modules.linear.Linear`` load.
    """
    if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol-2 files name builtins as Python 2 did
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    full = f"{module}.{name}"
    if module in _BLOCKED_MODULES:
        raise UnpicklingError(f"Trying to load unsupported GLOBAL {full} whose module {module} is blocked.")
    table = _names.weights_only_table()
    if full in table:
        return table[full]
    user = _user_globals()
    if full in user:
        return user[full]
    if user and module.split(".")[0] == "torch":
        try:
            equivalent = _names.tapelab_equivalent(module, name)
        except UnpicklingError:
            equivalent = None
        if any(equivalent is obj for obj in user.values()):
            return equivalent
    why = _names.missing_feature(full)
    if why is not None:
        raise UnpicklingError(f"GLOBAL {full} is allowed by PyTorch's weights-only load, but tapelab has no {why}, "
                              "so this checkpoint cannot be loaded by tapelab.")
    shown = full[len("builtins."):] if full.startswith("builtins.") else full
    raise UnpicklingError(
        f"Unsupported global: GLOBAL {shown} was not an allowed global by default. "
        f"Please use `torch.serialization.add_safe_globals([{shown}])` or the "
        f"`torch.serialization.safe_globals([{shown}])` context manager to allowlist this global "
        "if you trust this class/function.")


def failure_message(message: str) -> str:
    """PyTorch's wording around a weights-only failure (torch.load's ``_get_wo_message``)."""
    if "was not an allowed global by default." in message:
        return ("Weights only load failed. This file can still be loaded, to do so you have two options, "
                "\033[1mdo those steps only if you trust the source of the checkpoint\033[0m. "
                f"\n\t(1) {UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with `weights_only=True` please check "
                "the recommended steps in the following error message.\n\tWeightsUnpickler error: "
                + message + _DOCS_MESSAGE)
    updated = f"Weights only load failed. {UNSAFE_MESSAGE}\n"
    if "is blocked" not in message:
        updated += ("Please file an issue with the following so that we can make "
                    "`weights_only=True` compatible with your use case: WeightsUnpickler error: ")
    return updated + "\n\n" + message + _DOCS_MESSAGE


# ---------------------------------------------------------------- the restricted unpickler
# Opcodes that only build data from the stream; every other one is refused before it runs.
_DATA_OPCODES = (pickle.MARK, pickle.STOP, pickle.POP, pickle.POP_MARK, pickle.DUP, pickle.FLOAT, pickle.INT,
                 pickle.BININT, pickle.BININT1, pickle.LONG, pickle.BININT2, pickle.NONE, pickle.STRING,
                 pickle.BINSTRING, pickle.SHORT_BINSTRING, pickle.UNICODE, pickle.BINUNICODE, pickle.DICT,
                 pickle.EMPTY_DICT, pickle.GET, pickle.BINGET, pickle.LONG_BINGET, pickle.LIST, pickle.EMPTY_LIST,
                 pickle.PUT, pickle.BINPUT, pickle.LONG_BINPUT, pickle.TUPLE, pickle.EMPTY_TUPLE, pickle.BINFLOAT,
                 pickle.PROTO, pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3, pickle.NEWTRUE, pickle.NEWFALSE,
                 pickle.LONG1, pickle.LONG4, pickle.BINBYTES, pickle.SHORT_BINBYTES, pickle.SHORT_BINUNICODE,
                 pickle.BINUNICODE8, pickle.BINBYTES8, pickle.BYTEARRAY8, pickle.EMPTY_SET, pickle.FROZENSET,
                 pickle.MEMOIZE, pickle.FRAME,
                 # these resolve globals or persistent ids, through the checked methods below
                 pickle.GLOBAL, pickle.STACK_GLOBAL, pickle.BINPERSID)


class _Opcodes(dict):
    def __missing__(self, op: int):
        raise UnpicklingError(f"Unsupported operand {op}")


class WeightsOnlyUnpickler(pickle._Unpickler):
    """Python's own unpickler with each instruction that could run code replaced by a checked one."""

    dispatch = _Opcodes({op[0]: pickle._Unpickler.dispatch[op[0]] for op in _DATA_OPCODES})

    def __init__(self, file, load_storage, encoding: str = "utf-8"):
        super().__init__(file, encoding=encoding)
        self.load_storage = load_storage
        self._allowed: set[int] = set()  # ids of the globals this file resolved (all allowed)

    def find_class(self, module: str, name: str):
        obj = allowed_global(module, name)
        self._allowed.add(id(obj))
        return obj

    def persistent_load(self, pid):
        if type(pid) is not tuple:
            raise UnpicklingError(f"persistent_load id must be tuple, but got {type(pid)}")
        kind = pid[0].decode("ascii") if pid and isinstance(pid[0], bytes) else (pid[0] if pid else None)
        if kind != "storage":
            raise UnpicklingError(f"Only persistent_load of storage is allowed, but got {kind!r}")
        return self.load_storage(pid)

    def _is_allowed(self, obj) -> bool:
        return id(obj) in self._allowed

    def _load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if not self._is_allowed(func):
            raise UnpicklingError(f"Trying to call reduce for unrecognized function {func}"
                                  + (f" which belongs to {func.__self__}" if hasattr(func, "__self__") else ""))
        self.stack[-1] = func(*args)

    def _new(self, cls, args, kwargs):
        from ..nn import Parameter
        if cls is Parameter:
            return Parameter(*args, **kwargs)
        if not (isinstance(cls, type) and self._is_allowed(cls)):
            raise UnpicklingError("Can only create new object for nn.Parameter or classes allowlisted "
                                  f"via `add_safe_globals` but got {cls}")
        return cls.__new__(cls, *args, **kwargs)

    def _load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, {}))

    def _load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, kwargs))

    def _load_build(self):
        from ..nn import Parameter
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) in (Tensor, Parameter):
            set_obj_state(inst, state)
        elif type(inst) is OrderedDict:
            inst.__dict__.update(state)
        elif any(type(inst) is obj for obj in _user_globals().values()):
            if hasattr(inst, "__setstate__"):
                inst.__setstate__(state)
            else:
                set_obj_state(inst, state)
        else:
            raise UnpicklingError("Can only build Tensor, Parameter, OrderedDict or types allowlisted "
                                  f"via `add_safe_globals`, but got {type(inst)}")

    def _load_appends(self):
        items = self.pop_mark()
        target = self.stack[-1]
        if type(target) is not list:
            raise UnpicklingError(f"Can only extend lists, but got {type(target)}")
        target.extend(items)

    def _load_append(self):
        item = self.stack.pop()
        target = self.stack[-1]
        if type(target) is not list:
            raise UnpicklingError(f"Can only append to lists, but got {type(target)}")
        target.append(item)

    def _dict_target(self, opcode: str) -> dict:
        target = self.stack[-1]
        if type(target) not in (dict, OrderedDict, Counter):
            raise UnpicklingError(f"Can only {opcode} for dict, collections.OrderedDict, "
                                  f"collections.Counter, but got {type(target)}")
        return target

    def _load_setitem(self):
        value, key = self.stack.pop(), self.stack.pop()
        self._dict_target("SETITEM")[key] = value

    def _load_setitems(self):
        items = self.pop_mark()
        target = self._dict_target("SETITEMS")
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def _load_additems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        if type(target) is not set:
            raise UnpicklingError(f"Can only add items to sets, but got {type(target)}")
        target.update(items)

    dispatch.update({pickle.REDUCE[0]: _load_reduce, pickle.NEWOBJ[0]: _load_newobj,
                     pickle.NEWOBJ_EX[0]: _load_newobj_ex, pickle.BUILD[0]: _load_build,
                     pickle.APPEND[0]: _load_append, pickle.APPENDS[0]: _load_appends,
                     pickle.SETITEM[0]: _load_setitem, pickle.SETITEMS[0]: _load_setitems,
                     pickle.ADDITEMS[0]: _load_additems})
