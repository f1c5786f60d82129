"""``torch.storage``: the storage classes under the module path libraries import them from
(Lightning's lazy checkpoint loader: ``from torch.storage import TypedStorage, UntypedStorage``)."""
from .core.storage import TypedStorage, UntypedStorage  # noqa: F401

__all__ = ["TypedStorage", "UntypedStorage"]
