"""Op declarations, one module per family; ``install_methods`` binds them onto Tensor."""
from __future__ import annotations

import functools
import types
import inspect

from ..autograd import engine, views
from ..autograd.views import apply_
from ..core import creation, node, overrides, storage
from ..core.registry import REGISTRY, Op, defop
from . import compare, convert, elementwise, indexing, linalg, movement, reduce, sampling, sort, sparse  # noqa: F401
from . import conjugation, shaping, special, spectral, stats  # noqa: F401
from . import linalg_api, lowrank, quantize  # noqa: F401
from . import registry  # noqa: F401  (the public path tapelab.ops.registry, a re-export)
from ._aten import AtenNamespace
from .custom import NAMESPACES as _CUSTOM_NAMESPACES

__all__ = ["REGISTRY", "Op", "defop", "install_methods", "surface", "MODULES", "FOUNDATION"]

MODULES = (convert, elementwise, compare, reduce, movement, linalg, sort, indexing, sampling, sparse, special, stats, shaping,
           conjugation, spectral, linalg_api, lowrank, quantize)
# the layers below the op families that declare Tensor methods (a Tensor itself knows only its data
# and metadata): construction, new_* and pickling; storages; hooks; detach; backward; the
# __torch_function__ protocol's side (Tensor.__torch_function__, subclass registration, as_subclass)
FOUNDATION = (creation, storage, node, views, engine, overrides)
_ATEN = AtenNamespace(MODULES)   # torch.ops.aten


def surface(modules=MODULES, ops=None) -> dict:
    """The Tensor attributes ``modules`` and ``ops`` declare, by name.

    A module declares ``METHODS`` (names of its public functions that are also methods),
    ``OPERATORS`` (dunders and hand-written methods) and ``PROPERTIES``; an op declares its
    in-place variants (``Op(..., inplace=("exp_",))``); ``ops`` defaults to every registered
    op. Each name is declared once: a second declaration raises instead of silently replacing
    the first.
    """
    out: dict = {}

    def declare(name, value, where):
        if name in out:
            raise RuntimeError(f"Tensor.{name} is declared twice (again in {where})")
        out[name] = value

    for mod in modules:
        for name in getattr(mod, "METHODS", ()):
            declare(name, getattr(mod, name), f"{mod.__name__}.METHODS")
        for name, fn in getattr(mod, "OPERATORS", {}).items():
            declare(name, fn, f"{mod.__name__}.OPERATORS")
        for name, fn in getattr(mod, "PROPERTIES", {}).items():
            declare(name, property(fn), f"{mod.__name__}.PROPERTIES")
    for op in REGISTRY.values() if ops is None else ops:
        for name in op.inplace:
            declare(name, _inplace(op, name, apply_), f"the declaration of op {op.name!r}")
    return out


def install_methods(cls, modules=MODULES + FOUNDATION, ops=None) -> None:
    """Bind the declared ``surface(modules, ops)`` onto ``cls`` (Tensor): the one place that
    sets Tensor methods (the op families' and the ``FOUNDATION`` layers')."""
    bound = surface(modules, ops)
    for name, value in bound.items():
        setattr(cls, name, value)
    # a method made by a helper (``_getitem``, an operator's ``method``, a lambda) is named as the Tensor
    # method it is, as PyTorch's are: ``__torch_function__`` handlers read ``func.__name__``
    names: dict = {}
    for name, value in bound.items():
        if isinstance(value, types.FunctionType):
            names.setdefault(id(value), []).append(name)
    for name, value in bound.items():
        if (isinstance(value, types.FunctionType) and len(names[id(value)]) == 1 and value.__name__ != name
                and (value.__name__.startswith("_") or value.__name__ in ("<lambda>", "method", "operator"))):
            value.__name__ = name


def _inplace(op, name, apply_):
    def method(self, *args, **params):
        if params and (keywords := _keywords(op.fwd)) is not None and not params.keys() <= keywords:
            args, params = _by_position(name, args, params)
        return apply_(op, self, *args, **params)
    method.__name__ = name
    method.__doc__ = f"In-place version of :meth:`{op.name}`."
    return method


@functools.cache
def _keywords(fwd) -> frozenset | None:
    """The keywords an op's forward takes; None when it takes any (``**params``)."""
    params = inspect.signature(fwd).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _by_position(name: str, args: tuple, params: dict) -> tuple[tuple, dict]:
    """PyTorch's keyword names for an in-place method's operands (``p.lerp_(end=z, weight=w)``,
    ``x.pow_(exponent=2)``): the out-of-place method's signature puts them where the op's forward
    takes them, by position (an omitted one before them at its default); its keyword-only
    parameters stay keywords."""
    from ..core.tensor import Tensor
    signature = inspect.signature(getattr(Tensor, name[:-1]))
    try:
        bound = signature.bind(None, *args, **params).arguments
    except TypeError as e:
        raise TypeError(f"{name}(): {e}") from None
    positional, keywords, given = [], {}, 0
    for p in list(signature.parameters.values())[1:]:
        if p.kind is p.VAR_KEYWORD:
            keywords.update(bound.get(p.name, {}))
        elif p.kind is p.KEYWORD_ONLY:
            if p.name in bound:
                keywords[p.name] = bound[p.name]
        elif p.kind is p.VAR_POSITIONAL:
            positional.extend(bound.get(p.name, ()))
            given = len(positional)
        else:
            positional.append(bound.get(p.name, p.default))
            given = len(positional) if p.name in bound else given
    return tuple(positional[:given]), keywords


def __getattr__(name: str):
    """``torch.ops.<namespace>``: ``aten`` (the public functions), or the custom ops ``tapelab.library.custom_op``
    registered under ``name``."""
    if name == "aten":
        return _ATEN
    if name in _CUSTOM_NAMESPACES:
        return _CUSTOM_NAMESPACES[name]
    raise AttributeError(f"module 'tapelab.ops' has no attribute {name!r} (custom op namespaces: "
                         f"{sorted(_CUSTOM_NAMESPACES)})")
