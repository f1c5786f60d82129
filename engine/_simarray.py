"""Re-export (a public import path kept): the simulated device's arrays live in ``tapelab.base.simarray``; engine code imports that module."""
from __future__ import annotations

from .base.simarray import *  # noqa: F401,F403
from .base.simarray import __all__, _SimDevice, _SimNamespace  # noqa: F401
