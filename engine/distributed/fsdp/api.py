"""``torch.distributed.fsdp.api``: FSDP's configuration enums and records, with PyTorch's names, fields and
values; training scripts and libraries (mmengine's FSDP wrapper) build or import them even where the
wrapper itself refuses (tapelab has no FSDP: ``fsdp/__init__.py``)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["ShardingStrategy", "BackwardPrefetch", "MixedPrecision", "CPUOffload", "StateDictType", "StateDictConfig",
           "FullStateDictConfig", "LocalStateDictConfig", "ShardedStateDictConfig", "OptimStateDictConfig",
           "FullOptimStateDictConfig", "LocalOptimStateDictConfig", "ShardedOptimStateDictConfig", "StateDictSettings"]


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
