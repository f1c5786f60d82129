"""Deterministic model weights from numpy, shared by scripts/vision_references.py and the tests.

Each state_dict entry is drawn from its own generator, seeded by the key's CRC32, so torchvision
(in the oracle venv) and tapelab.vision (here) load the same numbers without copying files.
Scales keep deep networks' activations of order one: weights ~ N(0, 1/fan_in), norm scales in
[0.5, 1.5], positive running variances.
"""
from __future__ import annotations

import zlib

import numpy as np


def seeded_value(key: str, shape: tuple[int, ...], integer: bool = False) -> np.ndarray:
    """The value of one state_dict entry."""
    if integer:
        return np.zeros(shape, dtype=np.int64)
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    leaf = key.rsplit(".", 1)[-1]
    if leaf == "running_var":
        value = rng.uniform(0.5, 1.5, shape)
    elif leaf == "running_mean":
        value = rng.normal(0.0, 0.1, shape)
    elif len(shape) == 1 and leaf == "weight":       # batch/layer norm scales
        value = rng.uniform(0.5, 1.5, shape)
    elif len(shape) == 1:                             # biases
        value = rng.normal(0.0, 0.1, shape)
    else:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        value = rng.normal(0.0, 1.0, shape) / np.sqrt(max(fan_in, 1))
    return value.astype(np.float32)


def seeded_state(shapes: dict[str, tuple[tuple[int, ...], bool]]) -> dict[str, np.ndarray]:
    """{key: array} for {key: (shape, is_integer)}."""
    return {k: seeded_value(k, tuple(shape), integer) for k, (shape, integer) in shapes.items()}


def seeded_input(shape: tuple[int, ...], seed: int = 1234) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 1.0, shape).astype(np.float32)
