"""Deterministic model weights from numpy, shared by scripts/vision_references.py and the tests.

Each state_dict entry is drawn from its own generator, seeded by the key's CRC32, so torchvision
(in the oracle venv) and tapelab.vision (here) load the same numbers without copying files.
Scales keep deep networks' activations of order one: weights ~ N(0, 1/fan_in), norm scales and
running variances in [0.5, 1.5), means and biases ~ N(0, 0.01).
"""
from __future__ import annotations

import zlib

import numpy as np


def seeded_value(key: str, shape: tuple[int, ...], integer: bool = False) -> np.ndarray:
    """The value of one state_dict entry (drawn in float32: a 100M-parameter model takes ~1 s)."""
    if integer:
        return np.zeros(shape, dtype=np.int64)
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    leaf = key.rsplit(".", 1)[-1]
    if leaf == "running_var" or (len(shape) == 1 and leaf == "weight"):   # variances, norm scales
        return rng.random(shape, dtype=np.float32) + np.float32(0.5)
    normal = rng.standard_normal(shape, dtype=np.float32)
    if leaf == "running_mean" or len(shape) == 1:                           # means, biases
        return normal * np.float32(0.1)
    fan_in = int(np.prod(shape[1:]))
    return normal * np.float32(1.0 / np.sqrt(max(fan_in, 1)))


# buffers the model computes from its configuration (window attention's relative position index and
# coordinates): they keep their constructed values, or every token pair would share one bias
CONSTRUCTED = ("relative_position_index", "relative_coords_table")


def seeded_state(shapes: dict[str, tuple[tuple[int, ...], bool]]) -> dict[str, np.ndarray]:
    """{key: array} for {key: (shape, is_integer)}, but the CONSTRUCTED buffers."""
    return {k: seeded_value(k, tuple(shape), integer) for k, (shape, integer) in shapes.items()
            if k.rsplit(".", 1)[-1] not in CONSTRUCTED}


def seeded_input(shape: tuple[int, ...], seed: int = 1234) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 1.0, shape).astype(np.float32)
