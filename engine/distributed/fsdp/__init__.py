"""``torch.distributed.fsdp``: the policies FSDP is configured with. tapelab has no fully sharded data
parallelism: ``fully_shard`` and ``FullyShardedDataParallel`` refuse, naming ``DistributedDataParallel``
(with ``ZeroRedundancyOptimizer`` to shard the optimizer state), which tapelab has."""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FullyShardedDataParallel", "FSDPModule", "fully_shard", "MixedPrecisionPolicy", "OffloadPolicy",
           "CPUOffloadPolicy", "StateDictType", "ShardingStrategy"]

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


class StateDictType(enum.Enum):
    """Which state dict an FSDP module gives (PyTorch's names and values)."""
    FULL_STATE_DICT = 1
    LOCAL_STATE_DICT = 2
    SHARDED_STATE_DICT = 3


class ShardingStrategy(enum.Enum):
    """What FSDP shards (PyTorch's names and values)."""
    FULL_SHARD = 1
    SHARD_GRAD_OP = 2
    NO_SHARD = 3
    HYBRID_SHARD = 4
    _HYBRID_SHARD_ZERO2 = 5


class FSDPModule:
    """The class ``fully_shard`` mixes into a module; no module is one here."""


class FullyShardedDataParallel:
    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(_REFUSAL)


def fully_shard(module, *args, **kwargs):
    raise NotImplementedError(_REFUSAL)
