"""``torch.cuda.amp``: the deprecated cuda names (use ``tapelab.amp``); ``tapelab.cuda.amp`` is this module."""
from __future__ import annotations

from .autocast_mode import custom_bwd, custom_fwd
from .deprecated import CUDA_AUTOCAST as autocast, CUDA_GRAD_SCALER as GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]
