"""A float32 GEMM of our own (``kernels.gemm`` takes it for cpu float32 products where it wins).

OpenBLAS runs with ``OPENBLAS_CORETYPE=Haswell`` on the project machine and in CI: AVX2 kernels on
a CPU with AVX-512, about half the machine's float32 rate, while PyTorch's oneDNN uses AVX-512.
This GEMM's register-blocked micro-kernel is built as LLVM IR on 16-lane vectors, which LLVM
lowers to zmm FMAs with AVX-512 (without it each vector is two halves and the accumulators spill:
``MAX_ROWS`` keeps numpy's there): it holds an ``mr x 32`` block of the output in ``2 mr`` vector
accumulators while it streams K, each k one broadcast of ``a[i, k]`` per row and two fused
multiply-adds. The operands are not packed: A is read in place row-major or column-major (a
transposed view), B row-major (a transposed B, as ``x @ w.T``, is transposed once per product,
or with few rows ``x`` and the result are);
only the edge row block of A and the edge column panel of B are copied zero-padded, and an edge
output tile goes through a scratch tile. K runs in blocks of ``KC`` (the output then adds each
block's sum), the columns in groups of ``NC`` panels so a group of B stays in L2 while every row
block passes over it. Measured against OpenBLAS and torch.mm in bench/README.md (issue 17,
session 10).
Rounding: each output is ``fma(a[i, k], b[k, j], acc)`` for k ascending within a K block, the
blocks' sums added in order: the same for any split of the rows or columns over threads.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .regions import parts as parallel_parts   # how many parts a product may run in at once

__all__ = ["matmul_into", "matmul_batch_into", "pad_columns", "parallel_parts", "NR", "MAX_ROWS", "MAX_ROWS_LONG", "LONG_MIN_K", "LONG_MIN_N"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)
NR = 32                  # output columns per micro-kernel: two 16-lane vectors
KC = 256                 # K block: error as np.matmul's (512: 1.1-1.7x its error, 2-8% faster; 128: 0.6x, 5-12% slower)
NC = 16                  # panels of B per column group: 512 x 512 floats of B, 1 MiB, the L2


def _max_rows() -> float:
    """The most output rows for which this GEMM beats numpy's here (``kernels.gemm`` takes it up to
    there). With AVX-512 on the host, against OpenBLAS's Haswell kernels (AVX2;
    ``OPENBLAS_CORETYPE=Haswell``, as on the project machine and in CI) it measured 1.2-2.0x at
    every bench shape: no limit. Against OpenBLAS's own AVX-512 kernels (SkylakeX) 1.5x on the
    LSTM step's 20-row products, 1.05x at 64 rows and 0.87-0.98x from 512 rows: up to 32 rows
    (bench/README.md, session 10). Without AVX-512 LLVM splits each 16-lane vector in two and the
    accumulators no longer fit the registers; an unknown BLAS (MKL) keeps numpy's: none. Fixed
    per process, so a product's path and rounding do not vary from run to run."""
    from llvmlite import binding
    from threadpoolctl import threadpool_info
    if not binding.get_host_cpu_features().get("avx512f", False):
        return 0
    cores = {lib.get("architecture") for lib in threadpool_info() if lib.get("internal_api") == "openblas"}
    if not cores:
        return 0
    return 32 if cores & {"SkylakeX", "Cooperlake", "SapphireRapids"} else float("inf")


MAX_ROWS = _max_rows()
# Against OpenBLAS's AVX-512 kernels, a one-off product of up to 64 rows is ours where its terms
# and columns are many (2026-12-03, AMD EPYC with AVX-512, OpenBLAS SkylakeX, 1 thread, medians
# of 30: 64x784x512 1.13-1.25x, 64x512x784 1.47x, 64x96x256 1.14x, 48x256x256 1.22x, 128 rows
# 1.04x, 512 rows 0.94x), and numpy's where either is few (64x64x64 0.80x, 32x32x256 0.87x,
# 64x128x64 0.94x; attention's 64-row per-head stacks 0.72-0.82x). A recurrence's step products
# keep the plain row limit: there the whole-layer loop, not the GEMM, is the gain.
MAX_ROWS_LONG = 64 if MAX_ROWS == 32 else MAX_ROWS
LONG_MIN_K, LONG_MIN_N = 96, 128


def _micro_kernel(mr: int, a_rows: bool, nv: int = 2):
    """An intrinsic ``kern(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)``: the ``mr x 16 nv`` block
    ``c[co + r ldc + j] (+)= sum_{k < kc} A(r, k) b[bo + k ldb + j]`` (``add`` nonzero: added to
    what ``c`` holds), with ``A(r, k) = a[ao + r lda + k]`` when ``a_rows``, else
    ``a[ao + k lda + r]``; offsets count float32 elements from each array's first element."""

    @intrinsic
    def kern(typingctx, a, ao, lda, b, bo, ldb, c, co, ldc, kc, add):
        def codegen(context, builder, sig, args):
            ap, bp, cp = (context.make_array(sig.args[i])(context, builder, args[i]).data for i in (0, 3, 6))
            ao_, lda_, bo_, ldb_, co_, ldc_, kc_, add_ = (args[i] for i in (1, 2, 4, 5, 7, 8, 9, 10))
            i32, i64 = ir.IntType(32), ir.IntType(64)
            vec = ir.VectorType(ir.FloatType(), 16)
            vptr = ir.PointerType(vec)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3), "llvm.fma.v16f32")
            zero = ir.Constant(vec, [0.0] * 16)
            splat = ir.Constant(ir.VectorType(i32, 16), [0] * 16)
            accs = [cgutils.alloca_once_value(builder, zero) for _ in range(nv * mr)]
            for acc in accs:
                builder.store(zero, acc)
            a0, b0 = builder.gep(ap, [ao_]), builder.gep(bp, [bo_])
            rows = [builder.gep(a0, [builder.mul(ir.Constant(i64, r), lda_)]) for r in range(mr)] if a_rows else None
            with cgutils.for_range(builder, kc_) as loop:
                k = loop.index
                # an empty asm statement counts as a call, and LLVM does not unroll a loop with calls:
                # unrolled 3x (8-12 rows), its scheduler hoisted every broadcast and spilled accumulators
                builder.asm(ir.FunctionType(ir.VoidType(), []), "", "", [], side_effect=True)
                brow = builder.gep(b0, [builder.mul(k, ldb_)])
                bs = [builder.load(builder.bitcast(builder.gep(brow, [ir.Constant(i64, 16 * q)]), vptr), align=4)
                      for q in range(nv)]
                col = None if a_rows else builder.gep(a0, [builder.mul(k, lda_)])
                for r in range(mr):
                    s = builder.load(builder.gep(rows[r], [k]) if a_rows else builder.gep(col, [ir.Constant(i64, r)]))
                    sv = builder.insert_element(ir.Constant(vec, ir.Undefined), s, ir.Constant(i32, 0))
                    sv = builder.shuffle_vector(sv, ir.Constant(vec, ir.Undefined), splat)
                    for q in range(nv):
                        builder.store(builder.call(fma, [sv, bs[q], builder.load(accs[nv * r + q])]), accs[nv * r + q])
            c0 = builder.gep(cp, [co_])
            with builder.if_else(builder.icmp_signed("!=", add_, ir.Constant(add_.type, 0))) as (adding, storing):
                for branch, accumulate in ((adding, True), (storing, False)):
                    with branch:
                        for r in range(mr):
                            crow = builder.gep(c0, [builder.mul(ir.Constant(i64, r), ldc_)])
                            for q in range(nv):
                                dst = builder.bitcast(builder.gep(crow, [ir.Constant(i64, 16 * q)]), vptr)
                                value = builder.load(accs[nv * r + q])
                                if accumulate:
                                    value = builder.fadd(builder.load(dst, align=4), value)
                                builder.store(value, dst, align=4)
            return context.get_dummy_value()
        return types.void(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add), codegen
    return kern


# Rows per micro-kernel: 14 fills 28 of the 32 vector registers with accumulators; fewer rows when
# they cover M with less padding (M = 20: two blocks of 10; 64: eight of 8).
_R14, _R12, _R10, _R8 = (_micro_kernel(mr, True) for mr in (14, 12, 10, 8))
_C14, _C12, _C10, _C8 = (_micro_kernel(mr, False) for mr in (14, 12, 10, 8))
# Half-width (mr x 16) kernels for an edge panel of at most 16 columns: N = 200 (a 200-wide layer's
# gradients, the LSTM's backward step) ran as 224 columns, 800x700x200 as slow as 800x700x224
_R14H, _R12H, _R10H, _R8H = (_micro_kernel(mr, True, 1) for mr in (14, 12, 10, 8))
_C14H, _C12H, _C10H, _C8H = (_micro_kernel(mr, False, 1) for mr in (14, 12, 10, 8))
_MAX_MR = 14


@njit(**_JIT, inline="always")
def _block(mr, a_rows, a, ao, lda, b, bo, ldb, c, co, ldc, kc, add):
    """The micro-kernel for ``mr`` rows and A's layout (the intrinsics are compile-time sizes)."""
    if a_rows:
        if mr == 14:
            _R14(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
        elif mr == 12:
            _R12(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
        elif mr == 10:
            _R10(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
        else:
            _R8(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    elif mr == 14:
        _C14(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    elif mr == 12:
        _C12(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    elif mr == 10:
        _C10(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    else:
        _C8(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)


@njit(**_JIT, inline="always")
def _half_block(mr, a_rows, a, ao, lda, b, bo, ldb, c, co, ldc, kc, add):
    """``_block``'s half-width (16-column) kernels."""
    if a_rows:
        if mr == 14:
            _R14H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
        elif mr == 12:
            _R12H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
        elif mr == 10:
            _R10H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
        else:
            _R8H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    elif mr == 14:
        _C14H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    elif mr == 12:
        _C12H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    elif mr == 10:
        _C10H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)
    else:
        _C8H(a, ao, lda, b, bo, ldb, c, co, ldc, kc, add)


@njit(**_JIT)
def _rows_per_block(m):
    """The micro-kernel height for ``m`` rows: the fewest padded rows, a smaller kernel counted
    1% dearer per row it lacks against 14 (its broadcasts feed fewer FMAs)."""
    best, cost = 14, float(-(-m // 14) * 14)
    for mr in (12, 10, 8):
        c = -(-m // mr) * mr * (1.0 + 0.01 * (14 - mr))
        if c < cost:
            best, cost = mr, c
    return best


@njit(**_JIT)
def _sgemm(a, b, c):
    """``c = a @ b[:, :N]`` for float32 ``a (M, K)`` with unit stride along one axis, ``b (K, >= N)``
    and ``c (M, N)`` with unit column stride. Where ``b`` holds a whole panel past column ``N``
    (``pad_columns``), the edge panel is read in place."""
    _sgemm_part(a[:, :], b[:, :], c[:, :], np.int64(0), np.int64(1))


@njit(cache=True, error_model="numpy", nogil=True, parallel=True)
def _sgemm_parallel(a, b, c, parts):
    """``_sgemm`` with its output cut into ``parts`` disjoint parts, run at once on numba's threads
    (its OpenMP layer forks and joins in ~1.5 us here, the Python pool in ~57 us: bench/README.md,
    session 18). Each output is computed as ``_sgemm`` computes it, whatever the part."""
    for t in prange(parts):
        _sgemm_part(a[:, :], b[:, :], c[:, :], np.int64(t), np.int64(parts))


@njit(**_JIT)
def _sgemm_part(a, b, c, part, parts):
    """Part ``part`` of ``parts`` of ``_sgemm``: a range of its row blocks where there are at least
    two a part, else a range of its column panels; each block as the whole product runs it. Called,
    not inlined, with ``x[:, :]`` for each operand (numba types it any-layout, 'A', whatever ``x``'s
    layout) and int64 part numbers (not literals, nor prange's unsigned index): ``_sgemm``,
    ``_sgemm_parallel`` and the stacks' kernels share one compiled body for C, F and strided
    operands alike. It took ~7 s to compile per layout, and 16 s inlined into
    ``_sgemm_parallel`` (bench/README.md, issue 17, session 33); the kernels read through strides
    and offsets, so the floats are the same."""
    m, k_len = a.shape
    n = c.shape[1]
    a_rows = a.strides[1] == 4
    lda = (a.strides[0] if a_rows else a.strides[1]) // 4
    ldb = b.strides[0] // 4
    mr = _rows_per_block(m)
    full_n = n // NR
    full_m = m - m % mr
    panels = -(-n // NR)
    row_blocks = -(-m // mr)
    b_lo, b_hi, p_lo, p_hi = 0, row_blocks, 0, panels
    if row_blocks >= 2 * parts:
        b_lo, b_hi = row_blocks * part // parts, row_blocks * (part + 1) // parts
    else:
        p_lo, p_hi = panels * part // parts, panels * (part + 1) // parts
    edge_in_place = b.shape[1] >= panels * NR
    bedge = np.zeros((0 if edge_in_place or n == full_n * NR or p_hi < panels else k_len, NR), np.float32)
    for k in range(bedge.shape[0]):
        for j in range(n - full_n * NR):
            bedge[k, j] = b[k, full_n * NR + j]
    aedge = np.zeros((mr if full_m < m and b_hi == row_blocks else 0, k_len), np.float32)   # row-major, mr x K
    for r in range(m - full_m if aedge.size else 0):
        for k in range(k_len):
            aedge[r, k] = a[full_m + r, k]
    tile = np.empty((_MAX_MR, NR), np.float32)
    for k0 in range(0, k_len, KC):
        kc = min(KC, k_len - k0)
        add = 1 if k0 > 0 else 0
        for g in range(p_lo, p_hi, NC):
            for i0 in range(b_lo * mr, min(m, b_hi * mr), mr):
                ao = i0 * lda + k0 if a_rows else k0 * lda + i0
                for p in range(g, min(p_hi, g + NC)):
                    j0 = p * NR
                    panel, bo, ldp = b, k0 * ldb + j0, ldb
                    if p >= full_n and not edge_in_place:    # the edge panel, from its zero-padded copy
                        panel, bo, ldp = bedge, k0 * NR, NR
                    _panel(mr, a_rows, a, ao, lda, aedge, panel, bo, ldp, c, tile, i0, j0, k0, kc, add,
                           i0 < full_m and p < full_n)


@njit(**_JIT, inline="always")
def _panel(mr, a_rows, a, ao, lda, aedge, b, bo, ldb, c, tile, i0, j0, k0, kc, add, whole):
    """One micro-kernel call for output block ``(i0, j0)``: into ``c`` when the block is whole,
    else into ``tile`` (from ``aedge``, ``mr x K``, for the edge rows) and its valid part copied
    out. One call site each of ``_block`` and ``_half_block``, the operands chosen before it: each
    site is eight micro-kernels' code, which numba and LLVM compile once per site (five sites, in
    two inlined copies of this body, took ~5 s to compile; bench/README.md, issue 17, session 35)."""
    m, n = c.shape
    ldc = c.strides[0] // 4
    src, so, lds, rows = a, ao, lda, a_rows
    if i0 + mr > m:                         # the edge rows, from their zero-padded copy
        src, so, lds, rows = aedge, k0, aedge.strides[0] // 4, True
    dst, co, ldd, into = c, i0 * ldc + j0, ldc, add
    if not whole:
        dst, co, ldd, into = tile, 0, NR, 0
    if n - j0 <= NR // 2:                   # an edge panel of at most 16 columns: half the FMAs
        _half_block(mr, rows, src, so, lds, b, bo, ldb, dst, co, ldd, kc, into)
    else:
        _block(mr, rows, src, so, lds, b, bo, ldb, dst, co, ldd, kc, into)
    if whole:
        return
    for r in range(min(mr, m - i0)):
        for j in range(min(NR, n - j0)):
            if add:
                c[i0 + r, j0 + j] += tile[r, j]
            else:
                c[i0 + r, j0 + j] = tile[r, j]


@njit(**_JIT)
def _sgemm_batch(a, b, c):
    """``c[p] = a[p] @ b[p]`` over the first axis (attention's per-head products), each as
    ``matmul_into`` runs a 2-D one: ``a[p]`` read in place, ``b[p]`` transposed first when it is
    a transposed view (``q @ k.mT``)."""
    b_rows = b.strides[2] == 4
    for p in range(a.shape[0]):
        if b_rows:
            _sgemm(a[p], b[p], c[p])
        else:
            _sgemm(a[p], _transposed(b[p].T), c[p])


@njit(cache=True, error_model="numpy", nogil=True, parallel=True)
def _sgemm_batch_parallel(a, b, c):
    """``_sgemm_batch`` with the stack's products shared out over numba's threads, each product as
    ``_sgemm_batch`` runs it."""
    b_rows = b.strides[2] == 4
    for p in prange(a.shape[0]):
        if b_rows:
            _sgemm_part(a[p, :, :], b[p, :, :], c[p, :, :], np.int64(0), np.int64(1))
        else:
            _sgemm_part(a[p, :, :], _transposed(b[p].T)[:, :], c[p, :, :], np.int64(0), np.int64(1))


@njit(**_JIT)
def _transposed(bt):
    """``bt (N, K)``'s transpose as a ``(K, N rounded up to NR)`` C array, zero past column N: a
    linear layer's ``x @ w.T`` reads its weight this way."""
    n, k_len = bt.shape
    out = np.empty((k_len, -(-n // NR) * NR), np.float32)
    if n == out.shape[1]:       # whole panels: into the C array itself (a strided view's loop does not vectorise)
        _transpose_into(bt, out)
    else:
        out[:, n:] = 0.0
        _transpose_into(bt, out[:, :n])
    return out


@njit(**_JIT)
def _transpose_into(src, dst):
    """``dst (K, N) = src (N, K).T`` in 16 x 16 tiles (fixed trip counts, which LLVM unrolls into
    vector shuffles) that stay in L1: 93 us for 512 x 512 where numpy's strided copy took 430 and
    a loop with variable bounds 330."""
    n, k_len = src.shape
    nf, kf = n - n % 16, k_len - k_len % 16
    for j0 in range(0, nf, 16):
        for k0 in range(0, kf, 16):
            for k in range(16):
                for j in range(16):
                    dst[k0 + k, j0 + j] = src[j0 + j, k0 + k]
    for j in range(n):
        for k in range(kf, k_len):
            dst[k, j] = src[j, k]
    for j in range(nf, n):
        for k in range(kf):
            dst[k, j] = src[j, k]


@njit(**_JIT)
def _sgemm_transposed(a, bt, c):
    """``c = a @ bt.T``: ``bt (N, K)`` transposed into a panel-padded copy, then ``_sgemm``, in one
    call from Python (each compiled call costs ~0.8 us of dispatch; a small linear layer's product
    is ~1 us of arithmetic)."""
    _sgemm(a, _transposed(bt), c)


@njit(**_JIT)
def _sgemm_few_rows(bt, a, c):
    """``c = a @ bt.T`` as ``(bt @ a.T).T`` (few rows of ``a``: it and the result are transposed,
    not ``bt``), in one call from Python: the same kernels on the same operands as three calls."""
    result_t = np.empty((bt.shape[0], a.shape[0]), np.float32)
    _sgemm(bt, _transposed(a), result_t)
    _transpose_into(result_t, c)


def _unit_axis(x: np.ndarray) -> int:
    """The axis along which ``x`` (2-D float32) steps one element while it steps whole elements, forward,
    along the other (the layouts the kernel reads in place): 1 (row-major) before 0 (a transposed view),
    else -1. One look at the strides and flags: a GRU step's small products run this ~300 times."""
    s0, s1 = x.strides
    if not x.flags.aligned:
        return -1
    if s1 == 4 and s0 >= 0 and s0 % 4 == 0:
        return 1
    if s0 == 4 and s1 >= 0 and s1 % 4 == 0:
        return 0
    return -1


def matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray, parts: int = 1) -> np.ndarray:
    """``out = a @ b[:, :N]`` for 2-D float32 operands, ``out (M, N)`` with unit column stride (the
    caller checks; ``b`` wider than ``N`` is a ``pad_columns`` weight). A layout the kernel cannot
    read in place is copied first. ``parts`` above 1: the product cut into that many parts run at
    once on numba's threads (``_sgemm_parallel``), the same floats."""
    if a.shape[1] == 0:
        out[...] = 0
        return out
    a_axis, b_axis = _unit_axis(a), _unit_axis(b)
    if a_axis < 0:
        a, a_axis = np.ascontiguousarray(a), 1
    if b_axis == 0:
        m, k = a.shape
        n = b.shape[1]
        if a_axis == 1 and m * (k + n) < n * k:
            # x @ w.T with few rows as (w @ x.T).T: x and the result transposed instead of w. Each
            # output is the same fused multiply-adds in the same order (fma(x, w, s) = fma(w, x, s))
            if parts > 1:
                result_t = np.empty((n, m), np.float32)
                _sgemm_parallel(b.T, _transposed(a), result_t, parts)
                _transpose_into(result_t, out)
            else:
                _sgemm_few_rows(b.T, a, out)
            return out
        if parts > 1:
            _sgemm_parallel(a, _transposed(b.T), out, parts)
        else:
            _sgemm_transposed(a, b.T, out)
        return out
    elif b_axis < 0:
        b = np.ascontiguousarray(b)
    if parts > 1:
        _sgemm_parallel(a, b, out, parts)
    else:
        _sgemm(a, b, out)
    return out


def matmul_batch_into(a: np.ndarray, b: np.ndarray, out: np.ndarray, parts: int = 1) -> np.ndarray:
    """``out = a @ b`` for float32 stacks of the same batch shape, ``out`` C-contiguous (the caller
    checks); the batch axes are merged (a copy where an operand's cannot be). ``parts`` above 1:
    the stack's products shared out over numba's threads."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    a3, b3 = a.reshape(-1, m, k), b.reshape(-1, k, n)
    if k == 0:
        out[...] = 0
        return out
    if not (_unit_stride3(a3, 2) or _unit_stride3(a3, 1)):
        a3 = np.ascontiguousarray(a3)
    if not (_unit_stride3(b3, 2) or _unit_stride3(b3, 1)):
        b3 = np.ascontiguousarray(b3)
    if parts > 1 and a3.shape[0] > 1:
        _sgemm_batch_parallel(a3, b3, out.reshape(-1, m, n))
    else:
        _sgemm_batch(a3, b3, out.reshape(-1, m, n))
    return out


def _unit_stride3(x: np.ndarray, axis: int) -> bool:
    """``_unit_axis``'s test along ``axis`` for each matrix of a ``(P, rows, cols)`` stack."""
    s = x.strides
    return s[axis] == 4 and s[3 - axis] >= 0 and s[3 - axis] % 4 == 0 and s[0] % 4 == 0 and x.flags.aligned


def pad_columns(b: np.ndarray) -> np.ndarray:
    """``b (K, N)`` copied into a zeroed ``(K, N rounded up to NR)`` C array: a weight used in many
    products (a recurrence's) then never has its edge panel copied."""
    k, n = b.shape
    out = np.zeros((k, -(-n // NR) * NR), np.float32)
    out[:, :n] = b
    return out
