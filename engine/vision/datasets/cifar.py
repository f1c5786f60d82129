"""CIFAR-10 and CIFAR-100 from the "python version" pickled batches under ``root``."""
from __future__ import annotations

import os
import pickle
from collections.abc import Callable

import numpy as np

from .vision import VisionDataset, missing_files_error

__all__ = ["CIFAR10", "CIFAR100"]


class CIFAR10(VisionDataset):
    """32x32 colour images (PIL, mode "RGB") in 10 classes, from ``root/cifar-10-batches-py``."""

    base_folder = "cifar-10-batches-py"
    source = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz (extract it into root)"
    train_list = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"]
    test_list = ["test_batch"]
    meta = {"filename": "batches.meta", "key": "label_names"}
    label_key = "labels"

    def __init__(self, root: str, train: bool = True, transform: Callable | None = None,
                 target_transform: Callable | None = None, download: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        folder = os.path.join(self.root, self.base_folder)
        wanted = (self.train_list if train else self.test_list) + [self.meta["filename"]]
        absent = [name for name in wanted if not os.path.isfile(os.path.join(folder, name))]
        if absent:
            raise missing_files_error(type(self).__name__, folder, absent, self.source, download)
        data, self.targets = [], []
        for name in wanted[:-1]:
            entry = self._unpickle(os.path.join(folder, name))
            data.append(np.asarray(entry["data"], dtype=np.uint8))
            self.targets.extend(int(t) for t in entry[self.label_key])
        self.data = np.vstack(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)   # HWC, as PIL wants
        self.classes = list(self._unpickle(os.path.join(folder, self.meta["filename"]))[self.meta["key"]])
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    @staticmethod
    def _unpickle(path: str) -> dict:
        with open(path, "rb") as f:
            entry = pickle.load(f, encoding="latin1")
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}

    def __getitem__(self, index: int):
        from PIL import Image
        return self._apply(Image.fromarray(self.data[index]), self.targets[index])

    def __len__(self) -> int:
        return len(self.data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train else 'Test'}"


class CIFAR100(CIFAR10):
    """CIFAR-100: the same images' format with 100 fine labels, from ``root/cifar-100-python``."""

    base_folder = "cifar-100-python"
    source = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz (extract it into root)"
    train_list = ["train"]
    test_list = ["test"]
    meta = {"filename": "meta", "key": "fine_label_names"}
    label_key = "fine_labels"
