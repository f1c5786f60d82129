"""The ``weights=`` argument of the model builders, on machines without a network.

Builders accept ``weights=None`` (and the deprecated ``pretrained=False``); anything else raises,
naming how to load weights instead: ``model.load_state_dict(tapelab.load(path))`` reads a
checkpoint that torchvision's model wrote with ``torch.save``.
"""
from __future__ import annotations

from typing import Any

__all__ = ["check_weights"]


def check_weights(builder: str, weights: Any, kwargs: dict) -> None:
    """Refuse pretrained weights (they would need a download); pop ``pretrained=False``."""
    if kwargs.pop("pretrained", False):
        weights = "pretrained=True"
    if weights is not None:
        raise RuntimeError(
            f"{builder}(weights={weights!r}): tapelab.vision downloads nothing. Build the model with "
            f"weights=None and load a state_dict saved by torchvision: "
            f"model.load_state_dict(tapelab.load('{builder}.pth'))")
