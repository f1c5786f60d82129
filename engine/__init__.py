"""tapelab: an eager autograd engine with PyTorch's API, built to be seen.

``import tapelab as torch`` runs ordinary PyTorch programs in the covered subset.
The engine imports no notebook package; it emits events that kernel/ and widgets/
subscribe to.
"""
from __future__ import annotations

from . import _memory  # noqa: F401  (first: the allocator policy applies to everything after it)
from . import events
from .base import dtype as _dtype
from .base.dtype import (bool, double, dtype, finfo, float, float16, float32, float64, get_default_dtype, half,
                         iinfo, int, int8, int16, int32, int64, long, promote_types, set_default_dtype, short,
                         uint8)
from .base.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                             set_grad_enabled)
from . import autograd  # noqa: F401  (the core's import cycle needs this order until it is cut)
from .creation import *  # noqa: F401,F403
from .device import device  # the module (a re-export) first, then the class under its name
from .ops import install_methods
from .ops.compare import *  # noqa: F401,F403
from .ops.convert import *  # noqa: F401,F403
from .ops.elementwise import *  # noqa: F401,F403
from .ops.indexing import *  # noqa: F401,F403
from .ops.linalg import *  # noqa: F401,F403
from .ops.movement import *  # noqa: F401,F403
from .ops.reduce import *  # noqa: F401,F403
from .ops.sort import *  # noqa: F401,F403
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .serialization import CheckpointError, load, save
from .tape import tape
from .tensor import Size, Tensor

install_methods(Tensor)

# the layers above the core (each imports only what is above it here)
from . import (accelerator, autograd, backends, cuda, distributed, linalg, multiprocessing, nn,  # noqa: E402
               optim, utils)
from .base.runtime import *  # noqa: E402,F401,F403  (set_num_threads, set_default_device, ...)
from . import debug, fx, graphs, profiler  # noqa: E402
from ._nn_toplevel import *  # noqa: E402,F401,F403  (torch.softmax, torch.conv2d, Tensor.softmax, ...)

FloatTensor = DoubleTensor = LongTensor = Tensor

__version__ = "0.1.0"


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


def result_type(*operands) -> dtype:
    return _dtype.result_type(*operands)


def is_floating_point(input: Tensor) -> bool:
    return input.is_floating_point()


# PyTorch never warns on overflow, division by zero or invalid values: inf and nan flow silently
import numpy as _np  # noqa: E402

_np.seterr(all="ignore")
