"""``torch.distributed.elastic``: what a torchrun-launched program imports from it, the error
recording of its workers (``multiprocessing.errors.record``)."""
from __future__ import annotations

from . import multiprocessing

__all__ = ["multiprocessing"]
