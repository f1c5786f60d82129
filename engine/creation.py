"""Re-export (a public import path kept): the creation functions live in ``tapelab.core.creation``; engine code imports the defining modules."""
from __future__ import annotations

from .core.creation import *  # noqa: F401,F403
from .core.creation import __all__  # noqa: F401
