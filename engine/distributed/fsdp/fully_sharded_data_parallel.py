"""``torch.distributed.fsdp.fully_sharded_data_parallel``: where libraries import FSDP's class and enums from."""
from . import FullyShardedDataParallel, ShardingStrategy, StateDictType  # noqa: F401

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "StateDictType"]
