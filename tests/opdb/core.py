"""The op database: one ``OpInfo`` per op, from which tests/test_ops.py generates every check.

An OpInfo names a callable ``fn(m, *args, **kwargs)`` that runs the op through module
``m`` (``tapelab`` or ``torch``), so the same line exercises both libraries. Samples are
numpy arrays and plain Python values; the harness turns arrays into tensors of either
library, optionally as non-contiguous views, and compares values, gradients (float32
and float64) and, in float64, finite differences (gradcheck / gradgradcheck). Complex sample
arrays (``carr``) run as complex64 under "float32" and complex128 under "float64".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["OpInfo", "Sample", "ErrorInput", "rng", "arr", "carr", "pos", "unit", "build", "leaves"]


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


def carr(*shape, low=-2.0, high=2.0) -> np.ndarray:
    """A complex128 array whose real and imaginary parts are uniform (cast to the complex dtype under test)."""
    return _rng.uniform(low, high, size=shape) + 1j * _rng.uniform(low, high, size=shape)


def pos(*shape, low=0.5, high=2.0) -> np.ndarray:
    """Strictly positive values, for log, sqrt, pow bases, division denominators."""
    return _rng.uniform(low, high, size=shape)


def unit(*shape) -> np.ndarray:
    """Values in (-0.9, 0.9), for asin, acos, atanh."""
    return _rng.uniform(-0.9, 0.9, size=shape)


# ---------------------------------------------------------------- samples -> tensors of a library
_FLOAT = {"float32": np.float32, "float64": np.float64}
_COMPLEX = {"float32": np.complex64, "float64": np.complex128}


def _convert(m, value, dtype_name, requires_grad, noncontig):
    """numpy array -> tensor of library ``m`` (float arrays cast to the dtype under test)."""
    if isinstance(value, np.ndarray):
        kind = value.dtype.kind
        a = value.astype(_FLOAT[dtype_name]) if kind == "f" else value.astype(_COMPLEX[dtype_name]) if kind == "c" \
            else value
        if noncontig and a.ndim >= 2:
            t = m.tensor(np.ascontiguousarray(a.swapaxes(-1, -2))).transpose(-1, -2)
        else:
            t = m.tensor(a)
        if requires_grad and a.dtype.kind in "fc":
            t = t.detach().requires_grad_(True) if not noncontig else t.requires_grad_(True) if t.is_leaf else t
        return t
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        return type(value)(_convert(m, v, dtype_name, requires_grad, noncontig) for v in value)
    return value


def build(m, op: OpInfo, sample: Sample, dtype_name: str, requires_grad: bool):
    """``sample``'s arguments as tensors of ``m`` (tapelab, torch, or a device wrapper of either);
    the op's differentiable float arguments require grad when ``requires_grad``."""
    args = []
    for i, v in enumerate(sample.args):
        rg = requires_grad and (op.differentiable_args is None or i in op.differentiable_args)
        args.append(_convert(m, v, dtype_name, rg, sample.noncontig))
    kwargs = {k: _convert(m, v, dtype_name, False, False) for k, v in sample.kwargs.items()}
    return args, kwargs


def leaves(args) -> list:
    """The tensors among ``args`` (nested in lists too) that require grad."""
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(leaves(a))
        elif hasattr(a, "requires_grad") and a.requires_grad:
            out.append(a)
    return out
