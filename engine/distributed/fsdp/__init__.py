"""``torch.distributed.fsdp``: the policies FSDP is configured with. tapelab has no fully sharded data
parallelism: ``fully_shard`` and ``FullyShardedDataParallel`` refuse, naming ``DistributedDataParallel``
(with ``ZeroRedundancyOptimizer`` to shard the optimizer state), which tapelab has."""
from __future__ import annotations

import enum
from dataclasses import dataclass

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


class BackwardPrefetch(enum.Enum):
    """When FSDP1 prefetches the next parameters in backward (PyTorch's names and values)."""
    BACKWARD_PRE = 1
    BACKWARD_POST = 2


class OptimStateKeyType(enum.Enum):
    PARAM_NAME = 1
    PARAM_ID = 2


# FSDP1's configuration records: training scripts build them before wrapping (and libraries import
# them at module level), so they exist with PyTorch's fields even though the wrapper refuses.
@dataclass
class CPUOffload:
    offload_params: bool = False


@dataclass
class MixedPrecision:
    param_dtype: object = None
    reduce_dtype: object = None
    buffer_dtype: object = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True


@dataclass
class StateDictConfig:
    offload_to_cpu: bool = False


@dataclass
class FullStateDictConfig(StateDictConfig):
    rank0_only: bool = False


@dataclass
class ShardedStateDictConfig(StateDictConfig):
    pass


@dataclass
class LocalStateDictConfig(StateDictConfig):
    pass


@dataclass
class OptimStateDictConfig:
    offload_to_cpu: bool = True


@dataclass
class FullOptimStateDictConfig(OptimStateDictConfig):
    rank0_only: bool = False


@dataclass
class ShardedOptimStateDictConfig(OptimStateDictConfig):
    pass


@dataclass
class LocalOptimStateDictConfig(OptimStateDictConfig):
    offload_to_cpu: bool = False


@dataclass
class StateDictSettings:
    state_dict_type: StateDictType
    state_dict_config: StateDictConfig
    optim_state_dict_config: OptimStateDictConfig


class FSDPModule:
    """The class ``fully_shard`` mixes into a module; no module is one here."""


class FullyShardedDataParallel:
    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(_REFUSAL)


def fully_shard(module, *args, **kwargs):
    raise NotImplementedError(_REFUSAL)
