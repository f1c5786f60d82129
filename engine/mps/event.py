"""``torch.mps.event.Event``: without the Metal backend an event cannot be made."""
from __future__ import annotations

__all__ = ["Event"]


class Event:
    """An MPS event; constructing one raises, as in a PyTorch built without MPS."""

    def __init__(self, enable_timing: bool = False) -> None:
        raise RuntimeError("Cannot execute acquireEvent() without MPS backend.")
