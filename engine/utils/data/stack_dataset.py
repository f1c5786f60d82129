"""``StackDataset``: several equally long datasets read side by side, as a tuple or a dict per item."""
from __future__ import annotations

from .dataset import Dataset

__all__ = ["StackDataset"]


class StackDataset(Dataset):
    """``StackDataset(a, b)[i] == (a[i], b[i])``; ``StackDataset(x=a, y=b)[i] == {"x": a[i], "y": b[i]}``."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        parts = list(args) or list(kwargs.values())
        if not parts:
            raise ValueError("At least one dataset should be passed")
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """A batch of items, using each dataset's own ``__getitems__`` where it has one."""
        columns = {}
        named = self.datasets.items() if isinstance(self.datasets, dict) else enumerate(self.datasets)
        for key, d in named:
            if callable(getattr(d, "__getitems__", None)):
                items = d.__getitems__(indices)
                if len(items) != len(indices):
                    raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, "
                                     f"got {len(items)}")
            else:
                items = [d[i] for i in indices]
            columns[key] = items
        if isinstance(self.datasets, dict):
            return [{k: columns[k][j] for k in columns} for j in range(len(indices))]
        return [tuple(columns[k][j] for k in range(len(self.datasets))) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length
