"""Conjugation and complex parts of real tensors: tapelab has no complex dtypes, so a tensor is its
own conjugate and its own real part, its imaginary part does not exist, and its angle is 0 or pi.
These are PyTorch's answers for real tensors, so code written for both kinds runs unchanged."""
from __future__ import annotations

import math

from ..base import dtype as _dtype
from ._util import Tensor

__all__ = ["conj", "conj_physical", "resolve_conj", "resolve_neg", "real", "imag", "angle"]


def conj(input: Tensor) -> Tensor:
    """``input`` itself (a real tensor is its own conjugate)."""
    return input


def conj_physical(input: Tensor) -> Tensor:
    return input


def resolve_conj(input: Tensor) -> Tensor:
    return input


def resolve_neg(input: Tensor) -> Tensor:
    return input


def real(input: Tensor) -> Tensor:
    return input


def imag(input: Tensor) -> Tensor:
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def angle(input: Tensor) -> Tensor:
    """pi for negative values, 0 otherwise (NaN stays NaN); integers give the default float dtype."""
    x = input if input.is_floating_point() else input.to(_dtype.get_default_dtype())
    return (x < 0).to(x.dtype) * math.pi + x * 0


METHODS = ("conj", "conj_physical", "resolve_conj", "resolve_neg", "angle")
PROPERTIES = {"real": real, "imag": imag}
OPERATORS = {"conj_physical_": lambda self: self}

COMPOSITES = {"conj": "the tensor itself", "conj_physical": "the tensor itself", "conj_physical_": "the tensor itself",
              "resolve_conj": "the tensor itself", "resolve_neg": "the tensor itself", "real": "the tensor itself",
              "imag": "an error, as for any real tensor", "angle": "a comparison and a mul"}
