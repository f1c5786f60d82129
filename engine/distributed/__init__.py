"""``tapelab.distributed`` (``torch.distributed``): data-parallel training across processes.

Ranks are MPI processes (mpi4py, the ``mpi`` extra): start a script with
``python -m tapelab.distributed.run --nproc-per-node N script.py``. Backends: ``"mpi"`` (and
``"gloo"``, its alias here) for cpu tensors, ``"nccl"`` (cupy's NCCL) for cuda tensors. The
collectives, groups and work handles live in ``tapelab._c10d``; this package adds what builds on
``nn`` and ``optim``: ``optim.ZeroRedundancyOptimizer``, ``rpc``, ``nn.RemoteModule``, the DDP
communication hooks (``algorithms.ddp_comm_hooks``), ``algorithms.Join``, and distributed
autograd basics (``autograd``, ``optim.DistributedOptimizer``).
"""
from __future__ import annotations

import os

from .._c10d import *  # noqa: F401,F403
from .._c10d import __all__ as _c10d_all
from .._c10d import nccl_available
from . import algorithms, autograd, nn, optim, rpc  # noqa: F401  (torch.distributed.optim etc. without an import)
from .device_mesh import DeviceMesh, init_device_mesh

__all__ = ["is_torchelastic_launched", "is_nccl_available", "is_gloo_available", "is_mpi_available",
           "DeviceMesh", "init_device_mesh",
           "GroupMember", "group", *_c10d_all]


def is_torchelastic_launched() -> bool:
    """Whether this process was started by ``torchrun`` (it sets ``TORCHELASTIC_RUN_ID``)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def is_mpi_available() -> bool:
    """Whether mpi4py (and so an MPI library) can be imported."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_gloo_available() -> bool:
    """"gloo" is served by MPI here."""
    return is_mpi_available()


def is_nccl_available() -> bool:
    """Whether cupy's NCCL and a GPU are there."""
    return nccl_available()


class GroupMember:
    """``torch.distributed.GroupMember``: ``WORLD`` is None, meaning the default group."""
    WORLD = None
    NON_GROUP_MEMBER = None


group = GroupMember
