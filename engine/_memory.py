"""Re-export (a public import path kept): the allocator policy live in ``tapelab.base.memory``; engine code imports that module."""
from __future__ import annotations

from .base.memory import *  # noqa: F401,F403
from .base.memory import __all__  # noqa: F401
