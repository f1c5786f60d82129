"""The base of every dataset: a root folder, transforms, and the error for files that are absent."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ...utils.data import Dataset

__all__ = ["VisionDataset", "missing_files_error"]


class VisionDataset(Dataset):
    """``root`` plus ``transform`` (on the image) and ``target_transform`` (on the label)."""

    _repr_indent = 4

    def __init__(self, root: str | os.PathLike | None = None, transforms: Callable | None = None,
                 transform: Callable | None = None, target_transform: Callable | None = None) -> None:
        self.root = os.path.expanduser(root) if isinstance(root, (str, os.PathLike)) else root
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError("Only transforms or transform/target_transform can be passed as argument")
        self.transform, self.target_transform = transform, target_transform
        self.transforms = transforms

    def _apply(self, img: Any, target: Any) -> tuple[Any, Any]:
        if self.transforms is not None:
            return self.transforms(img, target)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            lines.append(f"Root location: {self.root}")
        lines += [line for line in self.extra_repr().splitlines() if line]
        for name in ("transforms", "transform", "target_transform"):
            if getattr(self, name) is not None:
                lines.append(f"{name.capitalize() if name != 'target_transform' else 'Target transform'}: "
                             f"{getattr(self, name)!r}")
        body = "".join("\n" + " " * self._repr_indent + line for line in lines)
        return f"Dataset {type(self).__name__}{body}"


def missing_files_error(dataset: str, folder: str, files: Sequence[str], source: str, download: bool) -> RuntimeError:
    """The error for a dataset whose files are absent: which files, where they go, where they come from."""
    why = ("download=True cannot fetch them: tapelab.vision downloads nothing (the project machines have "
           "no network)" if download else "they were not found")
    return RuntimeError(
        f"{dataset}: {why}. Put these files in {folder}: {', '.join(files)} (from {source}), then build "
        f"the dataset again with download=False.")
