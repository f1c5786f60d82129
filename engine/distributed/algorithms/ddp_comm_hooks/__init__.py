"""``torch.distributed.algorithms.ddp_comm_hooks``: what ``DDP.register_comm_hook`` takes.

A hook is ``hook(state, bucket) -> Future`` of the reduced ``bucket.buffer()``: ``default_hooks``
(all-reduce, and all-reduce of a float16 or bfloat16 copy, half the bytes) and ``powerSGD_hook``
(low-rank compression with error feedback).
"""
from . import default_hooks, powerSGD_hook  # noqa: F401
