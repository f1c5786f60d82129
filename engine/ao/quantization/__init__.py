"""``torch.ao.quantization``: observers, fake quantizers, qconfigs and the eager-mode workflow (fuse, prepare,
prepare_qat, convert)."""
from __future__ import annotations

from ...ops.quantize import fused_moving_avg_obs_fake_quant  # noqa: F401  (the op the fused fake quant runs)
from .fake_quantize import *  # noqa: F401,F403
from .fuse_modules import fuse_modules, fuse_modules_qat  # noqa: F401
from .observer import *  # noqa: F401,F403
from .observer import HistogramObserver  # noqa: F401
from .qconfig import *  # noqa: F401,F403
from .quantization_mappings import *  # noqa: F401,F403
from .quantize import (add_quant_dequant, convert, prepare, prepare_qat, propagate_qconfig_,  # noqa: F401
                       quantize_dynamic, quantize_qat, swap_module)
from .stubs import DeQuantStub, QuantStub, QuantWrapper  # noqa: F401
from . import fake_quantize, fuse_modules as _fuse_modules, observer, qconfig, quantize, stubs  # noqa: F401
