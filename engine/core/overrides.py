"""PyTorch's ``__torch_function__`` protocol on the dispatcher (the public face is ``tapelab.overrides``).

Who takes part, in PyTorch's order: the innermost ``TorchFunctionMode`` entered in the calling
thread (popped while its handler runs, so the handler's own calls go to the modes outside it),
then the arguments whose type overrides ``__torch_function__`` (Tensor subclasses whose
``__torch_function__`` is not ``_disabled_torch_function_impl``, subclasses before their bases,
and tensor-likes), until one returns something other than ``NotImplemented``.

Where: every op passes ``dispatch.apply``. While a mode is entered in some thread, or a Tensor
subclass that takes part exists, this module installs its hook as the dispatcher's
``STATE.functions`` slot, which turns on the dispatcher's one flag; the slow path asks the hook
first. So a mode sees every op that no public function handed it first (a plain tensor's
methods and operators, engine-internal calls), with ``func`` the op as a callable (``OpFunction``:
``func(*args, **kwargs)`` runs it again and ``func.__name__`` is the op's name: ``mul`` for
``a * b``, as PyTorch passes ``Tensor.mul``). Public functions check at their entry and hand the
mode themselves, as PyTorch's (``torch.ones``, ``F.cross_entropy`` once, its ops unseen: they run
with the mode off its stack). Python-level functions that PyTorch guards with
``has_torch_function`` (``nn.init``) call ``handle_torch_function`` with their public function,
as PyTorch's do. With nobody taking part the hook is uninstalled and the eager path pays nothing.

Tensor-likes (objects that are not Tensors but whose type defines ``__torch_function__``, as
fx's ``Proxy``) take part while their type is registered with ``taking_part(cls)``: the hook is
installed for the block and asks them as it asks subclasses. Only calls that hold one are theirs,
so registering needs no mode and changes nothing for other threads' tensors. Composite public functions (Python bodies that
call several ops, or read their arguments before dispatching) are reached by the hook only op by
op, so they check for tensor-likes at their entry, as PyTorch's Python functions do::

    if _DISPATCH.functions is not None and has_tensor_like((input, target)):
        return handle_torch_function(cross_entropy, (input, target), input, target, ...)

``STATE.functions`` is None whenever nobody takes part: the check is one attribute read then.
``has_tensor_like`` asks registered tensor-likes, a program's Tensor subclasses and the entered
modes; the engine's own subclasses still see a composite's ops one by one.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Iterable
from types import FunctionType as _FunctionType

from ..base.dispatch_state import LOCAL, STATE
from .dispatch import PASS, apply, set_functions, set_tensor_likes
from .tensor import Tensor

__all__ = ["TorchFunctionMode", "taking_part", "taking_part_while_alive", "has_tensor_like", "handle_torch_function", "has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "is_tensor_like", "is_tensor_method_or_property",
           "get_default_nowrap_functions", "get_ignored_functions", "get_overridable_functions", "resolve_name",
           "BaseTorchFunctionMode", "wrap_torch_function", "OpFunction", "function_of", "overridable",
           "DisableTorchFunction", "DisableTorchFunctionSubclass", "_disabled_torch_function_impl",
           "_get_current_function_mode", "_get_current_function_mode_stack", "_len_torch_function_stack",
           "_pop_mode_temporarily", "_is_torch_function_mode_enabled"]


# ---------------------------------------------------------------- who takes part
_LOCK = threading.RLock()   # re-entrant: the weakref callbacks below may run (from gc) while it is held
_threads = 0                    # threads with a TorchFunctionMode entered
_subclasses: dict = {}          # weakref(cls) -> None: live Tensor subclasses that take part
_likes: dict = {}               # tensor-like type -> number of ``taking_part`` blocks open for it


def _sync() -> None:
    """Install the hook exactly while a mode is entered somewhere, a subclass takes part or a
    tensor-like type is registered."""
    set_functions(_hook if _threads or _subclasses or _likes else None)


@contextlib.contextmanager
def taking_part(cls: type):
    """Inside the block, arguments of the tensor-like type ``cls`` (not a Tensor; it defines
    ``__torch_function__``) are asked by every op they reach, in any thread (re-entrant)."""
    if isinstance(cls, type) and issubclass(cls, Tensor) or not hasattr(cls, "__torch_function__"):
        raise TypeError(f"taking_part(): {cls!r} must be a type that is not a Tensor and defines "
                        "__torch_function__")
    with _LOCK:
        _likes[cls] = _likes.get(cls, 0) + 1
        _sync()
    try:
        yield
    finally:
        with _LOCK:
            _likes[cls] -= 1
            if not _likes[cls]:
                del _likes[cls]
            _sync()


def taking_part_while_alive(cls: type, owner) -> None:
    """As ``taking_part(cls)`` for as long as ``owner`` lives: a ``GraphAppendingTracer`` keeps
    ``Proxy`` taking part while its Proxies (which hold it) can reach ops, as graphs built by hand
    from Proxies (``tapelab.cat([p, q])``) need outside any trace."""
    block = taking_part(cls)
    block.__enter__()
    weakref.finalize(owner, block.__exit__, None, None, None)


class _Token:
    """Counts one thread while its mode stack is not empty; dropped with the thread's state."""

    __slots__ = ()

    def __init__(self):
        global _threads
        with _LOCK:
            _threads += 1
            _sync()

    def __del__(self):
        global _threads
        if _LOCK is None:   # interpreter shutdown
            return
        with _LOCK:
            _threads -= 1
            _sync()


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """A subclass that sets ``__torch_function__`` to this takes no part (``nn.Parameter`` does):
    ops on it run as on a plain Tensor and return plain Tensors."""
    with DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))


def _takes_part(tp: type) -> bool:
    tf = getattr(tp, "__torch_function__", None)
    if tf is None or tp is Tensor:
        return False
    return getattr(tf, "__func__", tf) is not _disabled_torch_function_impl


def _init_subclass(cls, **kwargs) -> None:
    """Registers a Tensor subclass that takes part, so the dispatcher asks the hook while it lives.
    A subclass declaring ``_asked_by_ops = False`` is asked only by the functions that check their
    arguments themselves (``has_torch_function``; ``F.scaled_dot_product_attention``'s mask): a
    registered subclass puts every op in every thread on the slow path for as long as it lives."""
    super(Tensor, cls).__init_subclass__(**kwargs)
    if _takes_part(cls) and not cls.__module__.startswith("tapelab."):
        _dispatching_methods(cls)   # a program's subclass: PyTorch's method entry points (below)
    if _takes_part(cls) and getattr(cls, "_asked_by_ops", True):
        with _LOCK:
            _subclasses[weakref.ref(cls, _forget)] = None
            _sync()


# ---------------------------------------------------------------- a subclass's methods
# PyTorch hands a subclass's ``__torch_function__`` the public callable the program called, with that
# call's arguments: ``Tensor.add`` for ``x + y`` and ``x.add(y)``, ``Tensor.view`` for ``x.view(6)``,
# ``Tensor.__getitem__`` for ``x[0]``, ``Tensor.float``, ``Tensor.__rsub__`` for ``1 - x`` (fastai keys a
# dict on these: ``TensorBase.register_func(Tensor.add, TensorMask, TensorImageBase)``). A program's
# subclass that takes part gets, for each engine Tensor method it does not define itself, a method
# that hands the subclasses among its arguments that callable (the operators as PyTorch names them),
# and runs the engine's method as it is when none takes part (inside ``DisableTorchFunctionSubclass``,
# as ``Tensor.__torch_function__`` runs it). Public functions hand themselves at their entry
# (``torch.relu(x)`` passes ``torch.relu``; see ``_entry`` and ``has_tensor_like``); ops reached otherwise
# (a plain tensor's method with a subclass argument) still reach the dispatcher's hook with the op as
# ``func``; the engine's own subclasses (nested tensors, attention biases) speak that op-level protocol only.
_OPERATOR_FUNCS = {"__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub", "__isub__": "sub_",
                   "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_", "__truediv__": "div",
                   "__itruediv__": "div_", "__matmul__": "matmul", "__neg__": "neg", "__abs__": "abs",
                   "__pos__": "positive", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
                   "__ne__": "ne", "__mod__": "remainder"}
# a reflected operator Python calls on the subclass although the left operand is a Tensor (the subclass
# overrides it): PyTorch's subclasses do not, so the left operand's forward operator is what it sees
_REFLECTED = {"__radd__": "add", "__rsub__": "sub", "__rmul__": "mul", "__rtruediv__": "div", "__rmatmul__": "matmul",
              "__rpow__": "__pow__", "__rfloordiv__": "__floordiv__", "__rmod__": "remainder", "__rand__": "__and__",
              "__ror__": "__or__", "__rxor__": "__xor__", "__rlshift__": "__lshift__", "__rrshift__": "__rshift__"}
# Python's object protocol and metadata reads (no tensor result): left to the engine's methods
_NOT_DISPATCHED = frozenset({
    "__init__", "__new__", "__init_subclass__", "__torch_function__", "__torch_dispatch__", "__getattribute__",
    "__getattr__", "__setattr__", "__delattr__", "__dir__", "__class_getitem__", "__reduce_ex__", "__reduce__",
    "__getstate__", "__setstate__", "__deepcopy__", "__copy__", "__array__", "__array_wrap__", "__array_function__",
    "__array_ufunc__", "__dlpack__", "__dlpack_device__", "__hash__", "__sizeof__", "__repr__", "__str__",
    "__format__", "__len__", "__iter__", "__bool__", "__int__", "__float__", "__complex__", "__index__",
    "__contains__", "__reversed__", "as_subclass", "size", "dim", "ndimension", "numel", "nelement", "stride",
    "storage_offset", "is_contiguous", "element_size", "data_ptr", "get_device", "is_floating_point", "is_complex",
    "is_signed", "untyped_storage", "storage", "is_shared", "is_pinned", "is_set_to"})
_WRAPPERS: dict = {}


_programs: weakref.WeakSet = weakref.WeakSet()   # the program subclasses given entry points (and their subclasses)


def _dispatching_methods(cls) -> None:
    _programs.add(cls)
    for name, fn in list(vars(Tensor).items()):
        if (type(fn) is not _FunctionType or name in _NOT_DISPATCHED
                or (name.startswith("_") and not (name.startswith("__") and name.endswith("__")))
                or not getattr(fn, "__module__", "").startswith("tapelab")
                or getattr(cls, name, None) is not fn):
            continue
        method = _WRAPPERS.get(name)
        if method is None:
            method = _WRAPPERS[name] = _dispatching_method(name, fn)
        setattr(cls, name, method)


def _dispatching_method(name: str, engine_fn):
    tensor_dict = vars(Tensor)
    mapped, forward = _OPERATOR_FUNCS.get(name, name), _REFLECTED.get(name)

    def method(self, *args, **kwargs):
        impl = tensor_dict.get(name)
        local = LOCAL
        if impl is not engine_fn or local.subclasses_off or local.functions_off:
            return impl(self, *args, **kwargs)
        func = None
        if forward is not None and args and isinstance(args[0], Tensor):
            func, call = tensor_dict.get(forward), (args[0], self, *args[1:])
        if func is None:
            func, call = tensor_dict.get(mapped, impl), (self, *args)
        overloaded = _overloaded(_relevant(call, kwargs))
        if not overloaded:
            return impl(self, *args, **kwargs)
        types = tuple(type(a) for a in overloaded)
        for arg in overloaded:
            result = arg.__torch_function__(func, types, call, kwargs or None)
            if result is not NotImplemented:
                return result
        raise TypeError(f"no implementation found for 'torch.Tensor.{func.__name__}' on types that implement "
                        f"__torch_function__: {list(types)}")

    method.__name__, method.__qualname__, method.__doc__ = name, f"Tensor.{name}", engine_fn.__doc__
    return method


def _forget(ref) -> None:
    if _LOCK is None:
        return
    with _LOCK:
        _subclasses.pop(ref, None)
        _sync()


def _overloaded(relevant: Iterable, subclasses_off: bool = False) -> list:
    """The arguments whose types take part, one per type, a subclass before its bases (PyTorch's
    order); Tensor subclasses are skipped when ``subclasses_off``."""
    out: list = []
    types: list = []
    for arg in relevant:
        tp = type(arg)
        if isinstance(arg, Tensor):
            if subclasses_off or not _takes_part(tp) or tp in types:
                continue
        elif not hasattr(tp, "__torch_function__") or tp in types:
            continue
        index = len(out)
        for i, other in enumerate(types):
            if issubclass(tp, other):
                index = i
                break
        out.insert(index, arg)
        types.insert(index, tp)
    return out


def _relevant(args: tuple, params: dict | None = None) -> list:
    """An op's tensor-like arguments and params, one level into lists and tuples (``cat``'s tensors)."""
    out = []
    for a in (*args, *params.values()) if params else args:
        if isinstance(a, (list, tuple)):
            out.extend(x for x in a if not isinstance(x, (int, float, complex, bool, str)))
        elif not isinstance(a, (int, float, complex, bool, str)) and a is not None:
            out.append(a)
    return out


# ---------------------------------------------------------------- dispatch
class OpFunction:
    """An op as the ``func`` a handler receives (``__torch_function__`` and ``__torch_dispatch__``):
    calling it applies the op again. It is its own ``overloadpacket`` (PyTorch's ``aten.mul`` of
    ``aten.mul.Tensor``), so op counters keyed on the packet work."""

    __slots__ = ("op", "__name__", "__qualname__")
    __module__ = "tapelab"

    def __init__(self, op):
        self.op = op
        self.__name__ = self.__qualname__ = op.name

    def __call__(self, *args, **kwargs):
        return apply(self.op, *args, **kwargs)

    @property
    def overloadpacket(self) -> "OpFunction":
        return self

    _overloadpacket = overloadpacket

    def name(self) -> str:
        return f"tapelab::{self.op.name}"

    def __repr__(self) -> str:
        return f"<op {self.op.name}>"


_FUNCTIONS: dict = {}


def function_of(op) -> OpFunction:
    """The one ``OpFunction`` of ``op`` (handlers may key dicts on it)."""
    fn = _FUNCTIONS.get(op)
    if fn is None:
        fn = _FUNCTIONS[op] = OpFunction(op)
    return fn


def _hook(op, args: tuple, params: dict):
    """The dispatcher's ``functions`` slot: hand the op to a mode or a subclass, or ``PASS``."""
    local = LOCAL
    if local.functions_off:
        return PASS
    overloaded = (_overloaded(_relevant(args, params), local.subclasses_off)
                  if _likes or _subclasses and not local.subclasses_off else [])
    if not local.function_modes and not overloaded:
        return PASS
    return _handle(function_of(op), overloaded, args, dict(params) if params else None)


def _unregistered(op, args: tuple, params: dict):
    """The general path's call for an argument whose type defines ``__torch_function__`` without
    ``taking_part`` (a library's tensor-like: Keras's ``Variable``): PyTorch asks any such argument, so
    the op goes to it (and to an entered mode first) as the hook would send it; ``PASS`` when none does.
    Only a call that would otherwise be refused gets here, so nobody else pays for it."""
    if LOCAL.functions_off:
        return PASS
    overloaded = _overloaded(_relevant(args, params), LOCAL.subclasses_off)
    if not overloaded:
        return PASS
    return _handle(function_of(op), overloaded, args, dict(params) if params else None)


set_tensor_likes(_unregistered)


def _entry(fn, input):
    """The hook's ``entry``: a one-tensor public function made by ``dispatch.unary`` (``torch.relu``,
    ``torch.isnan``...) handed to a program's Tensor subclass or a tensor-like as itself, or ``PASS``."""
    if has_tensor_like((input,)):
        return handle_torch_function(fn, (input,), input)
    return PASS


_hook.entry = _entry


def _handle(func, overloaded: list, args: tuple, kwargs: dict | None):
    types = tuple(type(a) for a in overloaded)
    local = LOCAL
    modes = local.function_modes
    if modes and not local.functions_off:
        with _pop_mode_temporarily() as mode:
            result = mode.__torch_function__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    for arg in overloaded:
        result = arg.__torch_function__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    raise TypeError(f"no implementation found for '{resolve_name(func)}' on types that implement "
                    f"__torch_function__: {[t for t in types]}")


def handle_torch_function(public_api: Callable, relevant_args: Iterable, *args, **kwargs):
    """Run ``public_api`` through the active mode and the overriding arguments among ``relevant_args``
    (what a Python-level function does when ``has_torch_function`` says someone takes part)."""
    return _handle(public_api, _overloaded(_relevant(tuple(relevant_args)), LOCAL.subclasses_off), args, kwargs)


def overridable(fn: Callable) -> Callable:
    """A Python-level public function of a tensor (first argument) that a mode or an overriding
    argument may take over: the check PyTorch writes into such functions (``nn.init.uniform_``)."""
    @functools.wraps(fn)
    def checked(tensor, *args, **kwargs):
        if STATE.functions is not None and has_torch_function((tensor,)):
            return handle_torch_function(checked, (tensor,), tensor, *args, **kwargs)
        return fn(tensor, *args, **kwargs)
    return checked


def has_tensor_like(relevant_args: Iterable) -> bool:
    """Whether one of ``relevant_args`` (one level into lists and tuples) is of a tensor-like type
    registered with ``taking_part``: the check composite public functions make at their entry
    (after ``STATE.functions is not None``), so a traced call on a Proxy records as one call.
    A program's Tensor subclass (one with PyTorch's method entry points) is asked too, as PyTorch's
    Python functions ask it (fastai registers ``F.grid_sample`` for its image and flow-field types);
    An entered ``TorchFunctionMode`` is too: it sees the public function called, as PyTorch's
    (``torch.ones`` keyed in a dict, ``F.cross_entropy`` once), and the ops run inside it with the
    mode off its stack; the engine's own subclasses are not asked: they see a composite's ops."""
    local = LOCAL
    if local.functions_off:
        return False
    if local.function_modes:
        return True
    if not (_likes or _programs):
        return False
    relevant = _relevant(tuple(relevant_args))
    if _likes and any(type(a) in _likes for a in relevant):
        return True
    return bool(_programs) and not local.subclasses_off and any(type(a) in _programs for a in relevant)


def has_torch_function(relevant_args: Iterable) -> bool:
    """Whether a mode is active or one of ``relevant_args`` overrides ``__torch_function__``."""
    local = LOCAL
    if local.functions_off:
        return False
    if local.function_modes:
        return True
    return any(not isinstance(a, Tensor) and hasattr(type(a), "__torch_function__")
               or not local.subclasses_off and isinstance(a, Tensor) and _takes_part(type(a))
               for a in relevant_args)


def has_torch_function_unary(arg) -> bool:
    return has_torch_function((arg,))


def has_torch_function_variadic(*args) -> bool:
    return has_torch_function(args)


def is_tensor_like(inp) -> bool:
    """A Tensor, or an object whose type defines ``__torch_function__`` (PyTorch's duck type)."""
    return isinstance(inp, Tensor) or hasattr(type(inp), "__torch_function__")


def is_tensor_method_or_property(func) -> bool:
    """Whether ``func`` is a Tensor method or property getter (handlers pass ``self`` first then)."""
    return any(v is func or isinstance(v, property) and v.fget is func or getattr(v, "__func__", None) is func
               for v in vars(Tensor).values()) or getattr(func, "__name__", "") == "__get__"


def get_default_nowrap_functions() -> set:
    """Functions whose results ``Tensor.__torch_function__`` hands back unconverted (the ``grad``
    property's getter and setter in PyTorch; tapelab's properties are not dispatched, so none)."""
    return set()


def get_ignored_functions() -> set:
    """Public functions that never dispatch to ``__torch_function__``: those that make no tensor
    from their arguments (``is_tensor``, ``get_default_dtype``...) are not ops, so not seen."""
    return set()


_PACKAGE = __name__.split(".")[0]     # the package's import name (``install_aliases`` renames the module)


def get_overridable_functions() -> dict:
    """``{namespace: [public functions]}`` a ``__torch_function__`` handler may receive, as PyTorch's
    (keyed by the ``tapelab`` module, ``tapelab.nn.functional``, ``linalg``, ``fft``, ``special`` and
    the Tensor class for its methods): ``tapelab.add in get_overridable_functions()[tapelab]``."""
    import collections
    import sys
    import types
    out = collections.defaultdict(list)
    ignored = get_ignored_functions()
    package = _PACKAGE
    root = sys.modules[package]
    for ns in (root, root.nn.functional, root.linalg, root.fft, root.special):
        for name, fn in vars(ns).items():
            if (not name.startswith("_") and isinstance(fn, (types.FunctionType, types.BuiltinFunctionType))
                    and getattr(fn, "__module__", "").startswith(package) and fn not in ignored):
                out[ns].append(fn)
    for name, fn in vars(Tensor).items():
        if not name.startswith("_") or name.startswith("__") and name.endswith("__"):
            if isinstance(fn, types.FunctionType) or isinstance(fn, property):
                out[Tensor].append(fn.__get__ if isinstance(fn, property) else fn)
    return out


def resolve_name(f) -> str | None:
    """The public path of a function a handler received, as the program names the package
    (``torch.add``, ``torch.nn.functional.relu``, ``torch.Tensor.add`` under ``install_aliases``;
    ``tapelab.add`` otherwise), else its module and qualified name, or None."""
    import sys
    root = sys.modules[_PACKAGE]
    if isinstance(f, OpFunction):
        return f"{root.__name__}.{f.op.name}"
    fname = getattr(f, "__name__", None)
    if isinstance(fname, str):
        for path, ns in ((root.__name__, root), (f"{root.__name__}.nn.functional", root.nn.functional),
                         (f"{root.__name__}.linalg", root.linalg), (f"{root.__name__}.fft", root.fft),
                         (f"{root.__name__}.special", root.special), (f"{root.__name__}.Tensor", Tensor)):
            if vars(ns).get(fname) is f:
                return f"{path}.{fname}"
    name = getattr(f, "__qualname__", None)
    module = getattr(f, "__module__", None)
    return f"{module}.{name}" if name and module else None


# ---------------------------------------------------------------- modes and switches
class TorchFunctionMode:
    """Intercepts every op (and ``nn.init``'s functions) in the thread while entered with ``with``.

    Override ``__torch_function__(self, func, types, args=(), kwargs=None)``; call ``func(*args,
    **(kwargs or {}))`` to run the op (the mode is off the stack meanwhile); return
    ``NotImplemented`` to let the overriding arguments' types try.
    """

    def __init__(self) -> None:
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{type(self).__name__}.__torch_function__ is not implemented")

    def __enter__(self):
        local = LOCAL
        local.function_modes.append(self)
        if local.function_token is None:
            local.function_token = _Token()
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        local = LOCAL
        modes = local.function_modes
        if not modes or modes[-1] is not self:
            raise RuntimeError(f"{type(self).__name__} exited while it is not the innermost TorchFunctionMode")
        modes.pop()
        if not modes:
            local.function_token = None

    @classmethod
    def push(cls, *args, **kwargs):
        """Deprecated in PyTorch: ``with cls(*args, **kwargs):`` instead."""
        return cls(*args, **kwargs)


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode that runs every call it is handed as it was made (subclass it and call ``super()``)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def wrap_torch_function(dispatcher: Callable):
    """PyTorch's decorator for a Python function of tensors: ``dispatcher(*args, **kwargs)`` names the
    relevant arguments; a mode or an overriding argument among them receives the decorated function."""
    def inner(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return inner


class _pop_mode_temporarily:
    """The innermost mode, off the stack for the block (as PyTorch runs a mode's handler)."""

    def __enter__(self):
        self.mode = LOCAL.function_modes.pop()
        return self.mode

    def __exit__(self, *exc) -> None:
        LOCAL.function_modes.append(self.mode)


def _get_current_function_mode():
    modes = LOCAL.function_modes
    return modes[-1] if modes else None


def _get_current_function_mode_stack() -> list:
    return list(LOCAL.function_modes)


def _len_torch_function_stack() -> int:
    return len(LOCAL.function_modes)


def _is_torch_function_mode_enabled() -> bool:
    return bool(LOCAL.function_modes) and not LOCAL.functions_off


class _Switch:
    """A thread's protocol switch, off for the block (re-entrant)."""

    field = ""

    def __enter__(self):
        setattr(LOCAL, self.field, getattr(LOCAL, self.field) + 1)
        return self

    def __exit__(self, *exc) -> None:
        setattr(LOCAL, self.field, getattr(LOCAL, self.field) - 1)


class DisableTorchFunction(_Switch):
    """No mode and no subclass sees the ops of the block (``torch._C.DisableTorchFunction``)."""

    field = "functions_off"


class DisableTorchFunctionSubclass(_Switch):
    """Subclasses' ``__torch_function__`` is skipped in the block; modes still see the ops."""

    field = "subclasses_off"


# ---------------------------------------------------------------- Tensor's side
def _convert(ret, cls):
    if isinstance(ret, Tensor) and not isinstance(ret, cls):
        return as_subclass(ret, cls)
    if isinstance(ret, (tuple, list)):
        if hasattr(ret, "_fields"):   # torch.return_types (max(dim)'s values and indices), as PyTorch's
            return ret._make(_convert(r, cls) for r in ret)
        return type(ret)(_convert(r, cls) for r in ret)
    return ret


def _tensor_torch_function(cls, func, types, args=(), kwargs=None):
    """``Tensor.__torch_function__``: run ``func`` without subclass dispatch, then make the Tensor
    results instances of ``cls`` (why an op on a subclass returns that subclass)."""
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        ret = func(*args, **(kwargs or {}))
        if func in get_default_nowrap_functions():
            return ret
        return _convert(ret, cls)


def _check_subclass(cls, what: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"{what}(): cls must be a subclass of Tensor, got {cls!r}")


def _retype(out: Tensor, cls: type, what: str) -> Tensor:
    try:
        out.__class__ = cls
    except TypeError as e:
        raise TypeError(f"{what}(): cannot make a {cls.__name__} from a Tensor ({e})") from None
    return out


def as_subclass(self: Tensor, cls: type) -> Tensor:
    """A ``cls`` instance aliasing ``self``'s memory and attached to its graph (an alias, as PyTorch's)."""
    _check_subclass(cls, "as_subclass")
    with DisableTorchFunction():
        out = Tensor.__getitem__(self, Ellipsis)   # x[...]: the alias view, AliasBackward0 as PyTorch's
    return _retype(out, cls, "as_subclass")


def _make_subclass(cls: type, data: Tensor, require_grad: bool = False, **dispatch_options) -> Tensor:
    """``Tensor._make_subclass``: a ``cls`` leaf sharing ``data``'s memory and version counter,
    detached from its graph (how ``nn.Parameter``-like subclasses are built)."""
    _check_subclass(cls, "_make_subclass")
    with DisableTorchFunction():
        out = data.detach()
    out = _retype(out, cls, "_make_subclass")
    if require_grad:
        out.requires_grad_(True)
    return out


OPERATORS = {"__torch_function__": classmethod(_tensor_torch_function),
             "__init_subclass__": classmethod(_init_subclass), "as_subclass": as_subclass,
             "_make_subclass": staticmethod(_make_subclass)}
