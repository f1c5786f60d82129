"""``prims``: the registry's primitives as callables, the targets of ``trace_from_tape`` graphs.

``prims.add(x, y)`` is ``dispatch.apply(REGISTRY["add"], x, y)``: one primitive op, with
its params as keyword arguments, exactly as the dispatcher saw it during the eager run.
Generated code names them ``prims.<op>``.
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..core.registry import REGISTRY

__all__ = ["Primitive", "prims"]


class Primitive:
    """A callable for one registered op; ``op`` is its registry entry."""

    __slots__ = ("op", "__name__")

    def __init__(self, op):
        self.op = op
        self.__name__ = op.name

    def __call__(self, *args, **params):
        return apply(self.op, *args, **params)

    def __repr__(self) -> str:
        return f"prims.{self.op.name}"

    def __reduce__(self):
        return _prim, (self.op.name,)   # by name: an op's forward and vjp are not picklable


class _Prims:
    """Namespace of ``Primitive``s, one per registered op, made on first access."""

    def __getattr__(self, name: str) -> Primitive:
        if name not in REGISTRY:
            raise AttributeError(f"no primitive op named {name!r}")
        prim = Primitive(REGISTRY[name])
        setattr(self, name, prim)
        return prim


prims = _Prims()


def _prim(name: str) -> Primitive:
    return getattr(prims, name)
