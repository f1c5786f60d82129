"""Scatter-add loops: ``out[..., idx, ...] += src`` with repeated indices accumulating.

numpy's ``ufunc.at`` pays an indexing step per element (10 ns and more: 20000 rows of 64 floats
took 10 ms, PyTorch's index_add_ 1 ms). These loops add in the order ``ufunc.at`` does (each
destination receives its contributions by increasing source position), so their sums equal
``np.add.at``'s bit for bit. Both take ``out`` as ``(A, M, B)``: ``M`` the indexed dim, ``A`` and
``B`` the dims before and after it flattened; an index ``j`` in ``[-M, 0)`` counts from the end, as
numpy's. Each checks every index before writing and returns False (nothing written) at one
outside ``[-M, M)``, so the caller raises its own error.
"""
from __future__ import annotations

from numba import njit

__all__ = ["add_rows", "add_along"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT)
def add_rows(out, idx, src):
    """``out[a, idx[i], b] += src[a, i, b]``: one index per row, ``idx`` 1-d (``x[idx]``'s backward,
    index_add_, embedding's backward); the inner loop over ``b`` is a contiguous vector add."""
    A, M, B = out.shape
    for i in range(idx.shape[0]):
        if idx[i] < -M or idx[i] >= M:
            return False
    for a in range(A):
        for i in range(idx.shape[0]):
            j = idx[i]
            if j < 0:
                j += M
            for b in range(B):
                out[a, j, b] += src[a, i, b]
    return True


@njit(**_JIT)
def add_along(out, idx, src):
    """``out[a, idx[a, i, b], b] += src[a, i, b]``: an index per element (scatter_add along a dim,
    gather's backward); ``idx`` and ``src`` are ``(A, n, B)``, strided or broadcast alike."""
    M = out.shape[1]
    A, n, B = idx.shape
    for a in range(A):
        for i in range(n):
            for b in range(B):
                if idx[a, i, b] < -M or idx[a, i, b] >= M:
                    return False
    for a in range(A):
        for i in range(n):
            for b in range(B):
                j = idx[a, i, b]
                if j < 0:
                    j += M
                out[a, j, b] += src[a, i, b]
    return True
