"""``torch.backends.opt_einsum``: whether ``einsum`` of three operands or more takes its contraction
order from the ``opt_einsum`` package, and with which strategy (timm's Kron optimizer sets it).

As in PyTorch, ``einsum`` asks ``opt_einsum.contract_path(equation, ..., optimize=strategy)`` where
the package is installed and ``enabled`` (the default then), and contracts the operands pairwise in
that order; else left to right (``ops/linalg.py``). ``set_flags``/``flags`` check their values as
PyTorch's do; a plain assignment (``tapelab.backends.opt_einsum.enabled = False``) is not checked
and, as PyTorch's module attribute, then stands over what ``set_flags``/``flags`` set (they set and
check the module's own values, which ``einsum`` reads only where nothing was assigned).
"""
from __future__ import annotations

import sys
import types
from contextlib import contextmanager
from functools import lru_cache

from ..ops import linalg as _linalg

# ``enabled`` and ``strategy`` are the module's properties (_OptEinsumModule, below)
__all__ = ["is_available", "get_opt_einsum", "set_flags", "flags"]


@lru_cache
def is_available() -> bool:
    """Whether the ``opt_einsum`` package is installed."""
    return _linalg.opt_einsum_package() is not None


def get_opt_einsum():
    """The ``opt_einsum`` package where it is installed, else None."""
    return _linalg.opt_einsum_package()


# the module's own values (PyTorch's module globals: what set_flags and flags set and check)
_flag_enabled = _linalg.OPT_EINSUM["enabled"]
_flag_strategy = _linalg.OPT_EINSUM["strategy"]
_assigned: dict = {}      # plain assignments, which stand over them (PyTorch's attributes on its PropModule)


def _publish() -> None:
    """Hand ``einsum`` the values in force."""
    _linalg.OPT_EINSUM["enabled"] = _assigned.get("enabled", _flag_enabled)
    _linalg.OPT_EINSUM["strategy"] = _assigned.get("strategy", _flag_strategy)


def _set_enabled(value: bool) -> None:
    global _flag_enabled
    if not is_available() and value:
        raise ValueError(f"opt_einsum is not available, so setting `enabled` to {value} will not reap the "
                         "benefits of calculating an optimal path for einsum. torch.einsum will fall back to "
                         "contracting from left to right. To enable this optimal path calculation, please install "
                         "opt-einsum.")
    _flag_enabled = value
    _publish()


def _set_strategy(value: str) -> None:
    global _flag_strategy
    if not is_available():
        raise ValueError(f"opt_einsum is not available, so setting `strategy` to {value} will not be "
                         "meaningful. torch.einsum will bypass path calculation and simply contract from left to "
                         "right. Please install opt_einsum or unset `strategy`.")
    if not _flag_enabled:
        raise ValueError(f"opt_einsum is not enabled, so setting a `strategy` to {value} will not be "
                         "meaningful. torch.einsum will bypass path calculation and simply contract from left to "
                         "right. Please set `enabled` to `True` as well or unset `strategy`.")
    if value not in ["auto", "greedy", "optimal"]:
        raise ValueError(f"`strategy` must be one of the following: [auto, greedy, optimal] but is {value}")
    _flag_strategy = value
    _publish()


def set_flags(_enabled=None, _strategy=None):
    """Set the switches (each checked); returns the old ``(enabled, strategy)``."""
    orig = (_flag_enabled, None if not is_available() else _flag_strategy)
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


class _OptEinsumModule(types.ModuleType):
    """The module, with ``enabled`` and ``strategy`` read and assigned as PyTorch's."""

    def __dir__(self):
        return sorted(set(super().__dir__()) | {"enabled", "strategy"})

    @property
    def enabled(self):
        return _assigned.get("enabled", _flag_enabled)

    @enabled.setter
    def enabled(self, value) -> None:
        _assigned["enabled"] = value
        _publish()

    @property
    def strategy(self):
        return _assigned.get("strategy", _flag_strategy)

    @strategy.setter
    def strategy(self, value) -> None:
        _assigned["strategy"] = value
        _publish()


sys.modules[__name__].__class__ = _OptEinsumModule
