"""``torch.library``: custom operators defined in Python (``custom_op``), with a backward
(``register_autograd``) and a shape function (``register_fake``).

A custom op here is its Python function, called eagerly; with a registered backward it runs as an
``autograd.Function`` whose ``backward`` is the one given, so gradients are the user's formula as in
PyTorch. The fake (meta) function is kept on the op (``CustomOpDef.fake``); tapelab's meta device runs
the real function on placeholders instead, so it is not called. Ops are looked up by their
``"namespace::name"`` with ``get_op``, and called as ``torch.ops.namespace.name(...)``.

The older interface, ``Library(ns, "DEF")`` with ``lib.define(schema)`` and ``lib.impl(name, fn, key)``
(or ``torch.library.define``/``impl``), serves its ops the same way: ``torch.ops.ns.name`` is an
``OpOverloadPacket`` whose overloads (``.default``, ``.name``) run the kernel ``impl`` gave them, called
eagerly so autograd records what it does. Kernels are kept per dispatch key and chosen by the call's
device as PyTorch's dispatcher does (``_Kernels``): ``Autograd<Device>`` first, then the device's own
key (``CPU``, ``CUDA``), then the composite keys; ``Library.impl`` also gives a ``custom_op`` device kernels.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, Iterable

from .autograd.function import Function
from .core.tensor import Tensor
from .ops import custom

__all__ = ["custom_op", "triton_op", "register_fake", "register_autograd", "impl_abstract", "get_op", "CustomOpDef", "Library",
           "define", "impl", "OpOverloadPacket", "OpOverload"]

_OPS: dict[str, "CustomOpDef"] = {}


_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "xpu": "XPU", "mps": "MPS"}
_ANY_DEVICE_KEYS = ("CompositeExplicitAutograd", "CompositeImplicitAutograd")


def _dispatch_key(name: str) -> str:
    """A dispatch key from ``impl``'s ``types`` or ``dispatch_key`` (``"cpu"`` is ``"CPU"``; none is the
    catch-all ``CompositeImplicitAutograd``)."""
    return _DEVICE_KEYS.get(name, name) or "CompositeImplicitAutograd"


def _device_type(args, kwargs) -> str:
    """The device type of a call: that of its first tensor argument (in a list too), cpu without one."""
    for a in (*args, *kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, Tensor):
                return t.device.type
    return "cpu"


class _Kernels:
    """An op's kernels by dispatch key, and the one PyTorch's dispatcher picks for a call's device: an
    autograd kernel (``AutogradCPU``, ``Autograd``) runs in place of the op's backward; else the
    device's backend kernel, else a device-independent one (a kernel for ``"CUDA"`` never runs on cpu)."""

    def __init__(self):
        self.by_key: dict[str, Callable] = {}

    def autograd(self, device: str) -> Callable | None:
        return self.by_key.get("Autograd" + _DEVICE_KEYS.get(device, device.upper())) or self.by_key.get("Autograd")

    def backend(self, device: str) -> Callable | None:
        found = self.by_key.get(_DEVICE_KEYS.get(device, device.upper()))
        for key in _ANY_DEVICE_KEYS:
            found = found or self.by_key.get(key)
        if found is None and device == "meta":   # the meta device runs host forwards on placeholders
            found = self.by_key.get("CPU")
        return found

    def missing(self, qualname: str, device: str) -> NotImplementedError:
        backend = _DEVICE_KEYS.get(device, device.upper())
        return NotImplementedError(
            f"Could not run '{qualname}' with arguments from the '{backend}' backend. This could be because the "
            "operator doesn't exist for this backend, or was omitted during the selective/custom build process "
            f"(if using custom build). (tapelab: no kernel was registered with impl() for '{qualname}' on {backend})")


class CustomOpDef:
    """A registered custom op: calling it runs the kernel chosen for its device (its function unless
    ``register_kernel``/``Library.impl`` gave another), through its backward when one is registered."""

    def __init__(self, qualname: str, fn: Callable, mutates_args, schema: str | None, device_types=None):
        self._qualname, self._fn, self._mutates_args, self._schema = qualname, fn, mutates_args, schema
        self.fake: Callable | None = None
        self._function: type | None = None
        self._kernels = _Kernels()
        self.register_kernel(device_types or "CompositeExplicitAutograd", fn)
        functools.update_wrapper(self, fn)

    def _backend(self, args: tuple, kwargs: dict) -> Callable:
        device = _device_type(args, kwargs)
        kernel = self._kernels.backend(device)
        if kernel is None:
            raise self._kernels.missing(self._qualname, device)
        return kernel

    def __call__(self, *args, **kwargs):
        direct = self._kernels.autograd(_device_type(args, kwargs))
        if direct is not None:
            return direct(*args, **kwargs)
        if self._function is None:
            return self._backend(args, kwargs)(*args, **kwargs)
        if kwargs:   # autograd.Function.apply is positional: keyword arguments go to their places
            bound = inspect.signature(self._fn).bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
        return self._function.apply(*args)

    @property
    def default(self) -> "CustomOpDef":
        """``torch.ops.ns.name.default``: a custom op has the one overload."""
        return self

    def overloads(self) -> list[str]:
        return ["default"]

    def register_kernel(self, device_types, fn: Callable | None = None):
        """Make ``fn`` the op's kernel for ``device_types`` (a decorator when ``fn`` is omitted)."""
        def register(f):
            for key in ([device_types] if isinstance(device_types, str) else device_types):
                self._kernels.by_key[_dispatch_key(key)] = f
            return f
        return register if fn is None else register(fn)

    def register_fake(self, fn: Callable | None = None):
        def register(f):
            self.fake = f
            return f
        return register if fn is None else register(fn)

    def register_autograd(self, backward: Callable, *, setup_context: Callable | None = None) -> None:
        name = self._qualname.replace("::", "_")
        self._function = type(name, (Function,), {
            "forward": staticmethod(lambda *args: self._backend(args, {})(*args)),
            "setup_context": staticmethod(setup_context or (lambda ctx, inputs, output: None)),
            "backward": staticmethod(backward),
        })

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: str | Iterable[str] = (),
              device_types=None, schema: str | None = None, tags=None):
    """Register ``fn`` as the op ``"namespace::name"`` (a decorator when ``fn`` is omitted)."""
    if "::" not in name:
        raise ValueError(f"custom_op: expected a qualified name 'namespace::name', got {name!r}")

    def register(f: Callable) -> CustomOpDef:
        op = _OPS[name] = CustomOpDef(name, f, mutates_args, schema, device_types)
        custom.register(name, op)
        return op
    return register if fn is None else register(fn)


def triton_op(name: str, fn: Callable | None = None, /, *, mutates_args: str | Iterable[str],
              schema: str | None = None):
    """A custom op whose body launches Triton kernels in PyTorch; here its body runs eagerly as any
    custom op's (spikingjelly registers its neuron ops this way, with device kernels beside it)."""
    return custom_op(name, fn, mutates_args=mutates_args, schema=schema)


def get_op(op: str | CustomOpDef) -> CustomOpDef:
    """The custom op registered as ``op`` (a ``"namespace::name"`` or the op itself)."""
    if isinstance(op, CustomOpDef):
        return op
    if op not in _OPS:
        raise ValueError(f"no custom op named {op!r} is registered (torch.library.custom_op registers one)")
    return _OPS[op]


def register_fake(op: str | CustomOpDef, func: Callable | None = None, /, *, lib=None, _stacklevel: int = 1):
    """Register the shape function of ``op`` (a decorator when ``func`` is omitted)."""
    return get_op(op).register_fake(func)


impl_abstract = register_fake


def register_autograd(op: str | CustomOpDef, backward: Callable, /, *, setup_context: Callable | None = None,
                      lib=None) -> None:
    """Give ``op`` the backward ``backward(ctx, *grads)``; ``setup_context(ctx, inputs, output)`` saves what it needs."""
    get_op(op).register_autograd(backward, setup_context=setup_context)


# ---------------------------------------------------------------- Library: define a schema, impl a kernel
class OpOverload:
    """One overload of a ``Library`` op (``torch.ops.ns.name.default``): runs the kernel ``impl`` gave it."""

    def __init__(self, packet: "OpOverloadPacket", overload: str, schema: str):
        self._packet, self._overloadname, self._schema = packet, overload, schema
        self._kernels = _Kernels()

    @property
    def name(self) -> str:
        return self._packet._qualname + ("" if self._overloadname == "default" else f".{self._overloadname}")

    def __call__(self, *args, **kwargs):
        device = _device_type(args, kwargs)
        kernel = self._kernels.autograd(device) or self._kernels.backend(device)
        if kernel is None:
            raise self._kernels.missing(self._packet._qualname, device)
        return kernel(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{self._packet._qualname.replace('::', '.')}.{self._overloadname}"


class OpOverloadPacket:
    """``torch.ops.ns.name`` of a ``Library`` op: calling it runs the ``default`` overload; each
    overload is an attribute."""

    def __init__(self, qualname: str):
        self._qualname = qualname
        self._overloads: dict[str, OpOverload] = {}

    def overloads(self) -> list[str]:
        return list(self._overloads)

    def __getattr__(self, overload: str) -> OpOverload:
        overloads = self.__dict__.get("_overloads", {})
        if overload not in overloads:
            qualname = str(self.__dict__.get("_qualname")).replace("::", ".")
            raise AttributeError(f"The underlying op of '{qualname}' has no overload name '{overload}'")
        return overloads[overload]

    def __call__(self, *args, **kwargs):
        if "default" not in self._overloads:
            raise RuntimeError(f"{self._qualname}: no default overload to call (overloads: {self.overloads()})")
        return self._overloads["default"](*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self._qualname.replace('::', '.')}')>"


_DEFINED_NAMESPACES: set[str] = set()
_PACKETS: dict[str, OpOverloadPacket] = {}
_KINDS = ("DEF", "IMPL", "FRAGMENT")


class Library:
    """``torch.library.Library(ns, kind, dispatch_key="")``: ``"DEF"`` (the one library defining the
    namespace), ``"FRAGMENT"`` (more definitions) or ``"IMPL"`` (kernels only)."""

    def __init__(self, ns: str, kind: str, dispatch_key: str = "") -> None:
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind}")
        if kind == "DEF":
            if ns in _DEFINED_NAMESPACES:
                raise RuntimeError(f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; "
                                   "please put all of your definitions in a single TORCH_LIBRARY block.  If you "
                                   "were trying to specify implementations, consider using TORCH_LIBRARY_IMPL "
                                   "(which can be duplicated).")
            _DEFINED_NAMESPACES.add(ns)
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defined: list[OpOverload] = []
        self._kernels: list[tuple[_Kernels, str, Callable]] = []

    def define(self, schema: str, alias_analysis: str = "", *, tags=()) -> str:
        """Declare ``"name[.overload](args) -> returns"``; returns the name. Defining the same
        overload twice raises RuntimeError, as PyTorch."""
        if self.kind == "IMPL":
            raise RuntimeError(f"define(): a Library of kind IMPL cannot define operators (namespace {self.ns})")
        full, _, _ = schema.partition("(")
        name, _, overload = full.strip().partition(".")
        qualname = f"{self.ns}::{name}"
        packet = _PACKETS.get(qualname)
        if packet is None:
            packet = _PACKETS[qualname] = OpOverloadPacket(qualname)
            custom.register(qualname, packet)
        overload = overload or "default"
        if overload in packet._overloads:
            raise RuntimeError(f"Tried to register an operator ({self.ns}::{schema}) with the same name and overload "
                               "name multiple times. Each overload's schema should only be registered with a single "
                               "call to def().")
        op = packet._overloads[overload] = OpOverload(packet, overload, schema)
        self._defined.append(op)
        return name

    def impl(self, op_name, fn: Callable, dispatch_key: str = "", *, with_keyset: bool = False) -> None:
        """Make ``fn`` the kernel of ``op_name`` (``"name"``, ``"name.overload"``, an OpOverload, or a
        ``custom_op``'s name) for ``dispatch_key`` (the library's own when empty)."""
        if with_keyset:
            raise NotImplementedError("Library.impl(with_keyset=True): tapelab has no dispatch key sets to pass")
        if isinstance(op_name, OpOverload):
            kernels = op_name._kernels
        else:
            name, _, overload = op_name.partition(".")
            qualname = name if "::" in name else f"{self.ns}::{name}"
            packet = _PACKETS.get(qualname)
            if qualname in _OPS and not overload:
                kernels = _OPS[qualname]._kernels
            elif packet is None or (overload or "default") not in packet._overloads:
                raise RuntimeError(f"impl(): operator {qualname}{'.' + overload if overload else ''} was not defined "
                                   "(tapelab replaces no aten kernel: define the op with Library.define first)")
            else:
                kernels = packet._overloads[overload or "default"]._kernels
        key = _dispatch_key(dispatch_key or self.dispatch_key)
        kernels.by_key[key] = fn
        self._kernels.append((kernels, key, fn))

    def _destroy(self) -> None:
        """Undo this library's registrations, as PyTorch does when a Library is collected: its
        kernels leave their ops, its definitions leave ``torch.ops``, a DEF frees the namespace.
        Nothing at interpreter exit, when this module's globals are already cleared."""
        if _PACKETS is None:
            return
        for kernels, key, fn in self._kernels:
            if kernels.by_key.get(key) is fn:
                del kernels.by_key[key]
        for op in self._defined:
            packet = op._packet
            packet._overloads.pop(op._overloadname, None)
            if not packet._overloads and _PACKETS.get(packet._qualname) is packet:
                del _PACKETS[packet._qualname]
                custom.unregister(packet._qualname)
        if self.kind == "DEF":
            _DEFINED_NAMESPACES.discard(self.ns)
        self._kernels, self._defined, self.kind = [], [], "DESTROYED"

    __del__ = _destroy

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"


_FRAGMENTS: dict[str, Library] = {}


def _fragment(ns: str) -> Library:
    """The library ``define``/``impl`` use for ``ns`` when given none (PyTorch keeps one alive too)."""
    if ns not in _FRAGMENTS:
        _FRAGMENTS[ns] = Library(ns, "FRAGMENT")
    return _FRAGMENTS[ns]


def define(qualname: str, schema: str, *, lib: Library | None = None, tags=()) -> None:
    """``torch.library.define("ns::name", "(Tensor x) -> Tensor")``."""
    ns, name = qualname.split("::", 1)
    (lib or _fragment(ns)).define(name + schema, tags=tags)


def impl(qualname: str, types, func: Callable | None = None, *, lib: Library | None = None):
    """``torch.library.impl("ns::name", "cpu")`` as a decorator (or with ``func``): the op's kernel
    for those device types or dispatch keys."""
    ns, name = qualname.split("::", 1)

    def register(f: Callable) -> Callable:
        for key in ([types] if isinstance(types, str) else types):
            (lib or _fragment(ns)).impl(name, f, key)
        return f
    return register if func is None else register(func)
