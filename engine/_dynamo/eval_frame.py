"""``torch._dynamo.eval_frame``: where libraries find the class of a compiled module (``OptimizedModule``,
what ``tapelab.compile(module)`` returns) to unwrap it with ``._orig_mod``."""
from __future__ import annotations

from ..compiler import OptimizedModule

__all__ = ["OptimizedModule"]
