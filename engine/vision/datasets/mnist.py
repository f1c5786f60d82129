"""MNIST, FashionMNIST and KMNIST from the idx files in ``root/<ClassName>/raw`` (gzipped or not)."""
from __future__ import annotations

import gzip
import os
from collections.abc import Callable

import numpy as np

from ...core.creation import from_numpy
from ...core.tensor import Tensor
from .vision import VisionDataset, missing_files_error

__all__ = ["MNIST", "FashionMNIST", "KMNIST", "read_idx"]

# idx type codes (the third byte of the magic number) -> big-endian numpy dtypes
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str) -> np.ndarray:
    """Read one idx file (LeCun's format: 0, 0, type code, ndim, big-endian int32 sizes, data)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise RuntimeError(f"read_idx: {path} is not an idx file (magic bytes {raw[:4]!r})")
    ndim = raw[3]
    shape = tuple(int(v) for v in np.frombuffer(raw, ">i4", count=ndim, offset=4))
    data = np.frombuffer(raw, _IDX_TYPES[raw[2]], offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise RuntimeError(f"read_idx: {path} holds {data.size} values for shape {shape}")
    return data.reshape(shape).astype(np.dtype(_IDX_TYPES[raw[2]]).newbyteorder("="))


class MNIST(VisionDataset):
    """Handwritten digits: 28x28 grayscale images (PIL, mode "L") and int labels."""

    mirror = "https://ossci-datasets.s3.amazonaws.com/mnist/"
    files = {True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root: str, train: bool = True, transform: Callable | None = None,
                 target_transform: Callable | None = None, download: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        paths = [self._find(name) for name in self.files[train]]
        if None in paths:
            absent = [f"{n} (or {n}.gz)" for n, p in zip(self.files[train], paths) if p is None]
            raise missing_files_error(type(self).__name__, self.raw_folder, absent, self.mirror, download)
        self.data: Tensor = from_numpy(np.ascontiguousarray(read_idx(paths[0])))
        self.targets: Tensor = from_numpy(read_idx(paths[1]).astype(np.int64))

    @property
    def raw_folder(self) -> str:
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.classes)}

    def _find(self, name: str) -> str | None:
        for candidate in (name, name + ".gz"):
            path = os.path.join(self.raw_folder, candidate)
            if os.path.isfile(path):
                return path
        return None

    def __getitem__(self, index: int):
        from PIL import Image
        img = Image.fromarray(self.data[index].numpy())
        return self._apply(img, int(self.targets[index]))

    def __len__(self) -> int:
        return len(self.data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train else 'Test'}"


class FashionMNIST(MNIST):
    """Zalando's clothing images in MNIST's format."""

    mirror = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]


class KMNIST(MNIST):
    """Kuzushiji-MNIST: cursive Japanese characters in MNIST's format."""

    mirror = "http://codh.rois.ac.jp/kmnist/dataset/kmnist/"
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
