"""The layer classes of ``tapelab.nn``."""
from __future__ import annotations

from .activation import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .extra_layers import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .module import *  # noqa: F401,F403
from .more_layers import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from . import (activation, container, conv, dropout, extra_layers, flatten, lazy, linear, loss, module,
               more_layers, normalization, pooling, sparse)

# PyTorch's other import paths (the classes are defined above; these modules re-export them)
from . import (activation_attention, batchnorm, distance, instancenorm, padding,  # noqa: F401,E402
               pixelshuffle, rnn, transformer, upsampling)

__all__ = [name for mod in (activation, container, conv, dropout, extra_layers, flatten, lazy, linear, loss, module,
                            more_layers, normalization, pooling, sparse) for name in mod.__all__]
