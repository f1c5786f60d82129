"""``Module``: the base class of every layer, mirroring ``torch.nn.Module``.

Attributes that are Parameters, Modules or buffers are registered by assignment. Calling a
module runs its hooks around ``forward``; while anyone watches dispatch (``STATE.slow``) it
also names the running module, so every recorded op knows its path (``encoder.layers.0``).
"""
from __future__ import annotations

import sys
import warnings
import weakref
from collections import OrderedDict
from typing import Callable, Iterator

from ...base.grad_mode import no_grad
from ...core.node import Node, _seq
from ...core.creation import empty
from ...base.dispatch_state import LOCAL
from ...core.dispatch import STATE, module_scope
from ...ops.convert import _parse_to_args
from ...core.tensor import Tensor
from ..parameter import Buffer, Parameter
from ._state_dict import _EXTRA_STATE_KEY_SUFFIX, RemovableHandle, StateDict, _IncompatibleKeys  # noqa: F401  (torch.nn.modules.module._IncompatibleKeys and _EXTRA_STATE_KEY_SUFFIX: libraries import them from here)

__all__ = ["Module", "RemovableHandle"]


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return obj.type()
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join((" " * n + ln) if ln else ln for ln in lines[1:])


_PARAMETER_READERS: list[Callable] = []   # innermost last; see ``reading_parameters``


# Modules called at the top while dispatch was watched (a tape recording), held weakly: views
# name the parameters they see from them (``parameter_names``), never the dispatcher.
_CALLED_ROOTS: "weakref.WeakSet[Module]" = weakref.WeakSet()

# The scope names a root's walk gave (``Module._name_tree``) stay right until a module's children
# change anywhere or another root's walk renames modules they share. ``_NAMES[0]`` is a token
# replaced on each such change; a root keeps the token its walk saw and walks again only when the
# token is no longer the current one (a step's forward then skips the walk: a model's
# ``named_modules`` each call was 0.6 us a module). A token is a bare object, so a pickled or
# copied root's token is never the current one.
_NAMES = [object()]


def _names_changed() -> None:
    _NAMES[0] = object()


class _Children(dict):
    """A module's ``_modules``: a dict that tells ``_NAMES`` of each change (a child added,
    removed, renamed or replaced, whoever writes it: ``__setattr__``, ``add_module``, the
    containers, or a library writing ``parent._modules[name] = new``)."""

    __slots__ = ()

    def __setitem__(self, key, value):
        _names_changed()
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        _names_changed()
        dict.__delitem__(self, key)

    def __ior__(self, other):
        _names_changed()
        return dict.__ior__(self, other)

    def pop(self, *args):
        _names_changed()
        return dict.pop(self, *args)

    def popitem(self):
        _names_changed()
        return dict.popitem(self)

    def clear(self):
        _names_changed()
        dict.clear(self)

    def update(self, *args, **kwargs):
        _names_changed()
        dict.update(self, *args, **kwargs)

    def setdefault(self, key, default=None):
        _names_changed()
        return dict.setdefault(self, key, default)


def parameter_names() -> dict[int, str]:
    """The qualified name (``encoder.layers.0.linear1.weight``) of each parameter of the modules
    called at the top while someone watched dispatch, by tape id (``tapelab.tape.tensor_id``):
    what a view of a recording names its parameter leaves by. Names follow the module paths the
    records carry; computed when asked (a view being built), so recording pays only a set add."""
    names: dict[int, str] = {}
    for root in list(_CALLED_ROOTS):
        for m in root.modules():
            path = m.__dict__.get("_tape_name")
            if path is None:
                continue
            for pname, p in m._parameters.items():
                if p is not None:
                    names.setdefault(p._uid(), f"{path}.{pname}" if path else pname)
    return names


class reading_parameters:
    """While active, reading a Parameter as a module attribute (``self.weight``) gives
    ``reader(module, name, parameter)`` instead of the parameter.

    The declared way for an interpreter to stand in for parameters (symbolic tracing turns
    each read into a ``get_attr`` Proxy) without replacing ``Module.__getattr__``. Scopes
    nest; the innermost reader answers.
    """

    __slots__ = ("reader",)

    def __init__(self, reader: Callable):
        self.reader = reader

    def __enter__(self) -> "reading_parameters":
        _PARAMETER_READERS.append(self.reader)
        return self

    def __exit__(self, *exc) -> None:
        _PARAMETER_READERS.remove(self.reader)


class Module(StateDict):
    """Base class for all neural network modules (its state-dict half: ``_state_dict.py``)."""

    training: bool
    _version = 1
    call_super_init = False

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected argument")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = _Children()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---------------------------------------------------------------- calling
    def __call__(self, *args, **kwargs):
        if not STATE.slow:
            if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks:
                return self._call_with_hooks(args, kwargs)
            return self.forward(*args, **kwargs)
        local = LOCAL   # one thread-local read for the modes and the path (STATE's properties read it each)
        modes = local.modes
        if modes:
            return modes[-1].call_module(self, self._call_in_scope, args, kwargs)
        path = local.module_path   # module_scope, inlined: a watched forward pays it per module
        path.append(self._scope_name(path))
        try:
            if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks:
                return self._call_with_hooks(args, kwargs)
            return self.forward(*args, **kwargs)   # as unwatched: hooks are looked at once, before forward
        finally:
            path.pop()

    __call__.__doc__ = ("Run ``forward`` with this module's hooks (and its name on the tape); "
                        "an active ``dispatch.Mode`` decides through its ``call_module`` hook.")

    def _call_in_scope(self, *args, **kwargs):
        """The call itself, named on the module path: what a mode's ``call_module`` runs."""
        with module_scope(self._scope_name()):
            return self._call_with_hooks(args, kwargs)

    def _scope_name(self, path: list | None = None) -> str:
        """This module's path from the outermost module being called (``path``: the calling thread's
        module path, when the caller has it); names are walked lazily."""
        if path is None:
            path = LOCAL.module_path
        if not path:
            if self.__dict__.get("_tape_names") is not _NAMES[0]:
                self._name_tree()
            return ""
        name = self.__dict__.get("_tape_name")
        if name is None:
            name = f"{path[-1]}.{type(self).__name__}" if path[-1] else type(self).__name__
        return name

    def _name_tree(self) -> None:
        """Name every module below this root by its path (``_tape_name``), and keep the token the
        names are valid under: only where every ``_modules`` on the way tells of its changes and
        none has its own ``named_modules`` (else the walk runs each call, as it always did)."""
        tracked = True
        for name, m in self.named_modules():
            d = m.__dict__
            d["_tape_name"] = name
            if type(d.get("_modules")) is not _Children or type(m).named_modules is not _NAMED_MODULES:
                tracked = False
        _CALLED_ROOTS.add(self)
        _names_changed()   # other roots' names of modules shared with this one may have changed
        self.__dict__["_tape_names"] = _NAMES[0] if tracked else None

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        for hid, hook in tuple(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw = None
        if self._backward_hooks or self._backward_pre_hooks:
            bw = _BackwardHook(self)
            args = bw.wrap_inputs(args)
        try:
            result = self.forward(*args, **kwargs)
        except Exception:
            for hid, hook in tuple(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called:
                    hook(self, args, None)
            raise
        for hid, hook in tuple(self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = res
        if bw is not None:
            result = bw.wrap_outputs(result)
        return result

    # ---------------------------------------------------------------- hooks
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)``) runs before ``forward``."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        _insert(self._forward_pre_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` runs after ``forward``; a non-None result replaces the output."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                                 self._forward_hooks_always_called)
        _insert(self._forward_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs once the gradients w.r.t. the tensor
        inputs are known; returning a tuple replaces ``grad_input``."""
        handle = RemovableHandle(self._backward_hooks)
        _insert(self._backward_hooks, handle.id, hook, prepend)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` runs before the module's backward; may return new grad_output."""
        handle = RemovableHandle(self._backward_pre_hooks)
        _insert(self._backward_pre_hooks, handle.id, hook, prepend)
        return handle

    # ---------------------------------------------------------------- registration
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            tensor = tensor.detach()
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters "
                             f"must be created explicitly. To express '{name}' as a function of another "
                             "Tensor, compute the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module | None") -> None:
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    # ---------------------------------------------------------------- attribute protocol
    def __getattr__(self, name: str):
        d = self.__dict__
        params = d.get("_parameters")
        if params is not None and name in params:
            if _PARAMETER_READERS:
                return _PARAMETER_READERS[-1](self, name, params[name])
            return params[name]
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            return buffers[name]
        modules = d.get("_modules")   # each store read once: a child is the common hit
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")  # a reassigned parameter keeps its place
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")  # a reassigned child keeps its place (PyTorch)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            d["_modules"][name] = value
        elif isinstance(value, Buffer) or (d.get("_buffers") is not None and name in d["_buffers"]):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(torch.nn.Buffer, torch.Tensor or None expected)")
            persistent = value.persistent if isinstance(value, Buffer) else \
                name not in self._non_persistent_buffers_set
            if isinstance(value, Buffer):
                self._forget(name)
            self.register_buffer(name, value, persistent)
        else:
            if name == "_modules":
                _names_changed()
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str | None = None) -> None:
        d = self.__dict__
        d.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                d[store].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, ()):
                del d[store][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    # ---------------------------------------------------------------- traversal
    def _named_members(self, get_members: Callable, prefix: str = "", recurse: bool = True,
                       remove_duplicate: bool = True) -> Iterator:
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, mod in modules:
            for k, v in get_members(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    # ---------------------------------------------------------------- modes and grads
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's ``forward`` in place with ``tapelab.compile``'s arguments (PyTorch
        2.2's ``Module.compile``). The module stays itself: calls, hooks (run around the compiled
        forward) and ``state_dict`` keys are unchanged, where ``tapelab.compile(module)`` wraps it
        (``_orig_mod.`` keys). The compiled forward is guarded on this module's training flag."""
        # the compiler is above nn in the layers: looked up where the package face put it, not imported
        compiler = sys.modules[f"{__name__.partition('.')[0]}.compiler"]
        self.__dict__["forward"] = compiler.compile(type(self).forward.__get__(self), *args, **kwargs)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = p.grad.detach() * 0

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---------------------------------------------------------------- device and dtype
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        for m in self.children():
            m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                p.data = fn(p)
                if p.grad is not None:
                    p.grad.data = fn(p.grad)
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``: floating-point
        parameters and buffers take the dtype; everything moves to the device."""
        dev, dt, _ = _parse_to_args(args, kwargs)  # Tensor.to's parsing (copy= does not apply)
        if dt is not None and not dt.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got "
                            f"desired dtype={dt}")

        def convert(t: Tensor) -> Tensor:
            out = t.to(dev) if dev is not None else t
            return out.to(dt) if dt is not None and t.is_floating_point() else out
        return self._apply(convert)

    def to_empty(self, *, device) -> "Module":
        """Parameters and buffers as uninitialised tensors of the same shapes on ``device``: how a
        model built on ``meta`` gets memory (then ``reset_parameters()`` or ``load_state_dict``)."""
        return self._apply(lambda t: empty(t.shape, dtype=t.dtype, device=device))

    def cpu(self) -> "Module":
        return self._apply(lambda t: t.cpu())

    def share_memory(self) -> "Module":
        """Parameters and buffers in shared memory (``Tensor.share_memory_``): hogwild workers
        forked afterwards train this very model."""
        return self._apply(lambda t: t.share_memory_())

    def cuda(self, device=None) -> "Module":
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type) -> "Module":
        return self._apply(lambda t: t.to(dst_type))

    def float(self) -> "Module":
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self) -> "Module":
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> "Module":
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self) -> "Module":
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    # ---------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"


_NAMED_MODULES = Module.named_modules   # a subclass overriding it names its tree its own way

def _insert(hooks: OrderedDict, key: int, hook: Callable, prepend: bool) -> None:
    hooks[key] = hook
    if prepend:
        hooks.move_to_end(key, last=False)


# ---------------------------------------------------------------- full backward hooks
class _IdentityNode(Node):
    """One identity node around a group of tensors, so a hook sees all their gradients at once."""

    __slots__ = ("n_outputs",)

    def __init__(self, tensors: list[Tensor]):
        self.edges = tuple((t.grad_fn, t._out_nr) if t.grad_fn is not None else (t._accumulator(), 0)
                           for t in tensors)
        self.n_outputs = len(tensors)
        self.seq = next(_seq)
        self.pre_hooks = self.hooks = self._metadata = None

    def name(self) -> str:
        return "BackwardHookFunctionBackward"

    @property
    def saved_tensors(self) -> tuple:
        return ()

    def run(self, grads):
        return tuple(grads)


def _wrap_group(values, on_grads: Callable) -> tuple:
    """Route the tensors among ``values`` that require grad through one identity node whose
    pre-hook calls ``on_grads(grads_by_position)``; returns the new values and that node."""
    from ...base.grad_mode import is_grad_enabled
    pos = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
    if not pos or not is_grad_enabled():
        return list(values), None
    node = _IdentityNode([values[i] for i in pos])
    out = list(values)
    for k, i in enumerate(pos):
        t = values[i]
        out[i] = Tensor._wrap(t._data, True, node, k, t._vc, t._device)
    n = len(values)

    def prehook(grads):
        full = [None] * n
        for k, i in enumerate(pos):
            full[i] = grads[k]
        new = on_grads(tuple(full))
        return None if new is None else [new[i] for i in pos]
    node.register_prehook(prehook)
    return out, node


_NO_INPUT_GRADS_WARNING = (
    "Full backward hook is firing when gradients are computed with respect to module outputs since no inputs "
    "require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details.")


def _warn_at_user_line(message: str) -> None:
    """A UserWarning attributed to the user's line that started this backward (``loss.backward()``), once
    per line as ``warnings.warn`` does: PyTorch's points there too, from inside its engine."""
    from ...autograd.anomaly import user_frame
    frame = user_frame()
    if frame is None:
        warnings.warn(message, UserWarning, stacklevel=2)
        return
    warnings.warn_explicit(message, UserWarning, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"),
                           registry=frame.f_globals.setdefault("__warningregistry__", {}))


class _BackwardHook:
    """Calls a module's full backward (pre-)hooks with ``grad_input`` and ``grad_output``."""

    def __init__(self, module: Module):
        self.module = module
        self.n_inputs = 0
        self.input_node = None
        self.grad_outputs = None

    def wrap_inputs(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        new, self.input_node = _wrap_group(args, self._on_input_grads)
        return tuple(new)

    def wrap_outputs(self, result):
        single = isinstance(result, Tensor)
        values = [result] if single else list(result) if isinstance(result, (tuple, list)) else None
        if values is None:
            return result
        new, node = _wrap_group(values, self._on_output_grads)
        if node is None:
            return result
        return new[0] if single else type(result)(new)

    def _on_output_grads(self, grads: tuple):
        for hook in tuple(self.module._backward_pre_hooks.values()):
            res = hook(self.module, grads)
            if res is not None:
                grads = tuple(res)
        self.grad_outputs = grads
        if self.input_node is None:
            _warn_at_user_line(_NO_INPUT_GRADS_WARNING)
            grad_inputs = (None,) * self.n_inputs
            for hook in tuple(self.module._backward_hooks.values()):
                res = hook(self.module, grad_inputs, grads)
                if res is not None and any(r is not None for r in res):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                       "always return None or None for all gradients.")
        return grads

    def _on_input_grads(self, grads: tuple):
        grad_inputs, changed = grads, False
        for hook in tuple(self.module._backward_hooks.values()):
            res = hook(self.module, grad_inputs, self.grad_outputs)
            if res is None:
                continue
            res = tuple(res)
            if len(res) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got "
                                   f"{len(res)}, but expected {len(grad_inputs)}")
            grad_inputs, changed = res, True
        return grad_inputs if changed else None
