"""The error every reader raises for a file it cannot trust: damaged, truncated, or not a checkpoint."""
from __future__ import annotations


class CheckpointError(RuntimeError):
    """A file that tapelab.load refuses: corrupt, truncated, tampered with, or not a checkpoint."""

    def __init__(self, where: str, what: str):
        super().__init__(f"tapelab.load({where}): {what}")
        self.file, self.reason = where, what
