"""``torch.utils.weak``: weak references and dictionaries keyed by object identity, for tensors
(whose ``==`` is elementwise and ``hash`` is by identity anyway) and other objects whose equality
cannot be a dict key's. tensordict keeps per-tensor records in a ``WeakIdKeyDictionary``."""
from __future__ import annotations

import weakref
from collections.abc import MutableMapping
from typing import Any, Iterator

from ..core.tensor import Tensor

__all__ = ["TensorWeakRef", "WeakIdRef", "WeakIdKeyDictionary", "WeakTensorKeyDictionary"]


class WeakIdRef(weakref.ref):
    """A weak reference hashed by its referent's ``id`` and equal to another only while both refer to
    the same live object (a dead reference equals only itself, so a reused id is no match)."""

    __slots__ = ("_id",)

    def __init__(self, key, callback=None) -> None:
        self._id = id(key)
        super().__init__(key, callback)

    def __hash__(self) -> int:
        return self._id

    def __eq__(self, other) -> bool:
        a, b = self(), other()
        return a is b if a is not None and b is not None else self is other


class WeakIdKeyDictionary(MutableMapping):
    """A mapping whose keys are held weakly and compared by identity: an entry goes when its key is
    collected."""

    def __init__(self, dict=None, ref_type: type = WeakIdRef) -> None:
        self.data: dict = {}
        self.ref_type = ref_type
        self_ref = weakref.ref(self)

        def remove(ref) -> None:
            owner = self_ref()
            if owner is not None:
                owner.data.pop(ref, None)
        self._remove = remove
        if dict is not None:
            self.update(dict)

    def __getitem__(self, key) -> Any:
        return self.data[self.ref_type(key)]

    def __setitem__(self, key, value) -> None:
        self.data[self.ref_type(key, self._remove)] = value

    def __delitem__(self, key) -> None:
        del self.data[self.ref_type(key)]

    def __contains__(self, key) -> bool:
        try:
            return self.ref_type(key) in self.data
        except TypeError:   # an object that cannot be weakly referenced is never a key
            return False

    def __iter__(self) -> Iterator:
        for ref in list(self.data):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self) -> int:
        return sum(ref() is not None for ref in list(self.data))

    def keyrefs(self) -> list:
        return list(self.data)

    def copy(self) -> "WeakIdKeyDictionary":
        return WeakIdKeyDictionary(dict(self.items()), self.ref_type)

    __copy__ = copy

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at {id(self):#x}>"


WeakTensorKeyDictionary = WeakIdKeyDictionary


class TensorWeakRef:
    """A weak reference to a Tensor; calling it gives the tensor, or None once it is collected."""

    def __init__(self, tensor: Tensor) -> None:
        if not isinstance(tensor, Tensor):
            raise AssertionError(f"expected torch.Tensor, got {type(tensor)}.")
        self.ref = weakref.ref(tensor)

    def __call__(self) -> Tensor | None:
        return self.ref()
