"""``DistributedDataParallel``: importable; constructing it needs a process group, which
``tapelab.distributed`` cannot create yet, so it raises PyTorch's error for a missing one."""
from __future__ import annotations

from ... import distributed
from ..modules.module import Module


class DistributedDataParallel(Module):
    """``nn.parallel.DistributedDataParallel``: raises ``ValueError`` (PyTorch's, for no default process group)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **kwargs):
        super().__init__()
        if process_group is None:
            distributed._default_group()
        raise TypeError(f"process_group={process_group!r} is not a tapelab process group (tapelab.distributed "
                        "creates none yet)")
