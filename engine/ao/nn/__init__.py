"""``torch.ao.nn``: the module families of quantization: fused (``intrinsic``), quantization-aware training
(``qat``, ``intrinsic.qat``)."""
from __future__ import annotations

from . import intrinsic, qat  # noqa: F401
