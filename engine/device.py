"""Re-export (a public import path kept): devices live in ``tapelab.base.device``; engine code imports that module."""
from __future__ import annotations

from .base.device import *  # noqa: F401,F403
from .base.device import __all__, CPU, of_array  # noqa: F401
