"""``torch.nn.utils.stateless``: PyTorch 1.x's ``functional_call`` (older MAML and hypernetwork code
imports it from here), deprecated since PyTorch 2.0 for ``torch.func.functional_call``; both call
``_functional_call`` here (the parameters and buffers swapped in for one call)."""
from __future__ import annotations

import contextlib
import warnings
from typing import Any

from ._named_member_accessor import swap_tensor

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers: dict, args: Any = None, kwargs: dict | None = None, *,
                    tie_weights: bool = True, strict: bool = False):
    """``torch.func.functional_call``, with PyTorch's FutureWarning at the caller's line."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed "
                  "in a future version of PyTorch. Please use `torch.func.functional_call` instead which is a "
                  "drop-in replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)


@contextlib.contextmanager
def _swapped(module, tensors: dict):
    """``module``'s parameters and buffers replaced by ``tensors`` (by dotted name) for the block."""
    saved = []
    try:
        for name, value in tensors.items():
            owner_name, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_name) if owner_name else module
            if attr not in owner._parameters and attr not in owner._buffers:
                raise AttributeError(f"{type(owner).__name__} has no parameter or buffer {attr!r} ({name})")
            saved.append((owner, attr, swap_tensor(owner, attr, value)))
        yield
    finally:
        for owner, attr, old in reversed(saved):
            swap_tensor(owner, attr, old)


def _functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                     strict: bool = False):
    """``module(*args, **kwargs)`` with its parameters and buffers taken from the given dict(s): the one
    implementation behind both ``functional_call``s, as in PyTorch."""
    dicts = parameter_and_buffer_dicts
    tensors: dict[str, Any] = {}
    for d in (dicts if isinstance(dicts, (tuple, list)) else (dicts,)):
        for k, v in d.items():
            if k in tensors:
                raise ValueError(f"{k} appeared in multiple dictionaries; behavior of functional call is ambiguous")
            tensors[k] = v
    if strict:
        expected = {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_buffers()}
        missing, unexpected = sorted(expected - set(tensors)), sorted(set(tensors) - expected)
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\tUnexpected key(s): "
                               f"{', '.join(map(repr, unexpected))}.\n\tMissing key(s): {', '.join(map(repr, missing))}.")
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _swapped(module, tensors):
        return module(*args, **(kwargs or {}))
