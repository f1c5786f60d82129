"""``torch.distributed.elastic.multiprocessing``: here only ``errors``, the workers' error files."""
from __future__ import annotations

from . import errors

__all__ = ["errors"]
