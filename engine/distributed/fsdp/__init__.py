"""``torch.distributed.fsdp``: the policies FSDP is configured with. tapelab has no fully sharded data
parallelism: ``fully_shard`` and ``FullyShardedDataParallel`` refuse, naming ``DistributedDataParallel``
(with ``ZeroRedundancyOptimizer`` to shard the optimizer state), which tapelab has."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .api import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig,  # noqa: F401
                  LocalOptimStateDictConfig, LocalStateDictConfig, MixedPrecision, OptimStateDictConfig,
                  ShardedOptimStateDictConfig, ShardedStateDictConfig, ShardingStrategy, StateDictConfig,
                  StateDictSettings, StateDictType)

__all__ = ["FullyShardedDataParallel", "FSDPModule", "fully_shard", "MixedPrecisionPolicy", "OffloadPolicy",
           "CPUOffloadPolicy", "StateDictType", "ShardingStrategy", "BackwardPrefetch", "CPUOffload", "MixedPrecision",
           "StateDictConfig", "FullStateDictConfig", "ShardedStateDictConfig", "LocalStateDictConfig",
           "OptimStateDictConfig", "FullOptimStateDictConfig", "ShardedOptimStateDictConfig",
           "LocalOptimStateDictConfig", "StateDictSettings", "OptimStateKeyType"]

_REFUSAL = ("tapelab has no fully sharded data parallelism (FSDP); use tapelab.nn.parallel.DistributedDataParallel, "
            "with tapelab.distributed.optim.ZeroRedundancyOptimizer to shard the optimizer state")


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """The dtypes FSDP2 casts parameters to, reduces gradients in and casts outputs to."""
    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    """No offloading."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Keep sharded parameters, gradients and optimizer state in host memory."""
    pin_memory: bool = True


class OptimStateKeyType(enum.Enum):
    PARAM_NAME = 1
    PARAM_ID = 2



class FSDPModule:
    """The class ``fully_shard`` mixes into a module; no module is one here."""


class FullyShardedDataParallel:
    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(_REFUSAL)


def fully_shard(module, *args, **kwargs):
    raise NotImplementedError(_REFUSAL)
