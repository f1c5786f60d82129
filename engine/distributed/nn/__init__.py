"""``torch.distributed.nn``: ``RemoteModule``."""
from .api.remote_module import RemoteModule

__all__ = ["RemoteModule"]
