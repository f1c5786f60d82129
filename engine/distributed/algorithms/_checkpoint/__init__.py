"""``torch.distributed.algorithms._checkpoint``: activation checkpointing and offloading as module
wrappers (``checkpoint_wrapper``), the form FSDP programs and libraries apply to chosen submodules."""
