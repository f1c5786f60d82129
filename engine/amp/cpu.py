"""``torch.cpu.amp``: the deprecated cpu names (use ``tapelab.amp``); ``tapelab.cpu.amp`` is this module."""
from __future__ import annotations

from .autocast_mode import custom_bwd, custom_fwd
from .deprecated import CPU_AUTOCAST as autocast, CPU_GRAD_SCALER as GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]
