"""``torch.distributed.fsdp.fully_sharded_data_parallel``: where libraries import FSDP's class, enums and records
from (mmengine: ``BackwardPrefetch``, ``CPUOffload``, ``MixedPrecision``, ``FullOptimStateDictConfig``)."""
from . import FullyShardedDataParallel, OptimStateKeyType
from .api import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig,
                  LocalOptimStateDictConfig, LocalStateDictConfig, MixedPrecision, OptimStateDictConfig,
                  ShardedOptimStateDictConfig, ShardedStateDictConfig, ShardingStrategy, StateDictConfig,
                  StateDictSettings, StateDictType)

__all__ = ["FullyShardedDataParallel", "OptimStateKeyType", "BackwardPrefetch", "CPUOffload", "FullOptimStateDictConfig",
           "FullStateDictConfig", "LocalOptimStateDictConfig", "LocalStateDictConfig", "MixedPrecision",
           "OptimStateDictConfig", "ShardedOptimStateDictConfig", "ShardedStateDictConfig", "ShardingStrategy",
           "StateDictConfig", "StateDictSettings", "StateDictType"]
