"""Re-export (a public import path kept): the dispatcher's process-wide state live in ``tapelab.base.dispatch_state``; engine code imports that module."""
from __future__ import annotations

from .base.dispatch_state import STATE, __all__  # noqa: F401
