"""``add_embedding``'s files for TensorBoard's projector: per embedding a folder
``<log_dir>/<step:05d>/<tag>`` with ``tensors.tsv`` (and ``metadata.tsv``, ``sprite.png``), and one
``projector_config.pbtxt`` in the log directory listing every embedding written so far."""
from __future__ import annotations

import math
import os

import numpy as np
from google.protobuf import text_format
from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo, ProjectorConfig

from .summary import _grid, png, to_numpy

__all__ = ["Projector"]


def _encode(tag: str) -> str:
    """A tag as one folder name: ``%``, ``/`` and ``\\`` percent-encoded, as PyTorch's."""
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


class Projector:
    """The embeddings of one log directory; each ``add`` rewrites the config with all of them."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self.config = ProjectorConfig()

    def add(self, mat, metadata=None, label_img=None, global_step=None, tag: str = "default",
            metadata_header=None) -> None:
        mat = to_numpy(mat)
        step = 0 if global_step is None else global_step
        subdir = f"{str(step).zfill(5)}/{_encode(tag)}"
        path = os.path.join(self.log_dir, subdir)
        if os.path.isdir(path):
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        elif os.path.exists(path):
            raise NotADirectoryError(f"Path: `{path}` exists, but is a file. Cannot proceed.")
        else:
            os.makedirs(path)
        info = EmbeddingInfo(tensor_name=f"{tag}:{str(step).zfill(5)}", tensor_path=f"{subdir}/tensors.tsv")
        if metadata is not None:
            if mat.shape[0] != len(metadata):
                raise AssertionError("#labels should equal with #data points")
            _write(path, "metadata.tsv", _metadata_tsv(metadata, metadata_header))
            info.metadata_path = f"{subdir}/metadata.tsv"
        if label_img is not None:
            imgs = to_numpy(label_img)
            if mat.shape[0] != imgs.shape[0]:
                raise AssertionError("#images should equal with #data points")
            _write(path, "sprite.png", png(_sprite(imgs)))
            info.sprite.image_path = f"{subdir}/sprite.png"
            info.sprite.single_image_dim.extend([imgs.shape[3], imgs.shape[2]])
        if mat.ndim != 2:
            raise AssertionError("mat should be 2D, where mat.size(0) is the number of data points")
        _write(path, "tensors.tsv", "".join("\t".join(str(v.item()) for v in row) + "\n" for row in mat))
        self.config.embeddings.extend([info])
        _write(self.log_dir, "projector_config.pbtxt", text_format.MessageToString(self.config))


def _write(folder: str, name: str, data) -> None:
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _metadata_tsv(metadata, header) -> str:
    """One label per line, or with ``header`` one tab-separated row per point under it."""
    if not header:
        return "\n".join(str(x) for x in metadata) + "\n"
    if len(header) != len(metadata[0]):
        raise AssertionError("len of header must be equal to the number of columns in metadata")
    return "\n".join("\t".join(str(e) for e in row) for row in [header] + list(metadata)) + "\n"


def _sprite(imgs: np.ndarray) -> np.ndarray:
    """The label images (N, C, H, W) in a square grid of ceil(sqrt(N)) per row, as RGB uint8;
    the projector cuts it back into tiles of one image each."""
    if imgs.shape[1] == 1:
        imgs = np.repeat(imgs, 3, axis=1)
    grid = _grid(imgs, "NCHW", ncols=math.ceil(imgs.shape[0] ** 0.5))
    square = np.zeros((grid.shape[1], grid.shape[1], 3))
    square[:grid.shape[0]] = grid
    return (square * 255).clip(0, 255).astype(np.uint8)
