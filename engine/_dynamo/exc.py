"""``torch._dynamo.exc``: the compiler's exception types, for programs that catch them
(``except torch._dynamo.exc.Unsupported``: a ``fullgraph=True`` call that needs a graph break)."""
from __future__ import annotations

from ..compiler.frontend import TorchDynamoException, Unsupported

__all__ = ["TorchDynamoException", "Unsupported"]
