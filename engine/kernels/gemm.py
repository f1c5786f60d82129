"""Matrix products split over tapelab's intra-op pool: numpy's BLAS runs one thread per block.

The hot paths (matmul/linear, convolution, attention, the fused RNN layers) call
``gemm(xp, a, b)`` where they called ``xp.matmul``. A product of at least ``GEMM_PARALLEL_MIN``
multiply-adds is cut into one block per thread (run at once, or one after another when that has
measured faster for its size): along its leading batch axis when that has a
block for each thread, else along the longer of the output's rows and columns, each block one
single-threaded BLAS call writing its part of one output array. Everything else (cupy, a
captured step's GEMM route, mixed or integer dtypes, a vector operand, small products) is
``xp.matmul`` unchanged.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import pool, runtime

__all__ = ["gemm", "gemms", "GEMM_PARALLEL_MIN"]

# Below this many multiply-adds a product runs on the calling thread, untimed; above it the pool
# times both ways per size class and keeps the faster (engine/base/pool.py). A worker starts its
# block 20-80 us after the hand-off on the project machine, and 2^21 MACs take ~40 us on one core,
# so smaller products never pay (issue 17, bench/README.md).
GEMM_PARALLEL_MIN = 1 << 21
_BLAS_DTYPES = frozenset(map(np.dtype, ("float32", "float64", "complex64", "complex128")))


def gemm(xp, a, b, out=None):
    """``xp.matmul(a, b, out=out)``, in blocks over the intra-op threads when it is large enough."""
    if (xp is not np or type(a) is not np.ndarray or type(b) is not np.ndarray      # cupy, a sparse COO operand
            or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype not in _BLAS_DTYPES):
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    n_threads = runtime.intra_op_threads()
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.ndim > 2 or b.ndim > 2 else ()
    macs = math.prod(batch) * m * n * k
    if n_threads < 2 or macs < GEMM_PARALLEL_MIN or k != b.shape[-2]:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(batch + (m, n), a.dtype)
    # run whole, the same blocks go one after another: a product's rounding then does not depend
    # on which way the pool chose (a whole BLAS call rounds differently from its blocks)
    pool.run_blocks(_matmul_into, _blocks(a, b, out, batch, n_threads), ("gemm", n_threads), macs)
    return out


def gemms(xp, *products) -> list:
    """The independent products ``a @ b``, each one whole single-threaded BLAS call, side by side
    on the threads where that has measured faster than one after another: a backward's input and
    weight gradients are two full-size GEMMs, and each keeps its shape, where ``gemm``'s split
    halves it. Either way each product rounds as one BLAS call."""
    n_threads = runtime.intra_op_threads()
    if (n_threads < 2 or len(products) < 2 or xp is not np
            or not all(type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == b.ndim == 2
                       and a.dtype == b.dtype and a.dtype in _BLAS_DTYPES and a.shape[1] == b.shape[0]
                       for a, b in products)):
        return [gemm(xp, a, b) for a, b in products]
    macs = [a.shape[0] * a.shape[1] * b.shape[1] for a, b in products]
    if min(macs) < GEMM_PARALLEL_MIN:
        return [gemm(xp, a, b) for a, b in products]
    outs = [np.empty((a.shape[0], b.shape[1]), a.dtype) for a, b in products]
    side_by_side = [(a, b, out) for (a, b), out in zip(products, outs)]
    pool.run_blocks(_products, [(block,) for block in side_by_side[:n_threads - 1]]
                    + [tuple(side_by_side[n_threads - 1:])], ("gemms", n_threads, len(products)), sum(macs))
    return outs


def _products(*triples) -> None:
    """Each ``(a, b, out)`` in turn, one BLAS call each: one thread's share of ``gemms``."""
    for a, b, out in triples:
        np.matmul(a, b, out=out)


def _blocks(a, b, out, batch: tuple, n_threads: int) -> list:
    """One ``(a, b, out)`` per thread: along the leading batch axis when it has a block for each
    thread, else along the longer of the output's rows and columns."""
    m, n = out.shape[-2:]
    if batch and batch[0] >= n_threads:
        return [(_lead(a, len(batch), lo, hi), _lead(b, len(batch), lo, hi), out[lo:hi])
                for lo, hi in pool.ranges(batch[0], n_threads)]
    if m >= n:
        return [(a[..., lo:hi, :], b, out[..., lo:hi, :]) for lo, hi in pool.ranges(m, n_threads)]
    return [(a, b[..., lo:hi], out[..., lo:hi]) for lo, hi in pool.ranges(n, n_threads)]


def _matmul_into(a, b, out) -> None:
    np.matmul(a, b, out=out)


def _lead(x, batch_ndim: int, lo: int, hi: int):
    """Rows ``lo:hi`` of the broadcast batch's first axis, as ``x`` holds it: whole when ``x``
    lacks that axis or broadcasts along it."""
    if x.ndim - 2 < batch_ndim or x.shape[0] == 1:
        return x
    return x[lo:hi]
