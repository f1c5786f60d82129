"""``torch.ao.nn``: the module families of quantization: fused (``intrinsic``), quantization-aware training
(``qat``, ``intrinsic.qat``) and dynamically quantized (``quantized.dynamic``)."""
from __future__ import annotations

from . import intrinsic, qat, quantized  # noqa: F401
