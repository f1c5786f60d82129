"""Matrix products on the intra-op threads: MKL's own, or tapelab's pool with one BLAS thread a block.

The hot paths (matmul/linear, convolution, attention, the fused RNN layers) call
``gemm(xp, a, b)`` where they called ``xp.matmul``. A product MKL takes (``MKL_MIN``) runs as one
call on MKL's OpenMP threads, as in PyTorch (``mkl.py``: its threads spin between calls, where the
pool's hand-off arrives after a typical block is done), except inside a pool block. Otherwise a
product of at least ``GEMM_PARALLEL_MIN`` multiply-adds is cut into one block per thread (run at once,
or one after another when that has measured faster for its size): along its leading batch axis when
that has a block for each thread, else along the longer of the output's rows and columns, each block one
single-threaded BLAS call writing its part of one output array. Everything else (cupy, a
captured step's GEMM route, mixed or integer dtypes, a vector operand, small products) is
``xp.matmul`` unchanged.

Each 2-D float32 product (a whole one, or a block) of at least ``OWN_MIN_ROWS x OWN_MIN_K x
OWN_MIN_COLS``, and each stack of them with one batch shape, runs our own GEMM (``sgemm.py``) when
the loops are on and it is the faster one on the machine for the product's rows, terms and
columns (``sgemm.MAX_ROWS``, ``MAX_ROWS_LONG``; AVX-512 where numpy's OpenBLAS runs its Haswell
kernels: 1.2-2.1x ``np.matmul`` on one thread at every size); ``gemm_here`` is one such product on the
calling thread (a recurrence step's), and ``prepack`` readies a weight that many of them share.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import pool, runtime
from ..base.coo import COOArray
from . import blas, mkl
from .switch import enabled, loops, native, use

__all__ = ["gemm", "gemm_add", "gemm_bias", "product_out", "gemms", "attention", "attention_grad", "gemm_here",
           "prepack", "loop_gemm", "GEMM_PARALLEL_MIN"]

# Below this many multiply-adds a product runs on the calling thread, untimed; above it the pool
# times both ways per size class and keeps the faster (engine/base/pool.py). A worker starts its
# block 20-80 us after the hand-off on the project machine, and 2^21 MACs take ~40 us on one core,
# so smaller products never pay (issue 17, bench/README.md).
GEMM_PARALLEL_MIN = 1 << 21
# From this many multiply-adds a product our GEMM takes may be cut into one part per thread on
# numba's threads (sgemm._sgemm_parallel), split and whole timed per size class (pool.timed): a
# region's fork and join costs ~1.6 us with libgomp spinning (27 us passive), so below 2^17 (~6 us
# of work on one core) the parts cannot pay (37x50x33: 2.9 us whole, 3.3 cut; 20x200x800: 60 -> 32
# us; session 18). From 2^19 since session 33 (AMD EPYC, two threads): at 32x128x64 (2^18, a GRU
# step's products) two parts gained at most 0.75 us of ~6.5 (x @ w.T lost 2.4), while the timed
# route's checks and the timing cost ~3.5 us a product (gemm 10.2 us against 6.5 whole).
# Only with TAPELAB_NATIVE_POOL=1 (``switch.native``).
OWN_PARALLEL_MIN = 1 << 19
_BLAS_DTYPES = frozenset(map(np.dtype, ("float32", "float64", "complex64", "complex128")))
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_MKL_DTYPES = frozenset(map(np.dtype, ("float32", "float64")))
# From this many multiply-adds a float product takes MKL's GEMM where it is loaded (``blas.py``). Below it
# the compiled call's ~1 us over numpy's costs more than MKL gains (1 thread, Xeon with AVX-512: 8x128x512
# 9.9 us against numpy's 8.8, 16x64x64 3.8 against 2.3; 20x200x800 49 against 69, 64x784x512 311 against
# 471; bench/README.md, issue 17, session 25).
MKL_MIN = 1 << 20
# The own GEMM's smallest product (2026-12-02, 1 thread, OPENBLAS_CORETYPE=Haswell, medians of
# alternating rounds): a one-row product is OpenBLAS's matrix-vector kernel (1x200x800: 8 us
# against 16); fewer than 32 columns or 16 terms leave the 32-column micro-kernel mostly padding
# (700x200x10 0.92x, 700x10x200 0.86x numpy's speed); from 8x64x64 (1.45x) up it wins.
OWN_MIN_ROWS, OWN_MIN_K, OWN_MIN_COLS = 2, 16, 32


def coo_product(xp, a, b):
    """A 2-d sparse COO ``a`` @ dense ``b``: float32 matrices on cpu by ``sparse_rows.product`` (the entries
    in stored order, one fused multiply-add each: PyTorch's floats), else the sparse array's own product."""
    if a.ndim == 2 and not a.dense_dim and getattr(b, "ndim", 0) == 2 and use(xp, a.values, b):
        return loops("sparse_rows").product(a.indices, a.values, a.shape[0], b)
    return a @ b


def gemm(xp, a, b, out=None):
    """``xp.matmul(a, b, out=out)``, in blocks over the intra-op threads when it is large enough."""
    if out is None and type(a) is COOArray:
        return coo_product(xp, a, b)
    if type(a) is np.ndarray and type(b) is np.ndarray and xp is np:
        if a.shape[-1] == 1 and _one_term(a, b):
            return np.multiply(a, b, out=out)
        if out is None:
            res = _small(a, b)
            if res is not None:
                return res
    if (xp is not np or type(a) is not np.ndarray or type(b) is not np.ndarray      # cupy, a sparse COO operand
            or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype not in _BLAS_DTYPES):
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if (a.ndim == b.ndim == 2 and (m < OWN_MIN_ROWS or k < OWN_MIN_K or n < OWN_MIN_COLS)
            and m * k * n < GEMM_PARALLEL_MIN):
        # too small for our GEMM and for the pool: numpy's, without the ~1 us of choosing (a small Linear)
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    n_threads = runtime.intra_op_threads()
    if n_threads < 2 or k != b.shape[-2]:
        return _matmul(a, b, out)
    mkl_takes = _mkl_takes(a, b)
    if mkl_takes and _mkl_team(n_threads) > 1:     # one call on MKL's OpenMP threads (mkl.py)
        if out is None and a.ndim == b.ndim == 2:  # a linear's products: straight to the call
            res = blas.matmul(a, b, n_threads)
            if res is not None:
                return res
        return _matmul(a, b, out, n_threads)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.ndim > 2 or b.ndim > 2 else ()
    macs = math.prod(batch) * m * n * k
    if macs >= OWN_PARALLEL_MIN and native() and not mkl_takes:
        done = _own_parallel(a, b, out, n_threads, macs)   # our GEMM's parts on numba's threads
        if done is not None:
            return done
    if macs < GEMM_PARALLEL_MIN:
        return _matmul(a, b, out)
    if out is None:
        out = np.empty(batch + (m, n), a.dtype)
    # run whole, the same blocks go one after another: a product's rounding then does not depend
    # on which way the pool chose (a whole BLAS call rounds differently from its blocks)
    pool.run_blocks(_matmul_into, _blocks(a, b, out, batch, n_threads), ("gemm", n_threads), macs)
    return out


def product_out(xp, a, b, shape: tuple):
    """An uninitialised array of ``shape`` for ``a @ b``'s product (``gemm_add``'s ``out``): 64-byte aligned
    where MKL runs the product on its threads (``blas.empty``: MKL rounds by its output's alignment there)."""
    if xp is np and _mkl_takes(a, b):
        return blas.empty(shape, a.dtype, _mkl_team(runtime.intra_op_threads()))
    return xp.empty(shape, a.dtype)


def gemm_add(xp, a, b, out):
    """``out += a @ b`` for 2-D operands, ``out`` the product's shape (``addmm`` with beta 1: a
    bias broadcast into ``out`` first): one GEMM with beta 1 where MKL takes the product (PyTorch's
    floats: its ``addmm`` adds ``out`` inside the GEMM), in row or column blocks over the threads as
    ``gemm`` cuts them; else the product, then the add."""
    if (xp is np and type(out) is np.ndarray and type(a) is np.ndarray and type(b) is np.ndarray
            and a.ndim == b.ndim == 2 and _mkl_takes(a, b)):
        team = _one_call_team(a, b)
        if team is not None:
            if blas.matmul_into(a, b, out, accumulate=True, threads=team):
                return out
        else:
            n_threads = runtime.intra_op_threads()
            pool.run_blocks(_add_into, _blocks(a, b, out, (), n_threads), ("gemm_add", n_threads), a.size * b.shape[1])
            return out
    out += gemm(xp, a, b)
    return out


def gemm_bias(xp, a, b, bias, parts: int):
    """``bias + a @ b`` (each row) as one compiled call (``blas.linear``: the bias's rows filled in
    ``parts`` blocks, then MKL's GEMM with beta 1) where ``gemm_add`` would run the product as one MKL
    call, so the same floats as ``product_out``, the fill and ``gemm_add``; where ``_small`` runs it,
    the product, then the bias added to it: ``gemm_add``'s sums there (``p + b`` is ``b + p``) without
    the fill's pass and the temporary; else None."""
    if (xp is np and type(a) is np.ndarray and type(b) is np.ndarray and type(bias) is np.ndarray
            and bias.dtype is _F32):
        res = _small(a, b)
        if res is not None:
            res += bias
            return res
    if (xp is np and type(a) is np.ndarray and type(b) is np.ndarray and type(bias) is np.ndarray
            and a.ndim == b.ndim == 2 and a.dtype == _F32 and _mkl_takes(a, b)):
        team = _one_call_team(a, b)
        if team is not None:
            return blas.linear(a, b, bias, team, parts)
    return None


def _one_call_team(a, b):
    """MKL's thread team for the 2-D product ``a @ b`` (MKL takes it) where ``gemm_add`` runs it as one call
    (on MKL's threads, at one thread, or below ``GEMM_PARALLEL_MIN``), else None (cut into row or column
    blocks over the threads): ``gemm_add``'s and ``gemm_bias``'s one rule."""
    n_threads = runtime.intra_op_threads()
    team = _mkl_team(n_threads)
    return team if team > 1 or n_threads < 2 or a.size * b.shape[1] < GEMM_PARALLEL_MIN else None


def _add_into(a, b, out) -> None:
    """One block of ``gemm_add``."""
    if not blas.matmul_into(a, b, out, accumulate=True):
        out += _matmul(a, b)


def _own_parallel(a, b, out, n_threads: int, macs: int):
    """``a @ b`` by our GEMM, where our GEMM takes the product: cut into ``n_threads`` parts on
    numba's threads (``sgemm.parallel_parts``) or one call on the calling thread, whichever has
    measured faster for the size class (``pool.timed``, key ``("own", n_threads)``); else None.
    The same floats either way."""
    if _takes(a, b) and (out is None or _writable(out, a, b, b.shape[1])):
        own = _sgemm(a.shape[0], a.shape[1], b.shape[1])
        if own is not None and own.parallel_parts(n_threads) > 1:
            out = np.empty((a.shape[0], b.shape[1]), _F32) if out is None else out
            return pool.timed(("own", n_threads), macs, lambda: own.matmul_into(a, b, out, n_threads),
                              lambda: own.matmul_into(a, b, out))
    elif _takes_stack(a, b) and (out is None or _fills(out, a, b)):
        own = _sgemm(a.shape[-2], a.shape[-1], b.shape[-1])
        if own is not None and own.parallel_parts(n_threads) > 1:
            out = np.empty(a.shape[:-1] + b.shape[-1:], _F32) if out is None else out
            return pool.timed(("own", n_threads), macs, lambda: own.matmul_batch_into(a, b, out, n_threads),
                              lambda: own.matmul_batch_into(a, b, out))
    return None


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
    if (min(macs) < GEMM_PARALLEL_MIN or _mkl_team(n_threads) > 1 and all(_mkl_takes(a, b) for a, b in products)
            or native() and all(_takes(a, b) and _sgemm(a.shape[0], a.shape[1], b.shape[1]) is not None
                                and loops("sgemm").parallel_parts(n_threads) > 1 for a, b in products)):
        return [gemm(xp, a, b) for a, b in products]   # each one cut into parts on numba's threads
    outs = [np.empty((a.shape[0], b.shape[1]), a.dtype) for a, b in products]
    side_by_side = [(a, b, out) for (a, b), out in zip(products, outs)]
    pool.run_blocks(_products, [(block,) for block in side_by_side[:n_threads - 1]]
                    + [tuple(side_by_side[n_threads - 1:])], ("gemms", n_threads, len(products)), sum(macs))
    return outs


def attention(xp, q, k, v, scale: float, causal: bool, out):
    """``softmax(q kᵀ scale) v`` into ``out`` as one region of heads (``blas.attention_into``) where
    ``gemm`` would run both products on MKL as stacks of single-threaded calls: the same floats as
    ``gemm``, the softmax between; returns the weights, or None (nothing written)."""
    if xp is not np or not all(type(x) is np.ndarray for x in (q, k, v, out)) or q.ndim < 3:
        return None
    n_threads = runtime.intra_op_threads()
    team = _mkl_team(n_threads)
    kt = np.swapaxes(k, -1, -2)
    if ((n_threads > 1 and team < n_threads) or not _mkl_takes(q, kt)
            or math.prod(q.shape[:-1]) * k.shape[-2] * v.shape[-1] < MKL_MIN):
        return None
    return blas.attention_into(q, k, v, scale, causal, out, team)


def attention_grad(xp, g, q, k, v, p, dq, dk, dv):
    """Attention's backward from the weights ``p`` into ``dq``, ``dk`` (both unscaled) and ``dv`` as one
    region of heads (``blas.attention_grad_into``) where ``attention`` would take the forward: the floats
    of ``gemm``'s products and the softmax's backward between; returns the score gradient, or None."""
    if xp is not np or not all(type(x) is np.ndarray for x in (g, q, k, v, p, dq, dk, dv)) or q.ndim < 3:
        return None
    n_threads = runtime.intra_op_threads()
    team = _mkl_team(n_threads)
    if ((n_threads > 1 and team < n_threads) or not blas.available()
            or min(p.size * x.shape[-1] for x in (q, v)) < MKL_MIN):
        return None
    return blas.attention_grad_into(g, q, k, v, p, dq, dk, dv, team)


def gemm_here(xp, a, b, out=None):
    """``a @ b`` as one call from the calling thread (a recurrence step's product, too small for
    the pool): our own GEMM where ``gemm`` would take it, ``b`` as ``prepack`` left it, in parts
    on numba's threads above ``OWN_PARALLEL_MIN`` multiply-adds (an LSTM LM step's 20x200x800:
    60 -> 32 us on two threads)."""
    if type(b) is _Packed:
        own = _sgemm(a.shape[0]) if _takes(a, b.array) and (out is None or _writable(out, a, b.array, b.n)) else None
        if own is not None:
            out = np.empty((a.shape[0], b.n), _F32) if out is None else out
            macs = a.shape[0] * a.shape[1] * b.n
            parts = own.parallel_parts(runtime.intra_op_threads()) if macs >= OWN_PARALLEL_MIN and native() else 1
            if parts > 1:
                return pool.timed(("own", parts), macs, lambda: own.matmul_into(a, b.array, out, parts),
                                  lambda: own.matmul_into(a, b.array, out))
            return own.matmul_into(a, b.array, out)
        b = b.array[:, :b.n]
    if xp is not np or type(a) is not np.ndarray or type(b) is not np.ndarray:
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    return _matmul(a, b, out)


def loop_gemm(rows: int, k: int, n: int) -> tuple:
    """How a compiled loop runs its float32 ``(rows, k) @ (k, n)`` products (``rnn.py``'s layer loops, a
    recurrence's step products): ``(address, local, threads)`` of MKL's GEMM where it takes them, on its
    threads as ``gemm`` would run them (20x200x800 on an AVX-512 Xeon: 43 us on one thread, 27 on two, our
    GEMM 51 and 37), else ``(0, 0, 1)``: our GEMM on ``prepack``'s padded weight, also where MKL does not
    run its AVX-512 code (``mkl.avx512``; an AMD EPYC: ours 57 us against 74 at 20 rows, 29 against 48
    at 10, one thread)."""
    if rows * k * n < MKL_MIN or not blas.available() or not mkl.avx512():
        return 0, 0, 1
    return (*blas.addresses(_F32), _mkl_team(runtime.intra_op_threads()))


class _Packed:
    """A weight for many ``gemm_here`` products: its columns padded to the kernel's panel width."""
    __slots__ = ("array", "n")

    def __init__(self, array, n: int):
        self.array, self.n = array, n


def prepack(xp, b):
    """``b (K, N)`` readied for many ``gemm_here(xp, a, b)`` (a recurrence's weight): padded once
    to whole 32-column panels when our GEMM takes its products, so no product copies its edge;
    else ``b`` itself."""
    if (xp is np and type(b) is np.ndarray and b.ndim == 2 and b.dtype == _F32 and b.shape[0] >= OWN_MIN_K
            and b.shape[1] >= OWN_MIN_COLS and _sgemm(OWN_MIN_ROWS) is not None):
        return _Packed(_sgemm(OWN_MIN_ROWS).pad_columns(b), b.shape[1])
    return b


def _sgemm(rows: int, k: int = 0, n: int = 0):
    """The own GEMM's module while the loops are on (numba installed) and it is the faster one on
    this machine for products of ``rows`` output rows (``sgemm.MAX_ROWS``), or for one of ``k``
    terms and ``n`` columns (``sgemm.MAX_ROWS_LONG``), else None."""
    if not enabled():
        return None
    module = loops("sgemm")
    if rows <= module.MAX_ROWS or (rows <= module.MAX_ROWS_LONG and k >= module.LONG_MIN_K and n >= module.LONG_MIN_N):
        return module
    return None


def _one_term(a, b) -> bool:
    """Whether ``a @ b`` is an outer product of float matrices (``k == 1``: a linear's weight gradient at
    batch 1), which the broadcast ``a * b`` gives as PyTorch's GEMM does, each number its one product,
    the sign of a zero included (MKL's call took 1.4 ms at 128 x 9216 where ``multiply`` takes 0.12). A
    row or column result is PyTorch's vector product, which sums from +0.0: left to ``matmul``."""
    return (a.ndim == b.ndim == 2 and a.shape[1] == b.shape[0] == 1 and a.shape[0] > 1 and b.shape[1] > 1
            and a.dtype is b.dtype and (a.dtype is _F32 or a.dtype is _F64))


def _small(a, b):
    """The 2-D float32 ``a @ b`` under ``MKL_MIN`` by the GEMM ``gemm`` would pick for it on the calling
    thread (numpy's, or ours where it takes the product and no parts are timed for it), chosen in one look
    at the shapes: the general route's checks cost ~3 us a product, and a GRU step runs ~150 products of
    32 x 128 x 64. None where the general route decides (another dtype, a larger product, parts)."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype is not _F32 or b.dtype is not _F32:
        return None
    m, k = a.shape
    n = b.shape[1]
    macs = m * k * n
    if k != b.shape[0] or macs >= MKL_MIN:
        return None
    own = _sgemm(m, k, n) if m >= OWN_MIN_ROWS and k >= OWN_MIN_K and n >= OWN_MIN_COLS else None
    if own is None:
        return np.matmul(a, b)
    if macs >= OWN_PARALLEL_MIN and runtime.intra_op_threads() > 1 and native():
        return None
    return own.matmul_into(a, b, np.empty((m, n), _F32))


def _takes(a, b) -> bool:
    """Whether our GEMM takes ``a @ b`` by shape and dtype (``OWN_MIN_*``)."""
    return (a.ndim == b.ndim == 2 and a.dtype == b.dtype == _F32 and a.shape[1] == b.shape[0]
            and a.shape[0] >= OWN_MIN_ROWS and a.shape[1] >= OWN_MIN_K and b.shape[1] >= OWN_MIN_COLS)


def _matmul(a, b, out=None, threads: int = 1):
    """``np.matmul(a, b, out=out)``: by MKL's GEMM where it is loaded (``blas.py``: PyTorch's floats;
    on ``threads`` of MKL's threads), else by our own GEMM where it takes the product (2-D, or stacks
    of one batch shape: attention's per-head products)."""
    if a.shape[-1] == 1 and _one_term(a, b):
        return np.multiply(a, b, out=out)
    if _mkl_takes(a, b):
        if out is None:
            res = blas.matmul(a, b, threads)
            if res is not None:
                return res
        elif blas.matmul_into(a, b, out, threads=threads):
            return out
    if _takes(a, b) and (out is None or _writable(out, a, b, b.shape[1])):
        own = _sgemm(a.shape[0], a.shape[1], b.shape[1])
        if own is not None:
            return own.matmul_into(a, b, np.empty((a.shape[0], b.shape[1]), _F32) if out is None else out)
    elif _takes_stack(a, b) and (out is None or _fills(out, a, b)):
        own = _sgemm(a.shape[-2], a.shape[-1], b.shape[-1])
        if own is not None:
            return own.matmul_batch_into(a, b, np.empty(a.shape[:-1] + b.shape[-1:], _F32) if out is None else out)
    return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)


def _mkl_takes(a, b) -> bool:
    """Whether ``_matmul`` hands ``a @ b`` to MKL first (dtype, size, MKL loaded): then no other route
    (our GEMM's parts) takes it, so the floats do not depend on the thread count."""
    return a.dtype in _MKL_DTYPES and a.size * b.shape[-1] >= MKL_MIN and blas.available()


def _mkl_team(n_threads: int) -> int:
    """How many of MKL's threads one call from here runs on: the ``n_threads`` intra-op threads where
    MKL runs on OpenMP and the calling thread is not already one of a split's (``pool.in_block``: MKL
    would start a second team of threads beside the pool's), else 1."""
    return n_threads if n_threads > 1 and mkl.threaded() and not pool.in_block() else 1


def _takes_stack(a, b) -> bool:
    """Whether our GEMM takes the stacked product ``a @ b``: one batch shape, no broadcasting,
    each matrix product as ``_takes`` says."""
    return (a.ndim == b.ndim > 2 and a.shape[:-2] == b.shape[:-2] and a.dtype == b.dtype == _F32
            and a.shape[-1] == b.shape[-2] and a.shape[-2] >= OWN_MIN_ROWS and a.shape[-1] >= OWN_MIN_K
            and b.shape[-1] >= OWN_MIN_COLS)


def _fills(out, a, b) -> bool:
    """Whether the stacked product can be written into ``out`` as it goes: C-contiguous float32
    of the product's shape, sharing no memory with the operands."""
    return (type(out) is np.ndarray and out.dtype == _F32 and out.shape == a.shape[:-1] + b.shape[-1:]
            and out.flags.c_contiguous and out.flags.writeable
            and not np.may_share_memory(out, a) and not np.may_share_memory(out, b))


def _writable(out, a, b, n: int) -> bool:
    """Whether the kernel can write ``a @ b`` into ``out`` as it goes: float32 ``(M, n)``, unit
    column stride, sharing no memory with the operands (``np.matmul`` buffers that case)."""
    return (type(out) is np.ndarray and out.dtype == _F32 and out.shape == (a.shape[0], n) and out.strides[1] == 4
            and out.strides[0] % 4 == 0 and out.strides[0] >= 0 and out.flags.aligned and out.flags.writeable
            and not np.may_share_memory(out, a) and not np.may_share_memory(out, b))


def _products(*triples) -> None:
    """Each ``(a, b, out)`` in turn, one call each: one thread's share of ``gemms``."""
    for a, b, out in triples:
        _matmul(a, b, out)


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
    _matmul(a, b, out)


def _lead(x, batch_ndim: int, lo: int, hi: int):
    """Rows ``lo:hi`` of the broadcast batch's first axis, as ``x`` holds it: whole when ``x``
    lacks that axis or broadcasts along it."""
    if x.ndim - 2 < batch_ndim or x.shape[0] == 1:
        return x
    return x[lo:hi]
