"""``torch.cuda.streams``: ``Stream`` and ``Event`` (cupy's); the classes are ``tapelab.cuda``'s."""
from __future__ import annotations

from . import Event, Stream  # noqa: F401

__all__ = ["Stream", "Event"]
