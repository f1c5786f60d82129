"""The memory order ATen's TensorIterator gives the result of an elementwise op on several operands.

numpy lays ``a + b`` out row-major when its operands' orders disagree; ATen orders the result's
dimensions by the strides of the first operand that tells two of them apart (``reorder_dimensions``),
so ``a.transpose(1, 2) + b`` is laid out as ``a``. The order is observable: ``stride()``,
``is_contiguous()``, and every draw that fills memory in order, as ``dropout`` does: TSLib's
embeddings add ``conv(x).transpose(1, 2)`` and a linear layer's output, then drop, and the mask
follows the sum's layout.
"""
from __future__ import annotations

import numpy as np

__all__ = ["iterator_order", "in_iterator_order", "reorder_dimensions"]


def _broadcast_strides(shape: tuple, a: np.ndarray) -> list:
    """``a``'s byte strides over the broadcast ``shape``: 0 on a dimension it is broadcast along."""
    off = len(shape) - a.ndim
    strides = [0] * len(shape)
    for i, (n, s) in enumerate(zip(a.shape, a.strides)):
        strides[off + i] = 0 if n == 1 and shape[off + i] != 1 else s
    return strides


def _row_major(strides: list, shape: tuple) -> bool:
    """The strides decrease from the first dimension to the last, broadcast ones (0) left out; of two
    equal ones (a dimension of one element, which numpy strides freely) the later is no larger, or
    ATen's sort swaps them, and a swapped dimension may then pass others no operand orders."""
    prev = prev_n = None
    for s, n in zip(strides, shape):
        if s:
            if prev is not None and (s > prev or (s == prev and n > prev_n)):
                return False
            prev, prev_n = s, n
    return True


def iterator_order(shape: tuple, operands) -> list | None:
    """The dimensions of the broadcast ``shape`` from the fastest to the slowest in ATen's result of
    an elementwise op on ``operands`` (arrays in argument order; numbers and 0-d arrays take no part),
    or None when that result is row-major (each operand orders the dimensions row-major or not at all,
    or the sort keeps the order)."""
    nd = len(shape)
    if nd < 2:
        return None
    arrays = [a for a in operands if isinstance(a, np.ndarray) and a.ndim]
    strides = [_broadcast_strides(shape, a) for a in arrays]
    one = 1 in shape     # numpy's contiguity ignores the strides of one-element dimensions; ATen's sort does not
    if all((a.flags.c_contiguous and not one) or _row_major(st, shape) for a, st in zip(arrays, strides)):
        return None

    perm = reorder_dimensions(shape, strides)
    return None if perm == list(range(nd - 1, -1, -1)) else perm


def reorder_dimensions(sizes, strides: list) -> list:
    """ATen's ``TensorIterator::reorder_dimensions``: the dimensions of ``sizes`` from the fastest to the
    slowest, ordered by the operands' ``strides`` (one list per operand over ``sizes``, 0 where it is
    broadcast): the first operand that tells two dimensions apart decides, equal strides put the
    smaller dimension first, and ATen's insertion sort leaves ambiguous pairs in place."""
    def should_swap(d0: int, d1: int) -> int:
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:   # broadcast along one of them: the next operand decides
                continue
            if s0 != s1:
                return 1 if s0 > s1 else -1
            if sizes[d0] > sizes[d1]:   # equal strides: the smaller dimension goes first
                return 1
        return 0

    perm = list(range(len(sizes) - 1, -1, -1))
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def in_iterator_order(out: np.ndarray, operands) -> np.ndarray:
    """``out``, the result of an elementwise op on ``operands``, laid out as ATen lays that result
    out, one-element dimensions' strides included (ATen's ordering of a later op reads them): ``out``
    itself when it is already, a view with those strides when only theirs differ, else a copy."""
    shape = out.shape
    perm = iterator_order(shape, operands)
    if perm is None:
        if not out.flags.c_contiguous:
            return np.ascontiguousarray(out)
        perm = range(len(shape) - 1, -1, -1)
    strides = [0] * len(shape)
    step = out.itemsize
    for d in perm:
        strides[d] = step
        step *= shape[d]
    if tuple(strides) == out.strides:
        return out
    if all(n == 1 or s == t for n, s, t in zip(shape, strides, out.strides)):
        return np.lib.stride_tricks.as_strided(out, shape, strides, writeable=out.flags.writeable)
    slowest_first = perm[::-1]
    laid = np.empty([shape[d] for d in slowest_first], out.dtype).transpose(np.argsort(slowest_first))
    laid[...] = out
    return laid
