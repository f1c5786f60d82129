"""float32/float64 matrix products through MKL's GEMM (``mkl.py``), the one PyTorch's cpu ``mm``,
``addmm``, ``bmm`` and ``linear`` call: with the ``[mkl]`` extra a product gives PyTorch's floats bit for
bit (numpy's OpenBLAS rounds differently) at PyTorch's speed (1.05-1.8x numpy's OpenBLAS on one thread on
an AVX-512 Xeon; bench/README.md, issue 17, session 25).

``matmul_into(a, b, out)`` lays a 2-D product, or a stack of them with one batch shape (or a stack
times one matrix), out for CBLAS: an operand with unit column stride is passed as it is, one with unit
row stride as its transpose, anything else copied once; the output is written in place when its rows
are unit-stride, else through a buffer. It returns False where MKL is not loaded or the product is not
of that kind (then the caller runs its own route)."""
from __future__ import annotations

import math

import numpy as np

from . import mkl
from .switch import enabled, loops

__all__ = ["available", "set_enabled", "matmul", "matmul_into", "linear", "attention_into", "attention_grad_into", "addresses", "empty"]

_NO_TRANS, _TRANS = 111, 112
_LD_LIMIT = 1 << 31   # MKL_INT (LP64) holds a leading dimension below this; a wider stride is copied
_KINDS = {np.dtype(np.float32): ("cblas_sgemm", "sgemm", "sgemm_stack", "sgemm_stack_parts"),
          np.dtype(np.float64): ("cblas_dgemm", "dgemm", "dgemm_stack", "dgemm_stack_parts")}
# dtype -> (address, 2-D call, stack call, address of MKL's thread-local setting, stack call in parts)
_READY: dict = {}
_ON = [True]


def available() -> bool:
    """Whether products run on MKL's GEMM (the ``[mkl]`` extra and numba installed, loops on,
    ``TAPELAB_MKL`` not 0, not turned off by ``set_enabled``)."""
    return _ON[0] and enabled() and mkl.library() is not None


def set_enabled(flag: bool) -> bool:
    """Turn MKL's GEMM on or off for this process (A/B timing, the tests of the other routes);
    returns the old setting. On does nothing where MKL is not loaded."""
    old = _ON[0]
    _ON[0] = bool(flag)
    return old


def _calls(dtype):
    ready = _READY.get(dtype)
    if ready is None:
        symbol, two_d, stack, parts = _KINDS[dtype]
        module = loops("blas_call")
        ready = _READY[dtype] = (mkl.address(symbol), getattr(module, two_d), getattr(module, stack),
                                 mkl.address("MKL_Set_Num_Threads_Local"), getattr(module, parts))
    return ready


def addresses(dtype) -> tuple:
    """``(cblas_?gemm, mkl_set_num_threads_local)``'s addresses for ``dtype``, for compiled loops that call
    MKL's GEMM themselves (``blas_call.sgemm`` from ``rnn.py``'s layer loops)."""
    ready = _calls(dtype)
    return ready[0], ready[3]


def _operand(x, rows: int, cols: int, item: int):
    """``(x or a copy, CBLAS transpose flag, leading dimension)`` for the (rows, cols) matrix ``x``."""
    if x.flags.c_contiguous:
        return x, _NO_TRANS, max(cols, 1)
    s0, s1 = x.strides[-2:]
    if (s1 == item or cols == 1) and s0 % item == 0 and max(cols, 1) * item <= s0 < _LD_LIMIT * item:
        return x, _NO_TRANS, s0 // item
    if (s0 == item or rows == 1) and s1 % item == 0 and max(rows, 1) * item <= s1 < _LD_LIMIT * item:
        return x, _TRANS, s1 // item
    x = np.ascontiguousarray(x)
    return x, _NO_TRANS, max(cols, 1)


def matmul(a, b, threads: int = 1):
    """``a @ b`` as a new C-contiguous array on MKL's GEMM, or None where ``matmul_into`` would not take
    it (the caller has checked ``available()``). ``threads`` as ``matmul_into``'s."""
    dtype = a.dtype
    if a.ndim == b.ndim == 2:   # the common case without the checks a given output needs
        ready = _READY.get(dtype) or (dtype in _KINDS and _calls(dtype))
        if not ready or b.dtype != dtype:
            return None
        (m, k), n = a.shape, b.shape[1]
        if not _sizes_fit(m, n, k):
            return None
        item = dtype.itemsize
        a, ta, lda = _operand(a, m, k, item)
        b, tb, ldb = _operand(b, k, n, item)
        out = empty((m, n), dtype, threads)
        ready[1](ready[0], ta, tb, m, n, k, a, lda, b, ldb, 0.0, out, n, ready[3], threads)
        return out
    if b.ndim == 2 or a.ndim == b.ndim and a.shape[:-2] == b.shape[:-2]:
        out = empty(a.shape[:-1] + b.shape[-1:], dtype, threads)
        if matmul_into(a, b, out, threads=threads):
            return out
    return None


def matmul_into(a, b, out, accumulate: bool = False, threads: int = 1) -> bool:
    """``out[...] = a @ b`` (``out += a @ b`` when ``accumulate``: one GEMM with beta 1, the rounding
    of PyTorch's ``addmm``) on MKL's GEMM, True; False (nothing written) where it does not take the
    product: other dtypes, batch shapes that broadcast, empty products (the caller has checked
    ``available()``). ``threads`` above 1 runs each GEMM on that many of MKL's threads (where
    ``mkl.threaded()``; MKL then decides how many it uses)."""
    dtype = a.dtype
    if dtype not in _KINDS or b.dtype != dtype or out.dtype != dtype or a.ndim < 2 or b.ndim < 2:
        return False
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if not _sizes_fit(m, n, k):
        return False
    beta = 1.0 if accumulate else 0.0
    if a.ndim == b.ndim == 2:
        return _two_d(dtype, a, b, out, m, n, k, beta, threads)
    if b.ndim == 2 and a.ndim > 2 and out.flags.c_contiguous:
        # a stack times one matrix: one product of the stacked rows (a copy where they do not fold)
        rows = a.reshape(-1, k)
        return _two_d(dtype, rows, b, out.reshape(-1, n), rows.shape[0], n, k, beta, threads)
    if a.ndim == b.ndim > 2 and a.shape[:-2] == b.shape[:-2]:
        return _stack(dtype, a, b, out, m, n, k, beta, threads)
    return False


def _sizes_fit(m: int, n: int, k: int) -> bool:
    """A product MKL takes: no empty dimension, each one an MKL_INT."""
    return 0 < min(m, n, k) and max(m, n, k) < _LD_LIMIT


def _rows_fit(c, n: int, item: int) -> bool:
    """Whether MKL writes the (..., rows, n) output ``c`` in place: unit column stride, a row stride
    of whole elements, at least ``n`` and an MKL_INT."""
    return (c.strides[-1] == item or n == 1) and c.strides[-2] % item == 0 and n * item <= c.strides[-2] < _LD_LIMIT * item


# MKL's threaded GEMM rounds by its output's alignment: a 1x512x4096 product at two threads gave 14-16 of
# 4096 outputs different in a 16-byte-aligned output than in a 64-byte-aligned one, so a training step's
# floats changed from call to call with wherever glibc put the result (issue 18, session 28). PyTorch's
# allocator aligns to 64 bytes: outputs made here are 64-byte aligned, and a threaded product into a
# caller's output that is not goes through an aligned buffer. Inputs' alignment did not matter.
_ALIGN = 64


def empty(shape: tuple, dtype, threads: int) -> np.ndarray:
    """A new C-contiguous array for a product MKL runs on ``threads`` of its threads: from two, its first
    element ``_ALIGN``-byte aligned (its memory ``_ALIGN`` bytes more than the array's); for one, ``np.empty``'s,
    so memory profiles count its bytes as PyTorch's."""
    if threads < 2:
        return np.empty(shape, dtype)
    dtype = np.dtype(dtype)
    raw = np.empty(math.prod(shape) * dtype.itemsize + _ALIGN, np.uint8)
    # compiled: ``raw.ctypes`` cost 0.8 us, this 0.2; the array made over ``raw`` in one call (not a slice's
    # view reshaped: 1.18 -> 0.97 us), ``raw`` its base as before
    return np.ndarray(shape, dtype, raw, loops("blas_call").aligned_start(raw, _ALIGN))


def _in_parts(name: str, args: tuple, parts: int) -> None:
    """``blas_call.<name>(*args, parts)``, a region of ``parts`` at once, or its one-part loop
    ``<name>_whole(*args)``: calling a ``parallel=True`` function starts numba's threads even where its
    ``prange`` does not run, and at one thread nothing may start them."""
    calls = loops("blas_call")
    if parts > 1:
        getattr(calls, name)(*args, parts)
    else:
        getattr(calls, name + "_whole")(*args)


def linear(a, b, bias, threads: int, parts: int):
    """``bias + a @ b`` as ATen's ``addmm`` makes it for float32 2-D operands: a new C-contiguous array
    (aligned as ``empty`` makes it for ``threads``), every row set to ``bias`` in ``parts`` blocks at
    once, then one GEMM with beta 1 on ``threads`` of MKL's threads, all in one compiled call
    (``blas_call.sgemm_bias``): the floats of ``matmul_into(..., accumulate=True)`` over the filled
    output. None where ``matmul_into`` would not take it so (the caller has checked ``available()``)."""
    f32 = np.dtype(np.float32)
    (m, k), n = a.shape, b.shape[1]
    if (a.dtype != f32 or b.dtype != f32 or bias.dtype != f32 or bias.shape != (n,)
            or not bias.flags.c_contiguous or not _sizes_fit(m, n, k)):
        return None
    address, _, _, local, _ = _READY.get(f32) or _calls(f32)
    a, ta, lda = _operand(a, m, k, 4)
    b, tb, ldb = _operand(b, k, n, 4)
    out = empty((m, n), f32, threads)
    _in_parts("sgemm_bias", (address, ta, tb, m, n, k, a, lda, b, ldb, bias, out, local, threads), parts)
    return out


def _two_d(dtype, a, b, out, m, n, k, beta: float, threads: int) -> bool:
    item = dtype.itemsize
    address, call, _, local, _ = _READY.get(dtype) or _calls(dtype)
    a, ta, lda = _operand(a, m, k, item)
    b, tb, ldb = _operand(b, k, n, item)
    if (_rows_fit(out, n, item) and not np.may_share_memory(out, a) and not np.may_share_memory(out, b)
            and (threads < 2 or out.ctypes.data % _ALIGN == 0)):
        call(address, ta, tb, m, n, k, a, lda, b, ldb, beta, out, out.strides[0] // item, local, threads)
    else:
        res = empty((m, n), dtype, threads)
        if beta:
            res[...] = out
        call(address, ta, tb, m, n, k, a, lda, b, ldb, beta, res, n, local, threads)
        out[...] = res
    return True


def _stack(dtype, a, b, out, m, n, k, beta: float, threads: int) -> bool:
    """Products of one batch shape: one compiled loop over the batch, the batch dims grouped into at
    most two axes that every operand steps through by strides (``_batch_axes``: attention's heads cut
    from one projection need two), an input copied only where its dims do not group so (False where
    the output's do not). With ``threads`` above 1 and a product for each, the batch is cut over the
    threads (``blas_call``'s ``_parts`` calls), each product on one thread, as at one thread: MKL's
    threads on one of attention's 64x32x64 products left the second CPU idle."""
    item = dtype.itemsize
    if (not out.flags.writeable or np.may_share_memory(out, a) or np.may_share_memory(out, b)
            or not _rows_fit(out, n, item)):
        return False
    a, ta, lda = _operand(a, m, k, item)
    b, tb, ldb = _operand(b, k, n, item)
    axes = _batch_axes(out.shape[:-2], (a, b, out), item)
    if axes is None:
        if _batch_axes(out.shape[:-2], (out,), item) is None:
            return False
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)     # the inputs' batch dims do not group
        a, ta, lda = _operand(a, m, k, item)
        b, tb, ldb = _operand(b, k, n, item)
        axes = _batch_axes(out.shape[:-2], (a, b, out), item)
    count, inner, ((sa, sa1), (sb, sb1), (sc, sc1)) = axes
    if count == 1:      # one product (its batch dims all of length one): a matrix's, as to its output's alignment
        return _two_d(dtype, a.reshape(m, k), b.reshape(k, n), out.reshape(m, n), m, n, k, beta, threads)
    address, _, call, local, in_parts = _READY.get(dtype) or _calls(dtype)
    parts = min(threads, count)
    ldc = out.strides[-2] // item
    if parts > 1 and loops("regions").parts(parts) > 1:
        in_parts(address, ta, tb, m, n, k, a, lda, sa, sa1, b, ldb, sb, sb1, beta, out, ldc, sc, sc1, count, inner,
                 parts)
        return True
    call(address, ta, tb, m, n, k, a, lda, sa, sa1, b, ldb, sb, sb1, beta, out, ldc, sc, sc1, count, inner,
         local, threads)
    return True


def attention_into(q, k, v, scale: float, causal: bool, out, threads: int):
    """Attention's forward ``softmax(q kᵀ scale) v`` (``causal``: query ``i`` sees keys ``<= i``) into
    ``out``, float32 operands of one batch shape, as one region (``blas_call.sgemm_attention``): each
    head's scores, softmax and ``p v`` on one thread, ``threads`` heads at once. The weights ``p``
    (a new C-contiguous array) are returned; None where the two products would not run as
    ``matmul_into``'s stacks of single-threaded calls (then nothing is written)."""
    f32 = np.dtype(np.float32)
    batch, (L, D), (S, dv) = q.shape[:-2], q.shape[-2:], v.shape[-2:]
    if (not q.dtype == k.dtype == v.dtype == out.dtype == f32 or len(batch) == 0
            or not batch == k.shape[:-2] == v.shape[:-2] == out.shape[:-2] or k.shape[-2:] != (S, D)
            or out.shape[-2:] != (L, dv) or not _sizes_fit(L, S, D) or not _sizes_fit(L, dv, S)
            or not out.flags.writeable or not _rows_fit(out, dv, 4)
            or any(np.may_share_memory(out, x) for x in (q, k, v))):
        return None
    count = math.prod(batch)
    parts = min(threads, count)
    if threads > 1 and (parts < threads or loops("regions").parts(parts) < parts):
        return None     # matmul_into would run a product on several of MKL's threads
    q, tq, lq = _operand(q, L, D, 4)
    kt, tk, lk = _operand(np.swapaxes(k, -1, -2), D, S, 4)
    v, tv, lv = _operand(v, S, dv, 4)
    p = empty(batch + (L, S), f32, threads)
    qk, pv = _batch_axes(batch, (q, kt, p), 4), _batch_axes(batch, (p, v, out), 4)
    if qk is None or pv is None:
        return None
    _, inner_qk, ((sq, sq1), (sk, sk1), _) = qk
    _, inner_pv, (_, (sv, sv1), (so, so1)) = pv
    args = (_calls(f32)[0], tq, tk, L, S, D, q, lq, sq, sq1, kt, lk, sk, sk1, inner_qk, np.float32(scale), causal,
            p.reshape(-1, S), tv, dv, v, lv, sv, sv1, out, out.strides[-2] // 4, so, so1, inner_pv, count)
    _in_parts("sgemm_attention", args, parts)
    return p


def attention_grad_into(g, q, k, v, p, dq, dk, dv, threads: int):
    """Attention's backward from the forward's weights ``p`` into ``dq``, ``dk``, ``dv`` (``dq``, ``dk``
    unscaled) as one region of heads (``blas_call.sgemm_attention_backward``), float32 operands of one
    batch shape: the score gradient (a new C-contiguous array) is returned; None where the products would
    not run as ``matmul_into``'s stacks of single-threaded calls (then nothing is written)."""
    f32 = np.dtype(np.float32)
    batch, (L, D), (S, d_v) = q.shape[:-2], q.shape[-2:], v.shape[-2:]
    outs = (dq, dk, dv)
    if (any(x.dtype != f32 for x in (g, q, k, v, p) + outs) or len(batch) == 0 or k.shape != batch + (S, D)
            or g.shape != batch + (L, d_v) or p.shape != batch + (L, S) or not p.flags.c_contiguous
            or (dq.shape, dk.shape, dv.shape) != (q.shape, k.shape, v.shape)
            or not _sizes_fit(L, S, max(D, d_v)) or min(D, d_v) == 0
            or not all(x.flags.writeable and _rows_fit(x, x.shape[-1], 4) for x in outs)
            or any(np.may_share_memory(o, x) for o in outs for x in (g, q, k, v, p))
            or any(np.shares_memory(a, b) for a, b in ((dq, dk), (dq, dv), (dk, dv)))):   # interleaved parts of one array
        return None
    count = math.prod(batch)
    parts = min(threads, count)
    if threads > 1 and (parts < threads or loops("regions").parts(parts) < parts):
        return None
    ops = [_operand(x, r, c, 4) for x, r, c in ((g, L, d_v), (np.swapaxes(v, -1, -2), d_v, S), (k, S, D), (q, L, D))]
    ds = empty(batch + (L, S), f32, threads)
    arrays = (p, ds, dv, dq, dk) + tuple(x for x, _, _ in ops)
    axes = _batch_axes(batch, arrays, 4)
    if axes is None:
        return None
    _, inner, strides = axes
    ptr = np.array([x.ctypes.data for x in arrays], np.intp)
    ld = np.array([S, S] + [x.strides[-2] // 4 for x in (dv, dq, dk)] + [n for _, _, n in ops], np.intp)
    tr = np.array([_TRANS, _NO_TRANS, _NO_TRANS, _NO_TRANS, _NO_TRANS] + [t for _, t, _ in ops], np.intp)
    args = (_calls(f32)[0], ptr, np.array(strides, np.intp), ld, tr, inner, L, S, D, d_v, p.reshape(-1, S),
            ds.reshape(-1, S), count)
    _in_parts("sgemm_attention_backward", args, parts)
    return ds


def _batch_axes(batch: tuple, arrays: tuple, item: int):
    """The batch dims ``batch`` of every array in ``arrays`` (each ``batch + (rows, cols)``) as at most two
    axes that each array steps through by whole-element strides: ``(count, inner, ((s, s1) per array))``,
    in elements, ``inner`` the second axis's length; None where they need more. Neighbouring dims join
    where every array's outer stride is its inner stride times the inner length; dims of length one
    drop out."""
    groups: list = []                       # [length, (stride per array)] of the joined axes, outermost first
    for d, size in enumerate(batch):
        if size == 1:
            continue
        strides = tuple(x.strides[d] for x in arrays)
        if any(s % item for s in strides):
            return None
        if groups and all(outer == s * size for outer, s in zip(groups[-1][1], strides)):
            groups[-1] = [groups[-1][0] * size, strides]
        else:
            groups.append([size, strides])
    if len(groups) > 2:
        return None
    while len(groups) < 2:
        groups.insert(0, [1, (0,) * len(arrays)])
    (outer, so), (inner, si) = groups
    return outer * inner, inner, tuple((s // item, s1 // item) for s, s1 in zip(so, si))
