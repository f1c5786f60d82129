"""``torch.jit``: the decorators and calls programs carry from TorchScript, each running the Python
it is given.

tapelab has no TorchScript compiler: it runs Python eagerly (FX is its graph IR, ``tapelab.compile``
its fusing compiler). Programs still decorate activations with ``@torch.jit.script``, guard code
with ``torch.jit.is_scripting()``, trace a model before export, or ``torch.jit.save`` it; here
``script`` hands back what it is given and ``trace`` a function as it is or a module in a
``TopLevelTracedModule`` that runs it (each is run once on its example inputs, so an input that
would fail fails at the trace, as PyTorch's does), ``ignore``/``unused``/
``export`` are plain decorators, ``is_scripting``/``is_tracing`` are False, and ``save``/``load``
store the whole module with ``tapelab.save`` (a pickle: load it only from a source you trust).
"""
from __future__ import annotations

import contextlib
import io
import typing
import zipfile
from typing import Any, Callable

from .._torch_extra import Future, fork, wait
from ..nn import Module
from .. import serialization as _serialization
from ..serialization import load as _load

__all__ = ["script", "trace", "trace_module", "script_if_tracing", "ignore", "unused", "export", "interface",
           "is_scripting", "is_tracing", "annotate", "Final", "Attribute", "freeze", "optimize_for_inference",
           "optimized_execution", "fuser", "save", "load", "fork", "wait", "Future", "isinstance",
           "enable_onednn_fusion", "onednn_fusion_enabled", "set_fusion_strategy", "strict_fusion", "Error",
           "ScriptWarning", "TracerWarning", "TracingCheckError", "ScriptModule", "ScriptFunction",
           "TopLevelTracedModule"]

Final = typing.Final
_isinstance = isinstance


class Error(RuntimeError):
    """``torch.jit.Error``: what a scripted ``raise`` becomes."""


class ScriptModule(Module):
    """The type of a scripted module. ``script`` hands back the module itself, so no scripted object is
    one (``isinstance(m, ScriptModule)`` is False, the branch libraries take for plain modules); a
    traced module is (``TopLevelTracedModule``), as in PyTorch."""


class TopLevelTracedModule(ScriptModule):
    """What ``trace`` returns for a module, as PyTorch's: a ``ScriptModule`` with ``save``, the module's
    parameters, buffers and submodules under their own names (its dicts, shared, so ``state_dict`` keys
    and tensors are the module's), and a call that runs the module's Python. The module's plain
    attributes are not its own (PyTorch's graph keeps none): ultralytics' model holds a ``save`` list,
    and ``torch.jit.trace(model, x).save(path)`` must reach the method."""

    def __init__(self, module: Module) -> None:
        super().__init__()
        object.__setattr__(self, "_traced", module)   # not a child: the keys stay the module's
        self._parameters, self._buffers, self._modules = module._parameters, module._buffers, module._modules
        self.training = module.training

    def forward(self, *args, **kwargs):
        return self._traced(*args, **kwargs)

    def train(self, mode: bool = True) -> "TopLevelTracedModule":
        self._traced.train(mode)
        self.training = mode
        return self

    def save(self, f, _extra_files=None) -> None:
        """``torch.jit.save(self, f, _extra_files)``."""
        save(self, f, _extra_files)


class ScriptFunction:
    """The type of a scripted function; likewise never made (``script`` returns the function)."""


class ScriptWarning(Warning):
    pass


class TracerWarning(Warning):
    pass


class TracingCheckError(Exception):
    pass


def script(obj=None, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """``obj`` itself: a function or module runs as the Python it is."""
    return obj


def _run_once(fn: Callable, example_inputs) -> None:
    if example_inputs is None:
        return
    args = example_inputs if _isinstance(example_inputs, tuple) else (example_inputs,)
    fn(*args)


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True, check_inputs=None,
          check_tolerance: float = 1e-5, strict: bool = True, _force_outplace: bool = False,
          _module_class=None, _compilation_unit=None, example_kwarg_inputs=None, _store_inputs: bool = True):
    """``func`` itself, after one call on ``example_inputs`` (an input it cannot take fails here)."""
    if example_kwarg_inputs is not None:
        func(**example_kwarg_inputs)
    else:
        _run_once(func, example_inputs)
    return TopLevelTracedModule(func) if _isinstance(func, Module) else func


def trace_module(mod, inputs: dict, **kwargs):
    """``mod``, after calling each named method once on its example inputs."""
    for name, example in inputs.items():
        _run_once(getattr(mod, name), example)
    return mod


def script_if_tracing(fn: Callable) -> Callable:
    return fn


def ignore(drop=False, **kwargs):
    """A decorator that leaves its function as it is (with or without arguments)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    return fn


def export(fn: Callable) -> Callable:
    return fn


def interface(obj):
    return obj


def _overload(fn: Callable) -> Callable:
    """``@torch.jit._overload``: a signature TorchScript compiles separately; Python keeps the last
    definition (the implementation), so the declaration is handed back unchanged (torch_geometric's utils)."""
    return fn


_overload_method = _overload


def is_scripting() -> bool:
    """False: tapelab never runs code as TorchScript."""
    return False


def is_tracing() -> bool:
    return False


def annotate(the_type, the_value):
    return the_value


class Attribute(typing.NamedTuple):
    value: Any
    type: Any


def isinstance(obj, target_type) -> bool:   # noqa: A001 - torch.jit.isinstance
    """``isinstance`` for the plain classes; a parameterized container type checks its origin."""
    return _isinstance(obj, typing.get_origin(target_type) or target_type)


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


@contextlib.contextmanager
def optimized_execution(should_optimize: bool):
    yield


@contextlib.contextmanager
def fuser(name: str):
    yield


_FUSION = [False]


def enable_onednn_fusion(enabled: bool) -> None:
    _FUSION[0] = bool(enabled)


def onednn_fusion_enabled() -> bool:
    return _FUSION[0]


def set_fusion_strategy(strategy):
    """Accepted and returned, as PyTorch returns the previous strategy; nothing here fuses."""
    return strategy


@contextlib.contextmanager
def strict_fusion():
    yield


def save(m, f, _extra_files=None) -> None:
    """The whole module (code by reference, weights by value) in ``tapelab.save``'s archive, with each of
    ``_extra_files`` (name -> str or bytes) as an ``<archive>/extra/<name>`` record, where PyTorch's
    TorchScript archive keeps them (tools read them from the zip: ultralytics' metadata)."""
    extra = {k: v.encode() if _isinstance(v, str) else bytes(v) for k, v in (_extra_files or {}).items()}
    _serialization._save(m, f, extra=extra)


def load(f, map_location=None, _extra_files=None, _restore_shapes: bool = False):
    """A module saved by ``save``; a pickle, so only from a source you trust. Each name in
    ``_extra_files`` gets the bytes saved under it (``b""`` for one not saved), as PyTorch's."""
    _, data = _serialization._read(f)
    if _extra_files is not None:
        records = {}
        if data[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                records = {n.split("/extra/", 1)[1]: zf.read(n) for n in zf.namelist() if "/extra/" in n}
        for name in _extra_files:
            _extra_files[name] = records.get(name, b"")
    return _load(io.BytesIO(data), map_location=map_location, weights_only=False)
