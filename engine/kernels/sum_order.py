"""ATen's cpu ``sum`` order for contiguous float32/float64 rows, so a summed or averaged loss prints as
PyTorch's.

PyTorch's cpu ``sum`` (and ``mean``, its sum divided by the count) reduces a contiguous row through
``cascade_sum``: the row is read as 512-bit vectors (AVX512: 16 floats, 8 doubles), four vectors at a
time into four vector accumulators (instruction-level parallelism), each accumulator cascaded over
four levels (a level is flushed into the next every ``2**p`` steps, ``p = max(4, ceil(log2(steps)) //
4)``). The vectors left over after the groups of four go into the first accumulator, the four are
added in order, the scalar tail is summed from zero, and the lanes are added to it in order. A row
shorter than one vector is summed as four interleaved scalar accumulators the same way. A whole
tensor of 32768 elements or more, when PyTorch runs more than one thread, is cut into one chunk
per thread (``at::parallel_for``'s split) whose sums are then summed as a row of ``threads`` values.
numpy's pairwise sum differs from this in the last bit in most rows, which a printed loss shows.

Two other orders ATen reduces in: its generic loop (the 1- and p-norms) adds a row's terms one at a
time (``sequential``), and its var/std of float32 accumulates in float64 and rounds once
(``variances``, a two-pass float64 variance, its sums reassociated so they vectorise: the same
float32 as Welford's, without the float64 copy of the input numpy needs).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from ..base import pool
from .lanes import _loop
from .switch import loops, native

__all__ = ["row_sums", "column_sums", "total", "sequential", "variances"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)
# numba compiles a called kernel once per argument typing, and a number written in the call is typed as
# that literal value: ``_INT(4)`` passes a plain int64, so every caller shares one compiled body
_INT = np.int64
_VECTOR_BYTES = 32  # AVX2: PyTorch registers no AVX512 sum kernel (slower there), so 8 floats a vector
_ILP = 4
_LEVELS = 4
_STEP = 16  # multi_row_sum's level step (2**4) below 2**19 steps
GRAIN = 32768  # at::internal::GRAIN_SIZE: fewer elements never split across threads
# From this many elements a column sum's ranges run at once (``column_sums``): a region's fork, join and
# dispatch cost ~3 us, and a 64 x 512 bias gradient (one grain) took 5.3 us as two ranges in turn
_REGION_MIN = 1 << 17


@njit(**_JIT)
def _add_rows(a, start, row_stride, item_stride, items, lanes, rows, acc0):
    """``acc0[k * lanes + l]`` += ``a[row + k * item_stride + l]`` for each of ``rows`` rows in turn. The
    values as a slice and the accumulator as a 1-D array let LLVM vectorise the lanes (2-D indexing
    of both ran 4.7x slower); items that touch are one slice."""
    if item_stride == lanes:
        lanes *= items
        items = 1
    for i in range(rows):
        for k in range(items):
            base = start + i * row_stride + k * item_stride
            row = a[base:base + lanes]
            out = acc0[k * lanes:(k + 1) * lanes]
            for l in range(lanes):
                out[l] += row[l]


@njit(**_JIT)
def _cascade(a, start, row_stride, item_stride, items, lanes, rows, acc):
    """``acc[0, :items * lanes]`` = the cascaded sums over ``rows`` rows (``row_stride`` apart from
    ``start``) of ``items`` runs of ``lanes`` contiguous values (``item_stride`` apart): ATen's
    ``multi_row_sum``. Its additions of levels still at zero are skipped: adding +0.0 changes no
    nonzero value, and every result is added to a zero at the end, as ATen stores it."""
    width = items * lanes
    acc0 = acc[0, :width]
    acc0[:] = 0
    power = 4
    if rows > 1 << 19:  # ceil(log2(rows)) // 4 > 4
        power = max(4, _bit_length(rows - 1) // _LEVELS)
    step = 1 << power
    if rows < step:
        _add_rows(a, start, row_stride, item_stride, items, lanes, rows, acc0)
        return
    acc[1:, :width] = 0
    mask = step - 1
    i = 0
    while i + step <= rows:
        _add_rows(a, start + i * row_stride, row_stride, item_stride, items, lanes, step, acc0)
        i += step
        for j in range(1, _LEVELS):
            low, high = acc[j - 1, :width], acc[j, :width]
            for k in range(width):
                high[k] += low[k]
                low[k] = 0
            if i & (mask << (j * power)) != 0:
                break
    _add_rows(a, start + i * row_stride, row_stride, item_stride, items, lanes, rows - i, acc0)
    for j in range(1, _LEVELS):
        level = acc[j, :width]
        for k in range(width):
            acc0[k] += level[k]


@njit(**_JIT)
def _bit_length(x):
    n = 0
    while x:
        x >>= 1
        n += 1
    return n


@njit(**_JIT)
def _ilp_sum(a, start, stride, count, lanes, acc):
    """``acc[0, :lanes]`` = the sum of ``count`` runs of ``lanes`` contiguous values, ``stride`` apart
    from ``start``, as ATen's ``row_sum``: runs ``4i + k`` cascaded into accumulator ``k``, the runs
    left over added to the first, then the four added in order."""
    groups = count // _ILP
    _cascade(a, start, _ILP * stride, stride, _INT(_ILP), lanes, groups, acc)
    _add_rows(a, start + groups * _ILP * stride, stride, lanes, _INT(1), lanes, count - groups * _ILP, acc[0])
    for j in range(1, _ILP):
        for k in range(lanes):
            acc[0, k] += acc[0, j * lanes + k]


@njit(**_JIT)
def _row_sum(a, start, n, lanes, acc, acc1):
    """The sum of ``a[start:start + n]`` in ATen's order for ``lanes``-wide vectors
    (``vectorized_inner_sum``: the tail summed from zero, then each lane added; ``scalar_inner_sum``
    under one vector)."""
    if n < _STEP * _ILP * lanes:
        return _short_row_sum(a, start, n, lanes, acc1)
    vectors = n // lanes
    total = a.dtype.type(0)
    for i in range(start + vectors * lanes, start + n):
        total += a[i]
    _ilp_sum(a, start, lanes, vectors, lanes, acc)
    for k in range(lanes):
        total += acc[0, k]
    return total


@njit(inline="always", **_JIT)
def _short_row_sum(a, start, n, lanes, acc1):
    """``_row_sum`` of a row under 64 vectors."""
    total = a.dtype.type(0)
    if n < lanes:
        return _short_sum(a, start, n, 1, total, acc1)
    vectors = n // lanes
    for i in range(start + vectors * lanes, start + n):
        total += a[i]
    return _short_vectors(a, start, vectors, total)


@intrinsic
def _short_vectors(typingctx, a, start, count, total):
    """``_short_sum`` of ``count`` whole vectors (under 64) as LLVM vectors: the ``_ILP`` accumulators
    in registers, each vector of a group added into its own, the vectors left over added into the
    first, the four added lane-wise in order, then each lane added to ``total`` in order: the same
    additions (a numba loop kept the accumulators in memory: a store-to-load chain per group, ~40 us
    for the 512 rows of 256 floats a ResNet's global average pool sums, torch 10)."""
    def codegen(context, builder, signature, values):
        arr = context.make_array(signature.args[0])(context, builder, values[0])
        intp = context.get_value_type(types.intp)
        first, n = (context.cast(builder, values[i], signature.args[i], types.intp) for i in (1, 2))
        ft = context.get_value_type(signature.args[0].dtype)
        lanes = _VECTOR_BYTES * 8 // signature.args[0].dtype.bitwidth
        vt = ir.VectorType(ft, lanes)
        const = lambda v: ir.Constant(intp, v)

        def load(v):   # vector v of the row
            at = builder.add(first, builder.mul(v, const(lanes)))
            return builder.load(builder.bitcast(builder.gep(arr.data, [at]), vt.as_pointer()), align=1)

        zero = ir.Constant(vt, [0.0] * lanes)
        groups = builder.mul(builder.sdiv(n, const(_ILP)), const(_ILP))
        accs = _loop(builder, "groups", const(0), groups, const(_ILP), [zero] * _ILP,
                     lambda accs, v: [builder.fadd(acc, load(builder.add(v, const(j)))) for j, acc in enumerate(accs)])
        s, = _loop(builder, "left", groups, n, const(1), [accs[0]], lambda s, v: [builder.fadd(s[0], load(v))])
        for acc in accs[1:]:
            s = builder.fadd(s, acc)
        total = values[3]
        for k in range(lanes):
            total = builder.fadd(total, builder.extract_element(s, ir.Constant(ir.IntType(32), k)))
        return total
    return a.dtype(a, start, count, total), codegen


@intrinsic
def _block_rows(typingctx, a, start, row_stride, lo, hi, power, levels, slot):
    """Rows ``lo:hi`` (``row_stride`` apart) of one block of ``_ILP`` vectors from ``start`` added into its
    ``_cascade`` levels ``levels[slot:slot + 16 lanes]`` (level k's vector j at ``(4k + j) lanes``),
    held as LLVM vectors in registers meanwhile: level 0 flushed up after every ``2**power``-th row
    (counted from row 0, ``lo`` a multiple of it) as ``_cascade`` does, with selects, and the rows
    after the last whole step added into level 0: ATen's ``multi_row_sum`` of a block, the same
    additions (``_cascade`` over whole rows kept the accumulators in memory: a 1024 x 128 bias
    gradient took 11.4 us at one thread, torch 5.4-8)."""
    def codegen(context, builder, signature, values):
        src = context.make_array(signature.args[0])(context, builder, values[0])
        acc = context.make_array(signature.args[6])(context, builder, values[6])
        intp = context.get_value_type(types.intp)
        first, stride, lo, hi, power, slot = (context.cast(builder, values[i], signature.args[i], types.intp)
                                              for i in (1, 2, 3, 4, 5, 7))
        ft = context.get_value_type(signature.args[0].dtype)
        lanes = _VECTOR_BYTES * 8 // signature.args[0].dtype.bitwidth
        vt = ir.VectorType(ft, lanes)
        const = lambda v: ir.Constant(intp, v)
        zero = ir.Constant(vt, [0.0] * lanes)

        def vector(arr, at):
            return builder.bitcast(builder.gep(arr.data, [at]), vt.as_pointer())

        def add_rows(level0, begin, end):  # rows begin:end added into level 0
            def row(accs, r):
                base = builder.add(first, builder.mul(r, stride))
                return [builder.fadd(v, builder.load(vector(src, builder.add(base, const(j * lanes))), align=1))
                        for j, v in enumerate(accs)]
            return _loop(builder, "rows", begin, end, const(1), level0, row)

        step = builder.shl(const(1), power)
        mask = builder.sub(step, const(1))
        whole = builder.add(lo, builder.mul(builder.sdiv(builder.sub(hi, lo), step), step))

        def chunk(levels, i):  # step rows, then the flushes _cascade makes after them
            l0, l1, l2, l3 = (levels[k * _ILP:(k + 1) * _ILP] for k in range(_LEVELS))
            l0 = add_rows(l0, i, builder.add(i, step))
            done = builder.add(i, step)
            up2 = builder.icmp_signed("==", builder.and_(done, builder.shl(mask, power)), const(0))
            up3 = builder.and_(up2, builder.icmp_signed(
                "==", builder.and_(done, builder.shl(mask, builder.add(power, power))), const(0)))
            l1 = [builder.fadd(h, low) for h, low in zip(l1, l0)]
            l2 = [builder.select(up2, builder.fadd(h, low), h) for h, low in zip(l2, l1)]
            l1 = [builder.select(up2, zero, low) for low in l1]
            l3 = [builder.select(up3, builder.fadd(h, low), h) for h, low in zip(l3, l2)]
            l2 = [builder.select(up3, zero, low) for low in l2]
            return [zero] * _ILP + l1 + l2 + l3

        at = [builder.add(slot, const(k * lanes)) for k in range(_LEVELS * _ILP)]
        levels = [builder.load(vector(acc, p), align=1) for p in at]
        levels = _loop(builder, "chunks", lo, whole, step, levels, chunk)
        levels[:_ILP] = add_rows(levels[:_ILP], whole, hi)
        for v, p in zip(levels, at):
            builder.store(v, vector(acc, p), align=1)
        return context.get_dummy_value()
    return types.void(a, start, row_stride, lo, hi, power, levels, slot), codegen


@njit(**_JIT)
def _blocks(a, cols, lo, plain, lanes, out, acc):
    """``out[lo:lo + plain]`` = the column sums of the ``plain // (4 lanes)`` blocks from column ``lo``,
    each ``_block_rows`` down all the rows, in tiles of about 32 KiB of rows (whole steps) taken block by
    block: one block down all the rows at a time summed 1024 x 512 floats in 71 us at one thread, by
    tiles 40 (``_cascade`` over whole rows 51, torch 64-70)."""
    rows = a.shape[0] // cols
    power = 4
    if rows > 1 << 19:  # as _cascade
        power = max(4, _bit_length(rows - 1) // _LEVELS)
    step = 1 << power
    tile = max(step, (32768 // (cols * a.itemsize)) // step * step)
    levels = acc.reshape(-1)
    block = _ILP * lanes
    levels[:_LEVELS * plain] = 0
    for r in range(0, rows, tile):
        for b in range(0, plain, block):
            _block_rows(a, lo + b, cols, r, min(r + tile, rows), power, levels, _LEVELS * b)
    zero = a.dtype.type(0)
    for b in range(0, plain, block):
        base = _LEVELS * b
        for k in range(block):
            s = levels[base + k]
            for j in range(1, _LEVELS):
                s += levels[base + j * block + k]
            out[lo + b + k] = zero + s


@njit(inline="always", **_JIT)
def _short_sum(a, start, count, lanes, total, acc1):
    """``total`` plus each lane of the ``_ilp_sum`` of fewer than 16 groups (no level is flushed), in
    order. Inlined, each accumulator summed in a register: a call with array views cost ~100 ns and
    accumulators in memory a store-to-load chain, per short row."""
    width = _ILP * lanes
    groups = count // _ILP
    acc1[:width] = 0
    for g in range(groups):
        base = start + g * width
        for k in range(width):
            acc1[k] += a[base + k]
    for k in range(lanes):
        s = acc1[k]
        for v in range(groups * _ILP, count):
            s += a[start + v * lanes + k]
        for j in range(1, _ILP):
            s += acc1[j * lanes + k]
        total += s
    return total


@njit(**_JIT)
def _columns(a, cols, lo, hi, lanes, out, acc):
    """``out[lo:hi]`` = the sums of the columns ``lo:hi`` of the contiguous ``(-1, cols)`` rows ``a``
    as one ATen loop call orders them (``vectorized_outer_sum``; ``scalar_outer_sum`` under one
    vector): blocks of four vectors (four scalars) cascaded down the rows, the vectors and scalars
    left over each summed as a ``row_sum`` down the rows."""
    # ATen walks the blocks and the columns left over one at a time; each column's additions are the
    # same when a pass adds all of them row by row, as numpy's axis-0 sum reads memory
    rows = a.shape[0] // cols
    zero = a.dtype.type(0)
    block = _ILP * lanes if hi - lo >= lanes else _ILP
    plain = (hi - lo) // block * block
    if plain and block > _ILP:  # block by block, the accumulators in registers
        _blocks(a, cols, lo, plain, lanes, out, acc)
    elif plain:  # scalar blocks cascade alike: one pass over whole rows
        _cascade(a, lo, cols, plain, _INT(1), plain, rows, acc)
        for k in range(plain):
            out[lo + k] = zero + acc[0, k]
    rest = hi - lo - plain  # each a row_sum down the rows, lane by lane alike: one pass too
    if rest:
        _ilp_sum(a, lo + plain, cols, rows, rest, acc)
        for k in range(rest):
            out[lo + plain + k] = zero + acc[0, k]


@njit(inline="always", **_JIT)
def _scratch(a):
    """The lane count of ``a``'s dtype and the accumulators of one row sum (cascaded, and short)."""
    lanes = _VECTOR_BYTES // a.itemsize
    return lanes, np.empty((_LEVELS, _ILP * lanes), a.dtype), np.empty(_ILP * lanes, a.dtype)


@njit(**_JIT)
def _rows(a, n, out):
    lanes, acc, acc1 = _scratch(a)
    zero = a.dtype.type(0)
    if n < _STEP * _ILP * lanes:  # the short rows' loop inlined, without the long rows' calls
        for r in range(out.shape[0]):
            out[r] = zero + _short_row_sum(a, r * n, n, lanes, acc1)
        return
    for r in range(out.shape[0]):
        out[r] = zero + _row_sum(a, r * n, n, lanes, acc, acc1)


@njit(**_JIT)
def _total(a, threads):
    lanes, acc, acc1 = _scratch(a)
    zero = a.dtype.type(0)
    n = a.shape[0]
    if threads < 2 or n < GRAIN:
        return zero + _row_sum(a, _INT(0), n, lanes, acc, acc1)
    used = min(threads, (n + GRAIN - 1) // GRAIN)
    chunk = (n + used - 1) // used
    partial = np.zeros(threads, a.dtype)
    for t in range(used):
        lo = t * chunk
        if lo < n:
            partial[t] = zero + _row_sum(a, lo, min(chunk, n - lo), lanes, acc, acc1)
    return zero + _row_sum(partial, _INT(0), threads, lanes, acc, acc1)


@njit(**_JIT)
def _outer(a, cols, threads, out):
    lanes = _VECTOR_BYTES // a.itemsize
    acc = np.empty((_LEVELS, max(cols, _ILP * _ILP * lanes)), a.dtype)
    if threads < 2 or a.shape[0] < GRAIN:
        _columns(a, cols, _INT(0), cols, lanes, out, acc)
        return
    for t in range(min(threads, cols)):
        lo, hi = _column_range(cols, threads, a.itemsize, t)
        if lo < hi:
            _columns(a, cols, lo, hi, lanes, out, acc)


@njit(**_JIT)
def _column_range(cols, threads, itemsize, t):
    """Thread ``t``'s columns ``lo:hi`` (empty where ``lo >= hi``): at::parallel_for's column ranges for
    ``min(threads, cols)`` threads, cut at 128-byte lines."""
    used = min(threads, cols)
    chunk = (cols + used - 1) // used
    line = 128 // itemsize
    lo = t * chunk
    hi = min(cols, lo + chunk)
    if lo >= hi:
        return lo, hi
    lo -= lo % line
    if hi != cols:
        hi -= hi % line
    return lo, hi


@njit(cache=True, error_model="numpy", nogil=True, parallel=True)
def _outer_parts(a, cols, threads, out):
    """``_outer``'s column ranges at once on numba's threads, each with its own accumulators: the same
    additions per column as ``_outer`` makes them one range after another (as ATen's threads do)."""
    lanes = _VECTOR_BYTES // a.itemsize
    for t in prange(min(threads, cols)):
        lo, hi = _column_range(cols, threads, a.itemsize, _INT(t))
        if lo < hi:
            _columns(a, cols, lo, hi, lanes, out, np.empty((_LEVELS, max(hi - lo, _ILP * _ILP * lanes)), a.dtype))


def row_sums(a: np.ndarray, n: int, out: np.ndarray) -> None:
    """``out`` (1-D, contiguous) = the sums of the consecutive ``n``-element rows of the contiguous 1-D
    float32/float64 ``a`` (``n >= 1``), each in ATen's order (an inner reduction with more than one
    row)."""
    _rows(a, n, out)


# ``total(a, threads)``: the sum of the contiguous 1-D float32/float64 ``a`` in ATen's order when PyTorch
# runs ``threads`` threads (a numpy scalar of ``a``'s dtype); the loop itself, no Python frame around it
# (a loss's ``sum()`` is ~2 us in all)
total = _total


def column_sums(a: np.ndarray, cols: int, threads: int, out: np.ndarray) -> None:
    """``out`` (1-D, contiguous) = the sums of the ``cols`` columns (``cols >= 2``) of the contiguous 1-D
    float32/float64 ``a`` read as ``(-1, cols)`` rows, in ATen's order when PyTorch runs ``threads``
    threads (a reduction over leading dims: a bias gradient). Where ATen cuts ``_REGION_MIN`` elements or
    more into column ranges of at least one 128-byte line each, they run at once as one OpenMP region
    (``switch.native``): one after another on the calling thread a 1024 x 384 bias gradient took 34 us at
    two threads, at once 25 (torch 15)."""
    used = min(threads, cols)
    if (used > 1 and a.shape[0] >= _REGION_MIN and -(-cols // used) >= 128 // a.itemsize and native()
            and not pool.in_block() and loops("regions").parts(used) > 1):
        _outer_parts(a, cols, threads, out)
    else:
        _outer(a, cols, threads, out)


@njit(**_JIT)
def sequential(rows, out, chunks):
    """``out[i]``: row ``i`` of the 2-D ``rows`` summed one term at a time, in its dtype; a single row
    of ``GRAIN`` terms or more in ``chunks`` pieces (``at::parallel_for``'s split among threads),
    each summed so, then the pieces' sums added in order."""
    n = rows.shape[1]
    if rows.shape[0] == 1 and n >= GRAIN and chunks > 1:
        size = -(-n // chunks)
        total = rows.dtype.type(0)
        for start in range(0, n, size):
            acc = rows.dtype.type(0)
            for j in range(start, min(start + size, n)):
                acc += rows[0, j]
            total += acc
        out[0] = total
        return
    for i in range(rows.shape[0]):
        acc = rows.dtype.type(0)
        for j in range(n):
            acc += rows[i, j]
        out[i] = acc


@njit(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc"})
def variances(rows, correction, out):
    """``out[i]``: row ``i``'s variance, ``sum((x - mean)^2) / (n - correction)`` in float64, rounded
    to ``out``'s dtype once (a divisor <= 0 gives inf or nan, as ATen's)."""
    n = rows.shape[1]
    for i in range(rows.shape[0]):
        total = 0.0
        for j in range(n):
            total += np.float64(rows[i, j])
        mean = total / n
        m2 = 0.0
        for j in range(n):
            d = np.float64(rows[i, j]) - mean
            m2 += d * d
        out[i] = m2 / (n - correction if n > correction else 0.0)
