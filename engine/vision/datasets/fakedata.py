"""FakeData: random images whose pixels depend only on the index (and ``random_offset``)."""
from __future__ import annotations

from collections.abc import Callable

from ...core.creation import randint, randn
from ...core.random import get_rng_state, manual_seed, set_rng_state
from ..transforms import functional as F
from .vision import VisionDataset

__all__ = ["FakeData"]


class FakeData(VisionDataset):
    """``size`` images of ``image_size`` (C, H, W) as PIL images, and labels below ``num_classes``."""

    def __init__(self, size: int = 1000, image_size: tuple[int, int, int] = (3, 224, 224), num_classes: int = 10,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 random_offset: int = 0) -> None:
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.size, self.num_classes, self.image_size = size, num_classes, image_size
        self.random_offset = random_offset

    def __getitem__(self, index: int):
        if index >= len(self):
            raise IndexError(f"FakeData: index {index} out of range for {len(self)} images")
        state = get_rng_state()   # seed by index without disturbing the caller's stream
        try:
            manual_seed(index + self.random_offset)
            img = randn(*self.image_size)
            target = int(randint(0, self.num_classes, size=(1,)).item())
        finally:
            set_rng_state(state)
        return self._apply(F.to_pil_image(img), target)

    def __len__(self) -> int:
        return self.size
