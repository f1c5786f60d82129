"""ATen's cpu ``topk`` order where it partially sorts (``k * 64 <= n``): libstdc++'s ``std::partial_sort``
over ``(value, index)`` pairs compared by value alone, so equal values come out in the order its heap
leaves them (a bfloat16 sampler's top-k of tied probabilities picks by position in that order).
Its ``std::sort`` (introsort: median-of-three partitions while a slice is over 16 long, heapsort past
``2 log2 n`` levels, then one insertion sort) gives ``sort(stable=False)``'s and ``argsort``'s order of
ties, and ``std::nth_element`` (introselect) followed by ``std::sort`` of the first ``k - 1`` gives
``topk``'s elsewhere.

``__heap_select`` builds a heap of the first ``k``, pops it for each later element that compares before
its top, and ``__sort_heap`` sorts the ``k``; ``__adjust_heap`` and ``__push_heap`` are libstdc++'s
(GCC 13). NaN compares before any number, as in ATen's comparator.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["topk_rows", "sort_rows", "select_rows"]

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
        _heap_select(v, ix, 0, k, n, largest)   # std::partial_sort: __heap_select, then __sort_heap
        _sort_heap(v, ix, 0, k, largest)
        out[r, :] = ix[:k]


def topk_rows(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The ``k`` indices of each row of the 2-D array ``x`` in ATen's partial-sort order."""
    out = np.empty((x.shape[0], k), np.int64)
    _rows(np.ascontiguousarray(x), k, largest, out)
    return out


# ---------------------------------------------------------------- std::sort and std::nth_element
_THRESHOLD = 16


@njit(**_JIT)
def _swap(v, ix, a, b):
    v[a], v[b] = v[b], v[a]
    ix[a], ix[b] = ix[b], ix[a]


@njit(**_JIT)
def _heap_select(v, ix, first, middle, last, largest):
    """``__heap_select`` on ``[first, last)``: a heap of ``[first, middle)`` holding the smallest (by comp)."""
    k = middle - first
    if k >= 2:
        vv, ii = v[first:middle], ix[first:middle]
        parent = (k - 2) // 2
        while True:
            _adjust(vv, ii, parent, k, vv[parent], ii[parent], largest)
            if parent == 0:
                break
            parent -= 1
    for i in range(middle, last):
        if _before(v[i], v[first], largest):
            value, index = v[i], ix[i]
            v[i], ix[i] = v[first], ix[first]
            _adjust(v[first:middle], ix[first:middle], 0, k, value, index, largest)


@njit(**_JIT)
def _sort_heap(v, ix, first, last, largest):
    vv, ii = v[first:last], ix[first:last]
    n = last - first
    while n > 1:
        n -= 1
        _pop(vv, ii, n, n, largest)


@njit(**_JIT)
def _median_to_first(v, ix, result, a, b, c, largest):
    if _before(v[a], v[b], largest):
        if _before(v[b], v[c], largest):
            _swap(v, ix, result, b)
        elif _before(v[a], v[c], largest):
            _swap(v, ix, result, c)
        else:
            _swap(v, ix, result, a)
    elif _before(v[a], v[c], largest):
        _swap(v, ix, result, a)
    elif _before(v[b], v[c], largest):
        _swap(v, ix, result, c)
    else:
        _swap(v, ix, result, b)


@njit(**_JIT)
def _partition_pivot(v, ix, first, last, largest):
    """``__unguarded_partition_pivot``: the median of three moved to ``first``, the rest partitioned round it."""
    mid = first + (last - first) // 2
    _median_to_first(v, ix, first, first + 1, mid, last - 1, largest)
    lo, hi = first + 1, last
    while True:
        while _before(v[lo], v[first], largest):
            lo += 1
        hi -= 1
        while _before(v[first], v[hi], largest):
            hi -= 1
        if not lo < hi:
            return lo
        _swap(v, ix, lo, hi)
        lo += 1


@njit(**_JIT)
def _linear_insert(v, ix, last, largest):
    value, index = v[last], ix[last]
    nxt = last - 1
    while _before(value, v[nxt], largest):
        v[last], ix[last] = v[nxt], ix[nxt]
        last = nxt
        nxt -= 1
    v[last], ix[last] = value, index


@njit(**_JIT)
def _insertion_sort(v, ix, first, last, largest):
    if first == last:
        return
    for i in range(first + 1, last):
        if _before(v[i], v[first], largest):
            value, index = v[i], ix[i]
            for j in range(i, first, -1):
                v[j], ix[j] = v[j - 1], ix[j - 1]
            v[first], ix[first] = value, index
        else:
            _linear_insert(v, ix, i, largest)


@njit(**_JIT)
def _lg(n):
    r = 0
    while n > 1:
        n >>= 1
        r += 1
    return r


@njit(**_JIT)
def _introsort_loop(v, ix, first, last, depth_limit, largest):
    """``__introsort_loop``: partitions while a slice is over 16 long, a heapsort past the depth limit.
    libstdc++ recurses into the right part and loops on the left; the parts are disjoint, so a stack
    of pending left parts does the same work (numba's cache cannot hold a recursive function)."""
    stack = np.empty((2 * depth_limit + 2, 3), np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2] = first, last, depth_limit
    top = 1
    while top:
        top -= 1
        lo, hi, depth = stack[top, 0], stack[top, 1], stack[top, 2]
        while hi - lo > _THRESHOLD:
            if depth == 0:
                _heap_select(v, ix, lo, hi, hi, largest)
                _sort_heap(v, ix, lo, hi, largest)
                break
            depth -= 1
            cut = _partition_pivot(v, ix, lo, hi, largest)
            stack[top, 0], stack[top, 1], stack[top, 2] = lo, cut, depth
            top += 1
            lo = cut


@njit(**_JIT)
def _introsort(v, ix, first, last, largest):
    """``std::sort``: ``__introsort_loop`` then ``__final_insertion_sort``."""
    if last - first < 2:
        return
    _introsort_loop(v, ix, first, last, 2 * _lg(last - first), largest)
    if last - first > _THRESHOLD:
        _insertion_sort(v, ix, first, first + _THRESHOLD, largest)
        for i in range(first + _THRESHOLD, last):
            _linear_insert(v, ix, i, largest)
    else:
        _insertion_sort(v, ix, first, last, largest)


@njit(**_JIT)
def _sort_all(x, largest, out):
    n = x.shape[1]
    v = np.empty(n, x.dtype)
    ix = np.empty(n, np.int64)
    for r in range(x.shape[0]):
        for i in range(n):
            v[i] = x[r, i]
            ix[i] = i
        _introsort(v, ix, 0, n, largest)
        out[r, :] = ix


@njit(**_JIT)
def _select_all(x, k, largest, then_sort, out):
    n = x.shape[1]
    v = np.empty(n, x.dtype)
    ix = np.empty(n, np.int64)
    for r in range(x.shape[0]):
        for i in range(n):
            v[i] = x[r, i]
            ix[i] = i
        first, last, nth = 0, n, k - 1
        if nth < n:   # std::nth_element: __introselect
            depth = 2 * _lg(n)
            done = False
            while last - first > 3:
                if depth == 0:
                    _heap_select(v, ix, first, nth + 1, last, largest)
                    _swap(v, ix, first, nth)
                    done = True
                    break
                depth -= 1
                cut = _partition_pivot(v, ix, first, last, largest)
                if cut <= nth:
                    first = cut
                else:
                    last = cut
            if not done:
                _insertion_sort(v, ix, first, last, largest)
        if then_sort:
            _introsort(v, ix, 0, k - 1, largest)   # std::sort of the first k - 1
        out[r, :] = ix[:k]


def sort_rows(x: np.ndarray, descending: bool) -> np.ndarray:
    """Each row's order by libstdc++'s ``std::sort`` (ATen's ``sort(stable=False)``), NaN last
    (first when descending)."""
    out = np.empty(x.shape, np.int64)
    _sort_all(np.ascontiguousarray(x), descending, out)
    return out


def select_rows(x: np.ndarray, k: int, largest: bool, then_sort: bool = True) -> np.ndarray:
    """The ``k`` indices of each row in ATen's ``topk`` order where it does not partially sort:
    ``std::nth_element`` at ``k - 1``, then (``sorted=True``) ``std::sort`` of the first ``k - 1``."""
    out = np.empty((x.shape[0], k), np.int64)
    if k:
        _select_all(np.ascontiguousarray(x), k, largest, then_sort, out)
    return out
