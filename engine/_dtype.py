"""Re-export (a public import path kept): the dtypes live in ``tapelab.base.dtype``; engine code imports that module."""
from __future__ import annotations

from .base.dtype import *  # noqa: F401,F403
from .base.dtype import __all__, _BY_NP, from_np, scalar_dtype  # noqa: F401
