"""Datasets of files sorted into one folder per class: ``root/<class>/**/<file>``."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .vision import VisionDataset

__all__ = ["DatasetFolder", "ImageFolder", "IMG_EXTENSIONS", "find_classes", "make_dataset", "default_loader",
           "pil_loader", "has_file_allowed_extension"]

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def has_file_allowed_extension(filename: str, extensions: str | tuple[str, ...]) -> bool:
    return filename.lower().endswith(extensions if isinstance(extensions, str) else tuple(extensions))


def find_classes(directory: str) -> tuple[list[str], dict[str, int]]:
    """The sorted sub-folder names of ``directory`` and their indices."""
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    return classes, {name: i for i, name in enumerate(classes)}


def make_dataset(directory: str, class_to_idx: dict[str, int], extensions: tuple[str, ...] | None = None,
                 is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> list[tuple[str, int]]:
    """(path, class index) for every valid file, walking each class folder in sorted order."""
    directory = os.path.expanduser(directory)
    if (extensions is None) == (is_valid_file is None):
        raise ValueError("Both extensions and is_valid_file cannot be None or not None at the same time")
    valid = is_valid_file or (lambda path: has_file_allowed_extension(path, extensions))
    instances, found = [], set()
    for target_class in sorted(class_to_idx):
        target_dir = os.path.join(directory, target_class)
        if not os.path.isdir(target_dir):
            continue
        for root, _, fnames in sorted(os.walk(target_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(root, fname)
                if valid(path):
                    instances.append((path, class_to_idx[target_class]))
                    found.add(target_class)
    empty = set(class_to_idx) - found
    if empty and not allow_empty:
        msg = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
        if extensions is not None:
            msg += f"Supported extensions are: {extensions if isinstance(extensions, str) else ', '.join(extensions)}"
        raise FileNotFoundError(msg)
    return instances


def pil_loader(path: str):
    from PIL import Image
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


def default_loader(path: str):
    return pil_loader(path)


class DatasetFolder(VisionDataset):
    """Samples ``(loader(path), class index)`` from ``root/<class>/...``; classes are the sorted folders."""

    def __init__(self, root: str, loader: Callable[[str], Any], extensions: tuple[str, ...] | None = None,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 is_valid_file: Callable[[str], bool] | None = None, allow_empty: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        classes, class_to_idx = self.find_classes(self.root)
        self.samples = self.make_dataset(self.root, class_to_idx, extensions, is_valid_file, allow_empty)
        self.loader, self.extensions = loader, extensions
        self.classes, self.class_to_idx = classes, class_to_idx
        self.targets = [s[1] for s in self.samples]

    @staticmethod
    def make_dataset(directory, class_to_idx, extensions=None, is_valid_file=None, allow_empty=False):
        return make_dataset(directory, class_to_idx, extensions, is_valid_file, allow_empty)

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        return find_classes(directory)

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        return self._apply(self.loader(path), target)

    def __len__(self) -> int:
        return len(self.samples)


class ImageFolder(DatasetFolder):
    """A ``DatasetFolder`` of images (``IMG_EXTENSIONS``) opened as RGB PIL images."""

    def __init__(self, root: str, transform: Callable | None = None, target_transform: Callable | None = None,
                 loader: Callable[[str], Any] = default_loader, is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> None:
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None, transform=transform,
                         target_transform=target_transform, is_valid_file=is_valid_file, allow_empty=allow_empty)
        self.imgs = self.samples
