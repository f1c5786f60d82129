"""tapelab.vision.datasets read files written here in the real on-disk formats.

MNIST-style idx files (plain and gzipped), CIFAR's pickled "python version" batches, and folders
of PNG images; absent files raise an error naming them and where they go (nothing is downloaded).
"""
from __future__ import annotations

import gzip
import pickle
import struct

import numpy as np
import pytest

pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

import tapelab  # noqa: E402
from tapelab.utils.data import DataLoader  # noqa: E402
from tapelab.vision import datasets, transforms  # noqa: E402


def write_idx(path, array: np.ndarray, compress: bool = False) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">i", n) for n in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    (gzip.open if compress else open)(path, "wb").write(data)


def mnist_root(tmp_path, name: str, n: int, compress: bool) -> tuple[np.ndarray, np.ndarray]:
    raw = tmp_path / name / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    suffix = ".gz" if compress else ""
    write_idx(raw / f"train-images-idx3-ubyte{suffix}", images, compress)
    write_idx(raw / f"train-labels-idx1-ubyte{suffix}", labels, compress)
    return images, labels


@pytest.mark.parametrize("cls,compress", [(datasets.MNIST, False), (datasets.FashionMNIST, True),
                                          (datasets.KMNIST, False)])
def test_mnist_family_reads_idx_files(tmp_path, cls, compress):
    images, labels = mnist_root(tmp_path, cls.__name__, 7, compress)
    ds = cls(str(tmp_path), train=True, transform=transforms.ToTensor())
    assert len(ds) == 7 and ds.data.dtype == tapelab.uint8 and ds.targets.dtype == tapelab.int64
    img, target = ds[3]
    assert img.shape == (1, 28, 28) and target == int(labels[3])
    np.testing.assert_allclose(img.numpy()[0], images[3] / 255.0, rtol=1e-6)
    raw_img, _ = cls(str(tmp_path))[0]
    assert raw_img.mode == "L" and np.array_equal(np.asarray(raw_img), images[0])
    assert len(ds.classes) == 10
    batch, targets = next(iter(DataLoader(ds, batch_size=4)))
    assert batch.shape == (4, 1, 28, 28) and targets.tolist() == labels[:4].tolist()


def test_missing_files_name_the_files_and_the_folder(tmp_path):
    with pytest.raises(RuntimeError) as err:
        datasets.MNIST(str(tmp_path), train=False, download=True)
    msg = str(err.value)
    assert "downloads nothing" in msg and "t10k-images-idx3-ubyte" in msg and "t10k-labels-idx1-ubyte" in msg
    assert str(tmp_path / "MNIST" / "raw") in msg
    with pytest.raises(RuntimeError, match=r"cifar-10-batches-py.*data_batch_1.*batches.meta.*cifar-10-python"):
        datasets.CIFAR10(str(tmp_path), download=True)
    with pytest.raises(RuntimeError, match="were not found"):
        datasets.CIFAR100(str(tmp_path), train=False)


def write_cifar(folder, names: list[str], label_key: str, meta: tuple[str, str, list[str]], n: int = 5):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    batches = []
    for name in names:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = rng.integers(0, len(meta[2]), n).tolist()
        with open(folder / name, "wb") as f:   # CIFAR's batches were pickled by Python 2: bytes keys
            pickle.dump({b"batch_label": b"x", b"data": data, label_key.encode(): labels}, f, protocol=2)
        batches.append((data, labels))
    with open(folder / meta[0], "wb") as f:
        pickle.dump({meta[1]: meta[2]}, f)
    return batches


def test_cifar10_reads_pickled_batches(tmp_path):
    names = [f"data_batch_{i}" for i in range(1, 6)]
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    batches = write_cifar(tmp_path / "cifar-10-batches-py", names, "labels", ("batches.meta", "label_names", classes))
    ds = datasets.CIFAR10(str(tmp_path))
    assert len(ds) == 25 and ds.classes == classes and ds.class_to_idx["cat"] == 3
    img, target = ds[7]
    data, labels = batches[1]
    assert img.mode == "RGB" and img.size == (32, 32) and target == labels[2]
    np.testing.assert_array_equal(np.asarray(img), data[2].reshape(3, 32, 32).transpose(1, 2, 0))


def test_cifar100_reads_fine_labels(tmp_path):
    classes = [f"c{i}" for i in range(100)]
    (data, labels), = write_cifar(tmp_path / "cifar-100-python", ["test"], "fine_labels",
                                  ("meta", "fine_label_names", classes))
    ds = datasets.CIFAR100(str(tmp_path), train=False, transform=transforms.PILToTensor())
    img, target = ds[4]
    assert target == labels[4] and len(ds.classes) == 100
    np.testing.assert_array_equal(img.numpy(), data[4].reshape(3, 32, 32))


def make_image_folder(root, counts: dict[str, int]):
    rng = np.random.default_rng(2)
    for cls, n in counts.items():
        (root / cls / "sub").mkdir(parents=True)
        for i in range(n):
            where = root / cls / ("sub" if i % 2 else "") / f"img{i}.png"
            Image.fromarray(rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)).save(where)
        (root / cls / "notes.txt").write_text("not an image")


def test_image_folder_classes_and_samples(tmp_path):
    make_image_folder(tmp_path, {"dog": 3, "cat": 2})
    ds = datasets.ImageFolder(str(tmp_path), transform=transforms.ToTensor())
    assert ds.classes == ["cat", "dog"] and ds.class_to_idx == {"cat": 0, "dog": 1}
    assert [t for _, t in ds.samples] == [0, 0, 1, 1, 1] and ds.imgs == ds.samples and ds.targets == [0, 0, 1, 1, 1]
    assert all(p.endswith(".png") for p, _ in ds.samples)
    img, target = ds[4]
    assert img.shape == (3, 9, 11) and target == 1


def test_dataset_folder_with_a_loader(tmp_path):
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        np.save(tmp_path / cls / "x.npy", np.full((2, 2), ord(cls), dtype=np.float32))
    ds = datasets.DatasetFolder(str(tmp_path), loader=lambda p: tapelab.from_numpy(np.load(p)), extensions=(".npy",))
    assert len(ds) == 2 and ds[1][0][0, 0].item() == ord("b") and ds[1][1] == 1
    (tmp_path / "c").mkdir()
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes c"):
        datasets.DatasetFolder(str(tmp_path), loader=np.load, extensions=(".npy",))


def test_fake_data_depends_on_the_index_only():
    ds = datasets.FakeData(size=6, image_size=(3, 8, 10), num_classes=4, transform=transforms.ToTensor())
    tapelab.manual_seed(0)
    before = tapelab.rand(1).item()
    a, ta = ds[2]
    tapelab.manual_seed(0)
    assert tapelab.rand(1).item() == before          # the caller's stream is untouched
    b, tb = ds[2]
    assert a.shape == (3, 8, 10) and ta == tb and 0 <= ta < 4
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(ds[3][0].numpy(), a.numpy())
    with pytest.raises(IndexError):
        ds[6]
