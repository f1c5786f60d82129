"""Fused modules (``torch.ao.nn.intrinsic``): a sequence of float modules that quantization treats as one
(``fuse_modules`` makes them; ``prepare_qat`` swaps them for their ``intrinsic.qat`` versions, ``convert`` for
their ``intrinsic.quantized`` ones)."""
from __future__ import annotations

from .modules import *  # noqa: F401,F403
from .modules import _FusedModule  # noqa: F401
from . import qat, quantized  # noqa: F401
