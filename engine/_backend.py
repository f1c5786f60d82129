"""Re-export (a public import path kept): the array-namespace helpers live in ``tapelab.base.backend``; engine code imports that module."""
from __future__ import annotations

from .base.backend import *  # noqa: F401,F403
from .base.backend import __all__  # noqa: F401
