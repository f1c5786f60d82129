"""``torch.distributed.constants``: the default process-group timeouts programs pass on."""
from datetime import timedelta

__all__ = ["default_pg_timeout", "default_pg_nccl_timeout"]

default_pg_timeout = timedelta(minutes=30)
default_pg_nccl_timeout = None     # PyTorch's value on a build without NCCL
