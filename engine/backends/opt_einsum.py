"""``torch.backends.opt_einsum``: whether ``einsum`` may take its contraction order from the
``opt_einsum`` package, and the switches for it (timm's Kron optimizer sets ``strategy``).

tapelab's ``einsum`` orders its contractions with numpy's own path search, so the switches are
kept (scripts read back what they set) and change nothing; ``is_available`` answers, as
PyTorch's, whether the package can be imported. ``set_flags``/``flags`` check their values as
PyTorch's do; a plain assignment to ``enabled`` or ``strategy`` is not checked, as in PyTorch.
"""
from __future__ import annotations

import importlib
import importlib.util
from contextlib import contextmanager
from functools import lru_cache

__all__ = ["is_available", "get_opt_einsum", "set_flags", "flags", "enabled", "strategy"]


@lru_cache
def is_available() -> bool:
    """Whether the ``opt_einsum`` package is installed."""
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The ``opt_einsum`` package where it is installed, else None."""
    return importlib.import_module("opt_einsum") if is_available() else None


enabled = is_available()
strategy = "auto" if is_available() else None


def _set_enabled(_enabled: bool) -> None:
    global enabled
    if not is_available() and _enabled:
        raise ValueError(f"opt_einsum is not available, so setting `enabled` to {_enabled} will not reap the benefits "
                         "of calculating an optimal path for einsum. torch.einsum will fall back to contracting from "
                         "left to right. To enable this optimal path calculation, please install opt-einsum.")
    enabled = _enabled


def _set_strategy(_strategy: str) -> None:
    global strategy
    if not is_available():
        raise ValueError(f"opt_einsum is not available, so setting `strategy` to {_strategy} will not be meaningful. "
                         "torch.einsum will bypass path calculation and simply contract from left to right. Please "
                         "install opt_einsum or unset `strategy`.")
    if not enabled:
        raise ValueError(f"opt_einsum is not enabled, so setting a `strategy` to {_strategy} will not be meaningful. "
                         "torch.einsum will bypass path calculation and simply contract from left to right. Please "
                         "set `enabled` to `True` as well or unset `strategy`.")
    if _strategy not in ["auto", "greedy", "optimal"]:
        raise ValueError(f"`strategy` must be one of the following: [auto, greedy, optimal] but is {_strategy}")
    strategy = _strategy


def set_flags(_enabled=None, _strategy=None):
    """Set the switches (each checked); returns the old ``(enabled, strategy)``."""
    orig = (enabled, None if not is_available() else strategy)
    if _enabled is not None:
        _set_enabled(_enabled)
    if _strategy is not None:
        _set_strategy(_strategy)
    return orig


@contextmanager
def flags(enabled=None, strategy=None):
    """The switches set inside the block, restored after it."""
    orig = set_flags(enabled, strategy)
    try:
        yield
    finally:
        set_flags(*orig)
