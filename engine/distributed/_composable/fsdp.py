"""``torch.distributed._composable.fsdp``: the FSDP2 names, from ``tapelab.distributed.fsdp``."""
from ..fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard  # noqa: F401

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy", "CPUOffloadPolicy"]
