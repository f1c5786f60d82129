"""The model registry: ``get_model``, ``list_models``, and ``register_model``, which also gives
each builder torchvision's ``weights=`` argument (``_weights.builder_with_weights``).
"""
from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

from ._weights import Weights, WeightsEnum, builder_enum_name, builder_with_weights, get_weight, weights_enum

__all__ = ["register_model", "get_model", "get_model_builder", "list_models", "get_model_weights", "get_weight",
           "Weights", "WeightsEnum"]  # torchvision.models._api is where libraries import the weights types from

BUILTIN_MODELS: dict[str, Callable[..., Any]] = {}


def register_model(name: str | None = None) -> Callable[[Callable], Callable]:
    """Decorator: make a builder reachable by ``get_model(name)`` (default: the function's name)."""
    def wrapper(fn: Callable) -> Callable:
        key = name if name is not None else fn.__name__
        if key in BUILTIN_MODELS:
            raise ValueError(f"An entry is already registered under the name '{key}'.")
        BUILTIN_MODELS[key] = builder = builder_with_weights(key, fn)
        return builder
    return wrapper


def list_models(module: Any = None, include: str | list[str] | None = None,
                exclude: str | list[str] | None = None) -> list[str]:
    """Sorted names of the registered builders, those of ``module`` only if given, filtered by
    Unix-style patterns (``include`` keeps matches, then ``exclude`` drops them)."""
    names = {k for k, fn in BUILTIN_MODELS.items()
             if module is None or fn.__module__.rsplit(".", 1)[0] == module.__name__}
    if include:
        names = {n for pattern in ([include] if isinstance(include, str) else include)
                 for n in fnmatch.filter(names, pattern)}
    if exclude:
        for pattern in [exclude] if isinstance(exclude, str) else exclude:
            names -= set(fnmatch.filter(names, pattern))
    return sorted(names)


def get_model_builder(name: str) -> Callable[..., Any]:
    """The builder registered as ``name`` (case-insensitive, as torchvision)."""
    try:
        return BUILTIN_MODELS[name.lower()]
    except KeyError:
        raise ValueError(f"Unknown model {name}") from None


def get_model(name: str, **config: Any) -> Any:
    """``get_model_builder(name)(**config)``: e.g. ``get_model("resnet18", num_classes=10)``."""
    return get_model_builder(name)(**config)



def get_model_weights(name: Callable | str) -> type[WeightsEnum]:
    """The weights enum of a builder, given the builder or its registered name."""
    fn = get_model_builder(name) if isinstance(name, str) else name
    enum_name = builder_enum_name(getattr(fn, "__name__", ""))
    if enum_name is None:
        raise ValueError("The method is missing the 'weights' argument.")
    return weights_enum(enum_name)
