"""``torch.distributed.fsdp.wrap``: the auto-wrap policies FSDP1 is configured with.

A policy answers, for a module and the parameters of its subtree not yet wrapped, whether to
recurse into it (``recurse=True``) or to wrap it. They are plain functions, so scripts that
build them (``functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})``)
run; the wrapper they configure refuses (see ``tapelab.distributed.fsdp``).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable

from ...nn.modules.activation import MultiheadAttention
from ...nn.modules.container import ModuleDict, ModuleList
from ...nn.modules.module import Module

__all__ = ["always_wrap_policy", "lambda_auto_wrap_policy", "transformer_auto_wrap_policy",
           "size_based_auto_wrap_policy", "ModuleWrapPolicy", "wrap", "enable_wrap"]


def always_wrap_policy(*args, **kwargs) -> bool:
    return True


def lambda_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int, lambda_fn: Callable) -> bool:
    """Recurse everywhere; wrap the modules ``lambda_fn`` accepts."""
    return True if recurse else bool(lambda_fn(module))


def transformer_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int,
                                 transformer_layer_cls: Iterable[type]) -> bool:
    """Recurse everywhere; wrap instances of the given layer classes."""
    return True if recurse else isinstance(module, tuple(transformer_layer_cls))


def size_based_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int,
                                min_num_params: int = int(1e8), force_leaf_modules=None,
                                exclude_wrap_modules=None) -> bool:
    """Wrap a subtree once it holds ``min_num_params`` unwrapped parameters; never recurse into
    ``force_leaf_modules`` (MultiheadAttention) nor wrap ``exclude_wrap_modules`` (containers)."""
    leaves = tuple(force_leaf_modules if force_leaf_modules is not None else (MultiheadAttention,))
    excluded = tuple(exclude_wrap_modules if exclude_wrap_modules is not None else (ModuleList, ModuleDict))
    big = nonwrapped_numel >= min_num_params
    return big and not isinstance(module, leaves) if recurse else big and not isinstance(module, excluded)


class ModuleWrapPolicy:
    """Wrap instances of ``module_classes`` (FSDP1's class-based policy object)."""

    def __init__(self, module_classes: Iterable[type]):
        self._module_classes = tuple(set(module_classes))

    def __call__(self, module: Module, recurse: bool, *args, **kwargs) -> bool:
        return True if recurse else isinstance(module, self._module_classes)


_WRAPPER: list = []   # the (wrapper_cls, kwargs) of the innermost enable_wrap block


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls: Any, **wrapper_kwargs: Any):
    """Inside the block, ``wrap(module)`` wraps with ``wrapper_cls(module, **wrapper_kwargs)``."""
    _WRAPPER.append((wrapper_cls, wrapper_kwargs))
    try:
        yield
    finally:
        _WRAPPER.pop()


def wrap(module: Module, **wrap_overrides: Any) -> Module:
    """The module wrapped by the enclosing ``enable_wrap``'s wrapper; unchanged outside one."""
    if not _WRAPPER:
        return module
    wrapper_cls, kwargs = _WRAPPER[-1]
    return wrapper_cls(module, **{**kwargs, **wrap_overrides})
