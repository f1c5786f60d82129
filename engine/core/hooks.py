"""``RemovableHandle``: what every ``register_*_hook`` returns (modules, state dicts, optimizers),
and what libraries build themselves over their own hook dicts (``torch.utils.hooks``)."""
from __future__ import annotations

import itertools

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """``RemovableHandle(hooks_dict, *more_dicts, extra_dict=None)``: ``id`` keys the hook in each
    dict; ``remove()`` takes it out of all of them (also a context manager)."""

    _ids = itertools.count()

    def __init__(self, *dicts: dict, extra_dict=None):
        self.id = next(RemovableHandle._ids)
        extra = () if extra_dict is None else tuple(extra_dict) if isinstance(extra_dict, (list, tuple)) \
            else (extra_dict,)
        self._dicts = dicts + extra

    def remove(self) -> None:
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
