"""``torch.ops.profiler._record_function_enter`` / ``_record_function_enter_new`` / ``_record_function_exit``:
a ``record_function`` range opened and closed by function calls, as the profiler's ops are (FX passes
put them into graphs: pytorch/examples' ``fx/profiling_tracer.py`` traces ``record_function`` blocks into
these calls). The handle is the opened ``record_function``. Given an FX ``Proxy`` (a graph being traced),
``_record_function_exit`` records itself as a node, as PyTorch's op does through ``__torch_function__``.
"""
from __future__ import annotations

from ..fx.proxy import Proxy
from ..ops.custom import register
from .profiler import record_function

__all__ = ["record_function_enter", "record_function_exit"]


def record_function_enter(name: str, args: str | None = None) -> record_function:
    """Open a ``record_function`` range named ``name``; returns the handle ``record_function_exit`` closes."""
    handle = record_function(name, args)
    handle.__enter__()
    return handle


def record_function_exit(handle) -> None:
    """Close the range ``handle`` (from ``record_function_enter``)."""
    if isinstance(handle, Proxy):
        handle.tracer.create_proxy("call_function", record_function_exit, (handle,), {})
        return
    if not isinstance(handle, record_function):
        raise RuntimeError(f"_record_function_exit expects the handle _record_function_enter returned, got "
                           f"{type(handle).__name__}")
    handle.__exit__(None, None, None)


for _name, _fn in (("_record_function_enter", record_function_enter),
                   ("_record_function_enter_new", record_function_enter),
                   ("_record_function_exit", record_function_exit)):
    register(f"profiler::{_name}", _fn)
