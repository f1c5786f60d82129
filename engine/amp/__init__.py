"""``torch.amp``: automatic mixed precision (``autocast``) and loss scaling (``GradScaler``)."""
from __future__ import annotations

from . import autocast_mode, grad_scaler, policy  # noqa: F401
from . import cpu, cuda  # noqa: F401  (the deprecated torch.cpu.amp / torch.cuda.amp names)
from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
