"""The layer classes of ``tapelab.nn``, in the modules PyTorch defines them in (``nn.modules.<file>``)."""
from __future__ import annotations

from .activation import *  # noqa: F401,F403
from .adaptive import *  # noqa: F401,F403
from .batchnorm import *  # noqa: F401,F403
from .channelshuffle import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .linear_cross_entropy_options import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .module import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403
from . import (activation, adaptive, batchnorm, channelshuffle, container, conv, distance, dropout, flatten,
               fold, instancenorm, lazy, linear, linear_cross_entropy_options, loss, module, normalization,
               padding, pixelshuffle, pooling, sparse, upsampling)

# the recurrent and transformer layers (tapelab.nn exports them itself)
from . import rnn, transformer  # noqa: F401,E402

__all__ = [name for mod in (activation, adaptive, batchnorm, channelshuffle, container, conv, distance,
                            dropout, flatten, fold, instancenorm, lazy, linear, linear_cross_entropy_options,
                            loss, module, normalization, padding, pixelshuffle, pooling, sparse, upsampling)
           for name in mod.__all__]
