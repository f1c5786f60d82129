"""``torch.distributed._composable``: where older code imports ``fully_shard`` from."""
from . import fsdp  # noqa: F401
