"""Op declarations, one module per family; ``install_methods`` binds them onto Tensor."""
from __future__ import annotations

from . import compare, convert, elementwise, indexing, linalg, movement, reduce, sort  # noqa: F401
from .registry import REGISTRY, Op, defop

__all__ = ["REGISTRY", "Op", "defop", "install_methods", "MODULES"]

MODULES = (convert, elementwise, compare, reduce, movement, linalg, sort, indexing)


def install_methods(cls) -> None:
    """Attach each module's METHODS, OPERATORS, INPLACE variants and PROPERTIES to Tensor."""
    from ..dispatch import apply_
    for mod in MODULES:
        for name in getattr(mod, "METHODS", ()):
            setattr(cls, name, getattr(mod, name))
        for name, op in getattr(mod, "INPLACE", {}).items():
            setattr(cls, name, _inplace(op, name, apply_))
        for name, fn in getattr(mod, "OPERATORS", {}).items():
            setattr(cls, name, fn)
        for name, fn in getattr(mod, "PROPERTIES", {}).items():
            setattr(cls, name, property(fn))


def _inplace(op, name, apply_):
    def method(self, *args, **params):
        return apply_(op, self, *args, **params)
    method.__name__ = name
    method.__doc__ = f"In-place version of :meth:`{op.name}`."
    return method
