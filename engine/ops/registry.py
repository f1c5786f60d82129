"""Re-export (a public import path kept): the op registry lives in ``tapelab.core.registry``; engine code imports the defining modules."""
from __future__ import annotations

from ..core.registry import *  # noqa: F401,F403
from ..core.registry import ALL, KINDS, NONE, OTHERS, __all__  # noqa: F401
