"""``torch.quantization``: PyTorch's legacy path of ``torch.ao.quantization``, re-exported (old QAT code
imports from here)."""
from __future__ import annotations

from .ao.quantization import *  # noqa: F401,F403
from .ao.quantization import (DeQuantStub, FakeQuantize, FusedMovingAvgObsFakeQuantize, HistogramObserver,  # noqa: F401
                              MinMaxObserver, MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver,
                              PerChannelMinMaxObserver, QConfig, QuantStub, QuantWrapper, convert, fuse_modules,
                              fuse_modules_qat, get_default_qat_qconfig, get_default_qconfig, prepare, prepare_qat,
                              propagate_qconfig_, quantize_dynamic)
from .ao.quantization import fake_quantize, observer, qconfig, quantize, stubs  # noqa: F401
