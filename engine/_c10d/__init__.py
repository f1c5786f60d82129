"""The communication core of ``tapelab.distributed`` (PyTorch's c10d): process groups, backends
(MPI through mpi4py, NCCL through cupy), the collectives and their work handles.

It sits below ``nn``, ``utils`` and ``distributed`` so that ``nn.parallel`` (DDP) and
``utils.data`` (``DistributedSampler``) use it while ``distributed`` builds on ``nn`` and
``optim`` (``RemoteModule``, ``ZeroRedundancyOptimizer``) without an import cycle.
"""
from .bucket import GradBucket
from .collectives import *  # noqa: F401,F403
from .collectives import __all__ as _collectives
from .group import ProcessGroup
from .init import *  # noqa: F401,F403
from .init import __all__ as _init
from .nccl import nccl_available
from .objects import *  # noqa: F401,F403
from .objects import __all__ as _objects
from .reduce_op import ReduceOp
from .work import Future, Work

__all__ = [*_collectives, *_init, *_objects, "GradBucket", "ProcessGroup", "ReduceOp", "Future", "Work"]
