"""Neural-network modules, functional ops and initialisers (torch.nn)."""
from __future__ import annotations

from .parameter import Buffer, Parameter
from .modules import *  # noqa: F401,F403
from .modules.rnn import *  # noqa: F401,F403
from .modules.transformer import *  # noqa: F401,F403
from . import attention, common_types, functional, grad, init, parallel, utils  # noqa: F401
from ._factory import factory_kwargs  # noqa: F401
from .parallel import DataParallel
