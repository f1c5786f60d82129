"""ATen's cpu ``topk`` order where it partially sorts (``k * 64 <= n``): libstdc++'s ``std::partial_sort``
over ``(value, index)`` pairs compared by value alone, so equal values come out in the order its heap
leaves them (a bfloat16 sampler's top-k of tied probabilities picks by position in that order).

``__heap_select`` builds a heap of the first ``k``, pops it for each later element that compares before
its top, and ``__sort_heap`` sorts the ``k``; ``__adjust_heap`` and ``__push_heap`` are libstdc++'s
(GCC 13). NaN compares before any number, as in ATen's comparator.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["topk_rows"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT)
def _before(a, b, largest):
    if largest:
        return (np.isnan(a) and not np.isnan(b)) or a > b
    return (not np.isnan(a) and np.isnan(b)) or a < b


@njit(**_JIT)
def _push(v, ix, hole, top, value, index, largest):
    parent = (hole - 1) // 2
    while hole > top and _before(v[parent], value, largest):
        v[hole] = v[parent]
        ix[hole] = ix[parent]
        hole = parent
        parent = (hole - 1) // 2
    v[hole] = value
    ix[hole] = index


@njit(**_JIT)
def _adjust(v, ix, hole, length, value, index, largest):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if _before(v[child], v[child - 1], largest):
            child -= 1
        v[hole] = v[child]
        ix[hole] = ix[child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        v[hole] = v[child - 1]
        ix[hole] = ix[child - 1]
        hole = child - 1
    _push(v, ix, hole, top, value, index, largest)


@njit(**_JIT)
def _pop(v, ix, last, result, largest):
    value, index = v[result], ix[result]
    v[result], ix[result] = v[0], ix[0]
    _adjust(v, ix, 0, last, value, index, largest)


@njit(**_JIT)
def _rows(x, k, largest, out):
    n = x.shape[1]
    v = np.empty(n, x.dtype)
    ix = np.empty(n, np.int64)
    for r in range(x.shape[0]):
        for i in range(n):
            v[i] = x[r, i]
            ix[i] = i
        if k >= 2:   # __make_heap
            parent = (k - 2) // 2
            while True:
                _adjust(v, ix, parent, k, v[parent], ix[parent], largest)
                if parent == 0:
                    break
                parent -= 1
        for i in range(k, n):
            if _before(v[i], v[0], largest):
                _pop(v, ix, k, i, largest)
        last = k
        while last > 1:   # __sort_heap
            last -= 1
            _pop(v, ix, last, last, largest)
        out[r, :] = ix[:k]


def topk_rows(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The ``k`` indices of each row of the 2-D array ``x`` in ATen's partial-sort order."""
    out = np.empty((x.shape[0], k), np.int64)
    _rows(np.ascontiguousarray(x), k, largest, out)
    return out
