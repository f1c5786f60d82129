"""``torch.utils._contextlib``: context managers that also decorate functions, as PyTorch's grad modes
do. A decorated generator function runs each of its steps inside the context (a sampling loop written
as a generator under ``@no_grad()`` records nothing between yields); libraries (tensordict) subclass
``_DecoratorContextManager`` for their own modes."""
from __future__ import annotations

import functools
import inspect
import sys
import warnings
from typing import Any, Callable

__all__ = ["context_decorator", "_DecoratorContextManager", "_NoParamDecoratorContextManager"]


def _wrap_generator(ctx_factory: Callable, func: Callable) -> Callable:
    """``func``'s generators, each resumption (send, throw, close) run inside a fresh context."""
    @functools.wraps(func)
    def generator_context(*args, **kwargs):
        gen = func(*args, **kwargs)
        try:
            with ctx_factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with ctx_factory():
                        gen.close()
                    raise
                except BaseException:
                    with ctx_factory():
                        response = gen.throw(*sys.exc_info())
                else:
                    with ctx_factory():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value
    return generator_context


def context_decorator(ctx, func: Callable) -> Callable:
    """``func`` run inside ``ctx`` (a context manager, or a callable making a fresh one per call)."""
    if callable(ctx) and hasattr(ctx, "__enter__"):
        raise AssertionError(f"Passed in {ctx} is both callable and also a valid context manager (has __enter__), "
                             "making it ambiguous which interface to use.  If you intended to pass a context manager "
                             "factory, rewrite your call as context_decorator(lambda: ctx()); if you intended to pass "
                             "a context manager directly, rewrite your call as context_decorator(lambda: ctx)")
    if inspect.isclass(func):
        raise RuntimeError("Cannot decorate classes; it is ambiguous whether only the constructor or all methods "
                           "should have the context manager applied; additionally, decorating a class at "
                           "definition-site will prevent use of the identifier as a conventional type. To specify "
                           "which methods to decorate, decorate each of them individually.")
    ctx_factory = ctx if callable(ctx) else (lambda: ctx)
    if inspect.isgeneratorfunction(func):
        return _wrap_generator(ctx_factory, func)

    @functools.wraps(func)
    def decorate_context(*args, **kwargs):
        with ctx_factory():
            return func(*args, **kwargs)
    return decorate_context


class _DecoratorContextManager:
    """A context manager usable as a decorator; a subclass whose ``__init__`` takes arguments overrides
    ``clone``."""

    def __call__(self, orig_func: Callable) -> Callable:
        func = orig_func
        if inspect.isclass(orig_func):
            warnings.warn("Decorating classes is deprecated and will be disabled in future versions. You should only "
                          "decorate functions or methods. To preserve the current behavior of class decoration, you "
                          "can directly decorate the `__init__` method and nothing else.", FutureWarning, stacklevel=2)
            func = lambda *args, **kwargs: orig_func(*args, **kwargs)   # noqa: E731
        return context_decorator(self.clone, func)

    def __enter__(self) -> None:
        raise NotImplementedError

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        raise NotImplementedError

    def clone(self):
        return self.__class__()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """One that also decorates without parentheses (``@no_grad``)."""

    def __new__(cls, orig_func: Callable | None = None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)
