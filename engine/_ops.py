"""Re-export (a public import path kept): ``torch._ops``, the module PyTorch defines ``torch.ops`` in
(``from torch._ops import ops``: DLRM's ``dlrm_s_pytorch.py``); the namespaces live in ``tapelab.ops``."""
from __future__ import annotations

from . import ops

__all__ = ["ops"]
