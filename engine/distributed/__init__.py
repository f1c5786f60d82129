"""``tapelab.distributed`` (``torch.distributed``): what a training script asks before it decides to
run distributed, and the names it imports at module level.

``is_available()`` answers as PyTorch's default builds do on this platform; ``is_initialized()``
is False, because tapelab cannot create a process group yet (``init_process_group`` says so).
Without a group, the collectives and ``get_rank``/``get_world_size`` raise PyTorch's ``ValueError``,
so a script's "am I distributed?" checks take their single-process branch.
"""
from __future__ import annotations

import enum
import os
import sys

__all__ = ["is_available", "is_initialized", "is_torchelastic_launched", "is_nccl_available", "is_gloo_available",
           "init_process_group", "destroy_process_group", "get_rank", "get_world_size", "barrier", "all_reduce",
           "broadcast", "all_gather", "ReduceOp"]

_NO_GROUP = "Default process group has not been initialized, please make sure to call init_process_group."

ReduceOp = enum.Enum("RedOpType", ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM"])


def is_available() -> bool:
    """PyTorch's default builds have distributed on Linux and Windows, not on macOS."""
    return sys.platform.startswith("linux") or sys.platform == "win32"


def is_initialized() -> bool:
    """Whether the default process group exists: never yet in tapelab."""
    return False


def is_torchelastic_launched() -> bool:
    """Whether this process was started by ``torchrun`` (it sets ``TORCHELASTIC_RUN_ID``)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def is_nccl_available() -> bool:
    return False


def is_gloo_available() -> bool:
    return False


def init_process_group(backend=None, init_method=None, timeout=None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    raise RuntimeError("tapelab.distributed cannot create a process group yet: tapelab trains in one process. "
                       "Run the script without torchrun (or with one process and without init_process_group).")


def _default_group():
    """The default process group, which ``init_process_group`` has not created."""
    raise ValueError(_NO_GROUP)


def destroy_process_group(group=None) -> None:
    raise AssertionError("Process group cannot be None")


def get_rank(group=None) -> int:
    return _default_group()


def get_world_size(group=None) -> int:
    return _default_group()


def barrier(group=None, async_op: bool = False, device_ids=None):
    return _default_group()


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    return _default_group()


def broadcast(tensor, src: int | None = None, group=None, async_op: bool = False, group_src: int | None = None):
    return _default_group()


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    return _default_group()
