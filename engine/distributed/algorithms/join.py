"""``torch.distributed.algorithms.join``: ``Join`` for uneven inputs (it lives in ``tapelab._c10d``,
below ``nn``, because ``DistributedDataParallel`` is a ``Joinable``)."""
from ..._c10d.join import Join, JoinHook, Joinable

__all__ = ["Join", "Joinable", "JoinHook"]
