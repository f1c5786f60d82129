"""Neural-network modules, functional ops and initialisers (torch.nn)."""
from __future__ import annotations

from .parameter import Buffer, Parameter
from .modules import *  # noqa: F401,F403
from . import functional, init, utils  # noqa: F401
