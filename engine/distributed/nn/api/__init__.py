"""``torch.distributed.nn.api``: where ``RemoteModule`` is defined."""
