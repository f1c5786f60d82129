"""Re-export (a public import path kept): the Tensor class lives in ``tapelab.core.tensor`` (old pickles name ``tapelab.tensor._rebuild``); engine code imports the defining modules."""
from __future__ import annotations

from .core.creation import _rebuild  # noqa: F401
from .core.tensor import Size, Tensor, _wrap_dim, __all__  # noqa: F401
