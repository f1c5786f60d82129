"""``torch.library``: custom operators defined in Python (``custom_op``), with a backward
(``register_autograd``) and a shape function (``register_fake``).

A custom op here is its Python function, called eagerly; with a registered backward it runs as an
``autograd.Function`` whose ``backward`` is the one given, so gradients are the user's formula as in
PyTorch. The fake (meta) function is kept on the op (``CustomOpDef.fake``); tapelab's meta device runs
the real function on placeholders instead, so it is not called. Ops are looked up by their
``"namespace::name"`` with ``get_op``, and called as ``torch.ops.namespace.name(...)``.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, Iterable

from .autograd.function import Function
from .ops import custom

__all__ = ["custom_op", "register_fake", "register_autograd", "impl_abstract", "get_op", "CustomOpDef"]

_OPS: dict[str, "CustomOpDef"] = {}


class CustomOpDef:
    """A registered custom op: calling it runs its function (through its backward when one is registered)."""

    def __init__(self, qualname: str, fn: Callable, mutates_args, schema: str | None):
        self._qualname, self._fn, self._mutates_args, self._schema = qualname, fn, mutates_args, schema
        self.fake: Callable | None = None
        self._function: type | None = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if self._function is None:
            return self._fn(*args, **kwargs)
        if kwargs:   # autograd.Function.apply is positional: keyword arguments go to their places
            bound = inspect.signature(self._fn).bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
        return self._function.apply(*args)

    def register_fake(self, fn: Callable | None = None):
        def register(f):
            self.fake = f
            return f
        return register if fn is None else register(fn)

    def register_autograd(self, backward: Callable, *, setup_context: Callable | None = None) -> None:
        fn = self._fn
        name = self._qualname.replace("::", "_")
        self._function = type(name, (Function,), {
            "forward": staticmethod(lambda *args: fn(*args)),
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
        op = _OPS[name] = CustomOpDef(name, f, mutates_args, schema)
        custom.register(name, op)
        return op
    return register if fn is None else register(fn)


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
