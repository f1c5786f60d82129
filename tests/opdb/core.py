"""The op database: one ``OpInfo`` per op, from which tests/test_ops.py generates every check.

An OpInfo names a callable ``fn(m, *args, **kwargs)`` that runs the op through module
``m`` (``tapelab`` or ``torch``), so the same line exercises both libraries. Samples are
numpy arrays and plain Python values; the harness turns arrays into tensors of either
library, optionally as non-contiguous views, and compares values, gradients (float32
and float64) and, in float64, finite differences (gradcheck / gradgradcheck).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["OpInfo", "Sample", "ErrorInput", "rng", "arr", "pos", "unit"]


@dataclass
class Sample:
    """Arguments for one call: numpy arrays become tensors, anything else is passed as is."""
    args: tuple
    kwargs: dict = field(default_factory=dict)
    noncontig: bool = False      # pass array arguments as transposed (non-contiguous) views
    name: str = ""
    meta_error: type | None = None   # on the meta device: the error PyTorch raises (values needed)


@dataclass
class ErrorInput:
    """A call that must fail with PyTorch's exception type and a message matching ``match``."""
    sample: Sample
    exc: type
    match: str


@dataclass
class OpInfo:
    name: str
    fn: Callable[..., Any]
    samples: Callable[[], list]
    grad: bool = True            # compare gradients with PyTorch
    gradcheck: bool = True       # finite differences in float64
    gradgrad: bool = True        # second derivatives by finite differences
    dtypes: tuple = ("float32", "float64")
    errors: Callable[[], list] = lambda: []
    atol: float = 1e-5
    rtol: float = 1.3e-5
    grad_atol: float = 1e-4
    compare_values: bool = True   # False for random ops: check shapes/dtypes only
    differentiable_args: tuple | None = None  # indices of array args that get requires_grad
    meta_error: type | None = None   # every sample's error on the meta device (output shape needs values)


_rng = np.random.default_rng(0)


def rng() -> np.random.Generator:
    return _rng


def arr(*shape, low=-2.0, high=2.0) -> np.ndarray:
    """A float64 array of uniform values (the harness casts it to the dtype under test)."""
    return _rng.uniform(low, high, size=shape)


def pos(*shape, low=0.5, high=2.0) -> np.ndarray:
    """Strictly positive values, for log, sqrt, pow bases, division denominators."""
    return _rng.uniform(low, high, size=shape)


def unit(*shape) -> np.ndarray:
    """Values in (-0.9, 0.9), for asin, acos, atanh."""
    return _rng.uniform(-0.9, 0.9, size=shape)
