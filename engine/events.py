"""Re-export (a public import path kept): the event kinds, payloads and subscriptions live in ``tapelab.base.events``; engine code imports that module."""
from __future__ import annotations

from .base.events import *  # noqa: F401,F403
from .base.events import __all__  # noqa: F401
