"""Re-export (a public import path kept): generators live in ``tapelab.core.random``; engine code imports the defining modules."""
from __future__ import annotations

from .core.random import *  # noqa: F401,F403
from .core.random import __all__, rng  # noqa: F401
