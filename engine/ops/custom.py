"""``torch.ops.<namespace>.<name>``: the custom ops ``tapelab.library.custom_op`` registers, looked up by
namespace (``torch.ops.mylib.scale``). The namespaces live here, below ``library``, so that ``tapelab.ops``
can answer for them; ``aten``'s own ops are the public functions, not served here."""
from __future__ import annotations

from typing import Callable

__all__ = ["OpNamespace", "NAMESPACES", "register", "unregister"]


class OpNamespace:
    """The custom ops of one namespace, as attributes."""

    def __init__(self, name: str):
        self.name = name
        self.ops: dict[str, Callable] = {}

    def __getattr__(self, op: str):
        ops = self.__dict__.get("ops", {})
        if op not in ops:
            raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{op}'")
        return ops[op]

    def __repr__(self) -> str:
        return f"<OpNamespace torch.ops.{self.name}: {sorted(self.ops)}>"


NAMESPACES: dict[str, OpNamespace] = {}


def register(qualname: str, op: Callable) -> None:
    """Make ``op`` reachable as ``torch.ops.<namespace>.<name>`` for ``qualname`` ``"namespace::name"``."""
    namespace, name = qualname.split("::", 1)
    NAMESPACES.setdefault(namespace, OpNamespace(namespace)).ops[name] = op


def unregister(qualname: str) -> None:
    """Take ``qualname`` out of ``torch.ops`` (a collected ``Library`` takes its definitions with it)."""
    namespace, name = qualname.split("::", 1)
    if namespace in NAMESPACES:
        NAMESPACES[namespace].ops.pop(name, None)
