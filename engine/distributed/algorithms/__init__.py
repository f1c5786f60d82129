"""``torch.distributed.algorithms``: DDP communication hooks (``ddp_comm_hooks``) and ``Join`` for
uneven inputs."""
from . import ddp_comm_hooks  # noqa: F401
from .join import Join, JoinHook, Joinable

__all__ = ["Join", "Joinable", "JoinHook"]
