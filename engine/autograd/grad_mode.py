"""Re-export (a public import path kept): the grad-mode switches live in ``tapelab.base.grad_mode``; engine code imports that module."""
from __future__ import annotations

from ..base.grad_mode import *  # noqa: F401,F403
from ..base.grad_mode import STATE, __all__  # noqa: F401
