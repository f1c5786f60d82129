"""``torch.jit.annotations``: the typing names TorchScript-era code imports from here
(``from torch.jit.annotations import List, Optional``, ``BroadcastingList2[int]``)."""
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union  # noqa: F401

from ..core.tensor import Tensor  # noqa: F401
from . import Future  # noqa: F401

__all__ = ["Any", "Callable", "Dict", "List", "NamedTuple", "Optional", "Tuple", "Union", "Tensor", "Future",
           "BroadcastingList1", "BroadcastingList2", "BroadcastingList3"]


class _BroadcastingList:
    """``BroadcastingListN[T]``: TorchScript's "a T or N of them"; to Python, a list of T."""

    def __getitem__(self, item):
        return List[item]


BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingList()
