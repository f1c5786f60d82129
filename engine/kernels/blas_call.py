"""Compiled calls of MKL's ``cblas_sgemm``/``cblas_dgemm`` by address (``kernels/blas.py`` finds the
addresses and lays the operands out): from Python a ctypes call cost ~5 us of argument conversion,
through one numba function well under 1. The address is an argument, so the compiled calls are cached
on disk like the other loops.

``threads`` above 1 runs the call on that many of MKL's OpenMP threads: MKL's thread-local setting
(``mkl_set_num_threads_local`` at ``local``) for the call, then back, so every other MKL call keeps one.
A stack's ``_parts`` call instead cuts its products into ``parts`` ranges run at once on numba's OpenMP
threads (libgomp's, the team MKL's threads come from), each product one single-threaded MKL call:
attention's per-head products (64x32x64) are too small for MKL to use a second thread on one."""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from .rowwise import attention_softmax, softmax_backward

__all__ = ["aligned_start", "sgemm", "sgemm_bias", "dgemm", "sgemm_stack", "dgemm_stack", "sgemm_stack_parts", "dgemm_stack_parts", "sgemm_attention",
           "sgemm_attention_backward"]

_ROW_MAJOR = 101


def _gemm_intrinsic(real: ir.Type):
    """``cblas_?gemm(RowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`` at an address,
    with ``real`` (float or double) for alpha and beta; MKL_INT is the LP64 interface's 32 bits."""
    @intrinsic
    def call(typingctx, address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        def codegen(context, builder, signature, args):
            i32, ptr = ir.IntType(32), ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [i32] * 6 + [real, ptr, i32, ptr, i32, real, ptr, i32])
            i64 = [context.cast(builder, v, t, types.int64) for v, t in zip(args, signature.args)]

            def int32(i):
                return builder.trunc(i64[i], i32)

            def pointer(i):
                return builder.inttoptr(i64[i], ptr)

            def scalar(i):
                return context.cast(builder, args[i], signature.args[i],
                                    types.float32 if real == ir.FloatType() else types.float64)
            fn = builder.inttoptr(i64[0], fnty.as_pointer())
            builder.call(fn, [ir.Constant(i32, _ROW_MAJOR), int32(1), int32(2), int32(3), int32(4), int32(5),
                              scalar(6), pointer(7), int32(8), pointer(9), int32(10), scalar(11), pointer(12),
                              int32(13)])
            return context.get_dummy_value()
        sig = types.void(address, ta, tb, m, n, k, types.float64, types.int64, lda, types.int64, ldb,
                         types.float64, types.int64, ldc)
        return sig, codegen
    return call


_sgemm_at = _gemm_intrinsic(ir.FloatType())
_dgemm_at = _gemm_intrinsic(ir.DoubleType())


@intrinsic
def _set_threads_at(typingctx, address, n):
    """``mkl_set_num_threads_local(n)`` at an address: the calling thread's setting before."""
    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(i32, [i32])
        fn = builder.inttoptr(context.cast(builder, args[0], signature.args[0], types.int64), fnty.as_pointer())
        old = builder.call(fn, [builder.trunc(context.cast(builder, args[1], signature.args[1], types.int64), i32)])
        return builder.sext(old, ir.IntType(64))
    return types.int64(address, n), codegen


@njit(cache=True, nogil=True)
def sgemm(address, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, local, threads):
    """float32 ``c = op(a) @ op(b) + beta * c`` (row-major; ``ta``/``tb`` are CBLAS's 111/112): ``a``,
    ``b`` and ``c`` are the arrays whose first element each matrix starts at."""
    old = _set_threads_at(local, threads) if threads > 1 else 0
    _sgemm_at(address, ta, tb, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, beta, c.ctypes.data, ldc)
    if threads > 1:
        _set_threads_at(local, old)


@njit(cache=True, nogil=True)
def aligned_start(raw, align):
    """How many bytes into ``raw`` its first ``align``-byte aligned address lies (``blas.empty``)."""
    return -raw.ctypes.data % align


@njit(cache=True, nogil=True)
def _fill_rows(c, row, lo, hi):
    """Rows ``lo .. hi`` of ``c`` set to ``row`` (a loop of its own: in a ``parallel=True`` function an
    array assignment becomes a parallel loop of its own)."""
    for i in range(lo, hi):
        dst = c[i]
        for j in range(row.shape[0]):
            dst[j] = row[j]


@njit(cache=True, nogil=True, parallel=True)
def sgemm_bias(address, ta, tb, m, n, k, a, lda, b, ldb, bias, c, local, threads, parts):
    """Linear's forward as ATen's ``addmm`` runs it, in one call: every row of the C-contiguous
    ``c (m, n)`` set to ``bias (n,)`` (in ``parts`` > 1 blocks of rows at once, as ``kernels.parallel``
    cuts ``pointwise.fill_rows``), then ``c += op(a) @ op(b)`` as ``sgemm`` with beta 1: the same copy and
    the same MKL call as the two steps, without their dispatch between them. One block is
    ``sgemm_bias_whole``'s: calling a ``parallel=True`` function starts numba's threads, even where its
    ``prange`` does not run."""
    for t in prange(parts):
        _fill_rows(c, bias, m * t // parts, m * (t + 1) // parts)
    _gemm_into_bias(address, ta, tb, m, n, k, a, lda, b, ldb, c, local, threads)


@njit(cache=True, nogil=True)
def sgemm_bias_whole(address, ta, tb, m, n, k, a, lda, b, ldb, bias, c, local, threads):
    """``sgemm_bias`` with the rows filled on the calling thread."""
    _fill_rows(c, bias, 0, m)
    _gemm_into_bias(address, ta, tb, m, n, k, a, lda, b, ldb, c, local, threads)


@njit(cache=True, nogil=True)
def _gemm_into_bias(address, ta, tb, m, n, k, a, lda, b, ldb, c, local, threads):
    old = _set_threads_at(local, threads) if threads > 1 else 0
    _sgemm_at(address, ta, tb, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, 1.0, c.ctypes.data, n)
    if threads > 1:
        _set_threads_at(local, old)


@njit(cache=True, nogil=True)
def dgemm(address, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, local, threads):
    """float64 ``sgemm``."""
    old = _set_threads_at(local, threads) if threads > 1 else 0
    _dgemm_at(address, ta, tb, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, beta, c.ctypes.data, ldc)
    if threads > 1:
        _set_threads_at(local, old)


@njit(cache=True, nogil=True)
def sgemm_stack(address, ta, tb, m, n, k, a, lda, sa, sa1, b, ldb, sb, sb1, beta, c, ldc, sc, sc1, count, inner,
                local, threads):
    """``count`` float32 products over a batch of two axes, ``inner`` products along the second: the
    i-th product's matrices start ``(i // inner) * s + (i % inner) * s1`` elements (``sa``/``sa1``,
    ``sb``/``sb1``, ``sc``/``sc1``) after each operand's first element. Two axes take attention's heads
    cut from one projection, ``(batch, length, heads, dim)`` transposed, without copying them."""
    pa, pb, pc = np.intp(a.ctypes.data), np.intp(b.ctypes.data), np.intp(c.ctypes.data)
    old = _set_threads_at(local, threads) if threads > 1 else 0
    for i in range(count):
        o, r = i // inner, i % inner
        _sgemm_at(address, ta, tb, m, n, k, 1.0, pa + 4 * (o * sa + r * sa1), lda, pb + 4 * (o * sb + r * sb1), ldb,
                  beta, pc + 4 * (o * sc + r * sc1), ldc)
    if threads > 1:
        _set_threads_at(local, old)


@njit(cache=True, nogil=True)
def dgemm_stack(address, ta, tb, m, n, k, a, lda, sa, sa1, b, ldb, sb, sb1, beta, c, ldc, sc, sc1, count, inner,
                local, threads):
    """float64 ``sgemm_stack``."""
    pa, pb, pc = np.intp(a.ctypes.data), np.intp(b.ctypes.data), np.intp(c.ctypes.data)
    old = _set_threads_at(local, threads) if threads > 1 else 0
    for i in range(count):
        o, r = i // inner, i % inner
        _dgemm_at(address, ta, tb, m, n, k, 1.0, pa + 8 * (o * sa + r * sa1), lda, pb + 8 * (o * sb + r * sb1), ldb,
                  beta, pc + 8 * (o * sc + r * sc1), ldc)
    if threads > 1:
        _set_threads_at(local, old)


@njit(cache=True, nogil=True, parallel=True)
def sgemm_stack_parts(address, ta, tb, m, n, k, a, lda, sa, sa1, b, ldb, sb, sb1, beta, c, ldc, sc, sc1, count, inner,
                      parts):
    """``sgemm_stack``'s products in ``parts`` ranges at once, each product on one thread (MKL runs
    one thread inside an OpenMP region): the same floats as ``sgemm_stack`` on one thread."""
    pa, pb, pc = np.intp(a.ctypes.data), np.intp(b.ctypes.data), np.intp(c.ctypes.data)
    for t in prange(parts):
        for i in range(count * t // parts, count * (t + 1) // parts):
            o, r = i // inner, i % inner
            _sgemm_at(address, ta, tb, m, n, k, 1.0, pa + 4 * (o * sa + r * sa1), lda, pb + 4 * (o * sb + r * sb1),
                      ldb, beta, pc + 4 * (o * sc + r * sc1), ldc)


@njit(cache=True, nogil=True, parallel=True)
def dgemm_stack_parts(address, ta, tb, m, n, k, a, lda, sa, sa1, b, ldb, sb, sb1, beta, c, ldc, sc, sc1, count, inner,
                      parts):
    """float64 ``sgemm_stack_parts``."""
    pa, pb, pc = np.intp(a.ctypes.data), np.intp(b.ctypes.data), np.intp(c.ctypes.data)
    for t in prange(parts):
        for i in range(count * t // parts, count * (t + 1) // parts):
            o, r = i // inner, i % inner
            _dgemm_at(address, ta, tb, m, n, k, 1.0, pa + 8 * (o * sa + r * sa1), lda, pb + 8 * (o * sb + r * sb1),
                      ldb, beta, pc + 8 * (o * sc + r * sc1), ldc)


@njit(cache=True, nogil=True)
def _attention_heads(address, tq, tk, L, S, D, pq, lq, sq, sq1, pk, lk, sk, sk1, inner_qk, scale, causal, s, ps,
                     tv, dv, pv, lv, sv, sv1, po, lo, so, so1, inner_pv, lo_head, hi_head):
    """Heads ``lo_head .. hi_head`` of ``sgemm_attention``, in turn."""
    for i in range(lo_head, hi_head):
        o, r = i // inner_qk, i % inner_qk
        _sgemm_at(address, tq, tk, L, S, D, 1.0, pq + 4 * (o * sq + r * sq1), lq, pk + 4 * (o * sk + r * sk1), lk,
                  0.0, ps + 4 * i * L * S, S)
        attention_softmax(s[i * L:(i + 1) * L], L, scale, causal)
        o, r = i // inner_pv, i % inner_pv
        _sgemm_at(address, 111, tv, L, dv, S, 1.0, ps + 4 * i * L * S, S, pv + 4 * (o * sv + r * sv1), lv, 0.0,
                  po + 4 * (o * so + r * so1), lo)


@njit(cache=True, nogil=True, parallel=True)
def sgemm_attention(address, tq, tk, L, S, D, q, lq, sq, sq1, k, lk, sk, sk1, inner_qk, scale, causal, s,
                    tv, dv, v, lv, sv, sv1, out, lo, so, so1, inner_pv, count, parts):
    """Attention's forward over a batch of ``count`` heads, a head at a time in ``parts`` ranges at once:
    the scores ``q kᵀ`` (L x S, into ``s``'s rows ``i L ..``), their softmax in place
    (``rowwise.attention_softmax``), then ``p v`` (L x dv) into ``out``. The three passes as
    ``sgemm_stack_parts`` and the row loop make them, one single-threaded MKL call per product, so the
    same floats, with a head's scores still in its thread's cache for the softmax and ``p v``.
    Batch offsets as ``sgemm_stack``'s (two axes, ``inner_qk`` for q and k, ``inner_pv`` for v and out).
    One part is ``sgemm_attention_whole``'s (a ``parallel=True`` function starts numba's threads when
    called)."""
    pq, pk, pv, po = np.intp(q.ctypes.data), np.intp(k.ctypes.data), np.intp(v.ctypes.data), np.intp(out.ctypes.data)
    ps = np.intp(s.ctypes.data)
    for t in prange(parts):
        _attention_heads(address, tq, tk, L, S, D, pq, lq, sq, sq1, pk, lk, sk, sk1, inner_qk, scale, causal, s, ps,
                         tv, dv, pv, lv, sv, sv1, po, lo, so, so1, inner_pv, count * t // parts, count * (t + 1) // parts)


@njit(cache=True, nogil=True)
def sgemm_attention_whole(address, tq, tk, L, S, D, q, lq, sq, sq1, k, lk, sk, sk1, inner_qk, scale, causal, s,
                          tv, dv, v, lv, sv, sv1, out, lo, so, so1, inner_pv, count):
    """``sgemm_attention``'s heads in turn on the calling thread."""
    _attention_heads(address, tq, tk, L, S, D, np.intp(q.ctypes.data), lq, sq, sq1, np.intp(k.ctypes.data), lk, sk,
                     sk1, inner_qk, scale, causal, s, np.intp(s.ctypes.data), tv, dv, np.intp(v.ctypes.data), lv, sv,
                     sv1, np.intp(out.ctypes.data), lo, so, so1, inner_pv, 0, count)


@njit(cache=True, nogil=True)
def _attention_grad_heads(address, ptr, st, ld, tr, inner, L, S, D, dv, p, ds, lo_head, hi_head):
    """Heads ``lo_head .. hi_head`` of ``sgemm_attention_backward``, in turn."""
    for i in range(lo_head, hi_head):
        o, r = i // inner, i % inner
        at = np.empty(9, np.intp)
        for j in range(9):
            at[j] = ptr[j] + 4 * (o * st[j, 0] + r * st[j, 1])
        # arrays: 0 p, 1 ds, 2 dv, 3 dq, 4 dk, 5 g (L x dv), 6 vᵀ (dv x S), 7 k (S x D), 8 q (L x D)
        _sgemm_at(address, 112, tr[5], S, dv, L, 1.0, at[0], S, at[5], ld[5], 0.0, at[2], ld[2])      # dv = pᵀ g
        _sgemm_at(address, tr[5], tr[6], L, S, dv, 1.0, at[5], ld[5], at[6], ld[6], 0.0, at[1], S)    # dp = g vᵀ
        rows = ds[i * L:(i + 1) * L]
        softmax_backward(rows, p[i * L:(i + 1) * L], rows, 16)
        _sgemm_at(address, 111, tr[7], L, D, S, 1.0, at[1], S, at[7], ld[7], 0.0, at[3], ld[3])       # dq = ds k
        _sgemm_at(address, 112, tr[8], S, D, L, 1.0, at[1], S, at[8], ld[8], 0.0, at[4], ld[4])       # dk = dsᵀ q


@njit(cache=True, nogil=True, parallel=True)
def sgemm_attention_backward(address, ptr, st, ld, tr, inner, L, S, D, dv, p, ds, count, parts):
    """Attention's backward from the forward's weights ``p`` over ``count`` heads, a head at a time in
    ``parts`` ranges at once: ``dv = pᵀ g``, ``dp = g vᵀ`` (into ``ds``), the softmax's backward in place
    (``rowwise.softmax_backward``), ``dq = ds k``, ``dk = dsᵀ q`` (unscaled): the products and the row
    loop as the separate passes make them, one single-threaded MKL call each, so the same floats.
    ``ptr``, ``st`` (two batch strides), ``ld`` and ``tr`` (CBLAS's flag) per array, in elements. One
    part is ``sgemm_attention_backward_whole``'s (a ``parallel=True`` function starts numba's threads when
    called)."""
    for t in prange(parts):
        _attention_grad_heads(address, ptr, st, ld, tr, inner, L, S, D, dv, p, ds, count * t // parts,
                              count * (t + 1) // parts)


@njit(cache=True, nogil=True)
def sgemm_attention_backward_whole(address, ptr, st, ld, tr, inner, L, S, D, dv, p, ds, count):
    """``sgemm_attention_backward``'s heads in turn on the calling thread."""
    _attention_grad_heads(address, ptr, st, ld, tr, inner, L, S, D, dv, p, ds, 0, count)
