"""``torch.ops.aten.<name>.<overload>``: PyTorch's operator namespace, served by tapelab's public functions
and Tensor methods of the same name. Libraries key handler tables on these objects at import
(torch_geometric's ``Index`` and ``EdgeIndex``) and call them; an overload calls the function of its name
(the functions take each overload's arguments), and the few aten-only names map to their equivalents.
A name tapelab has no function for raises ``AttributeError``, as PyTorch's namespace does for an unknown op.
"""
from __future__ import annotations

import sys
from typing import Callable

from ._util import Tensor

__all__ = ["AtenNamespace", "OpOverload", "OpOverloadPacket"]


def _slice(input, dim: int = 0, start=None, end=None, step: int = 1):
    return input[(slice(None),) * (dim % max(input.ndim, 1)) + (slice(start, end, step),)]


# aten names with no public function of that name
_ATEN_ONLY: dict[str, Callable] = {
    "_to_copy": lambda input, **kwargs: input.to(copy=True, **{k: v for k, v in kwargs.items() if v is not None
                                                                 and k in ("dtype", "device", "memory_format")}),
    "_pin_memory": lambda input, device=None: input.pin_memory(),
    "alias": lambda input: input.view_as(input),
    "slice": _slice,
    "index": lambda input, indices: input[tuple(indices)],
    "_sparse_addmm": lambda input, mat1, mat2, *, beta=1, alpha=1: input.addmm(mat1, mat2, beta=beta, alpha=alpha),
    # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, then cudnn's switches)
    "_convolution": lambda *args: _served().convolution(*args[:9]),
}


def _served():
    """The ``tapelab`` package (read, not imported: it imports this layer), for the names its upper layers
    define at the top (``convolution``, ``rms_norm``), which ``torch.ops.aten`` also has."""
    return sys.modules["tapelab"]


class OpOverload:
    """One overload (``aten.add.Tensor``): calls the function; hashable by identity, as table keys are."""

    __slots__ = ("_fn", "_name", "_overloadname")

    def __init__(self, fn: Callable, name: str, overload: str):
        self._fn, self._name, self._overloadname = fn, name, overload

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def name(self) -> str:
        return f"aten::{self._name}" + ("" if self._overloadname == "default" else f".{self._overloadname}")

    def __repr__(self) -> str:
        return f"<OpOverload(op='aten.{self._name}', overload='{self._overloadname}')>"


class OpOverloadPacket:
    """``aten.<name>``: callable, and its overloads as attributes (each made once, so it is one key)."""

    def __init__(self, fn: Callable, name: str):
        self._fn, self._name, self._overloads = fn, name, {}

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        found = self._overloads.get(overload)
        if found is None:
            found = self._overloads[overload] = OpOverload(self._fn, self._name, overload)
        return found

    def overloads(self) -> list[str]:
        return list(self._overloads)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='aten.{self._name}')>"


class AtenNamespace:
    """``torch.ops.aten``: a packet per name, found among the op families' public functions and Tensor's methods."""

    def __init__(self, modules):
        self._modules, self._packets = modules, {}

    def _function(self, name: str) -> Callable | None:
        if name in _ATEN_ONLY:
            return _ATEN_ONLY[name]
        for mod in self._modules:
            if name in getattr(mod, "__all__", ()):
                return getattr(mod, name)
        method = getattr(Tensor, name, None)
        if callable(method) and not name.startswith("__"):
            return method
        top = getattr(_served(), name, None)
        return top if callable(top) and not isinstance(top, type) else None

    def __getattr__(self, name: str) -> OpOverloadPacket:
        packet = self.__dict__.get("_packets", {}).get(name)
        if packet is None:
            fn = self._function(name) if not name.startswith("__") else None
            if fn is None:
                raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}' (tapelab has no "
                                     f"function or Tensor method named so)")
            packet = self._packets[name] = OpOverloadPacket(fn, name)
        return packet

    def __repr__(self) -> str:
        return "<OpNamespace torch.ops.aten>"
