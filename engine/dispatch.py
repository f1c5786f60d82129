"""Re-export (a public import path kept): the dispatcher lives in ``tapelab.core.dispatch``, ``apply_`` in ``tapelab.autograd.views``; engine code imports the defining modules."""
from __future__ import annotations

from .autograd.views import DETACH, apply_  # noqa: F401
from .core.dispatch import STATE, Mode, apply, eager, module_scope, pop_mode, push_mode, set_anomaly  # noqa: F401

__all__ = ["apply", "apply_", "eager", "Mode", "STATE", "push_mode", "pop_mode", "module_scope"]
