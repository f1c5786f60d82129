"""Batch norm over ``(N, C, L)`` float32 arrays as numba loops, in ATen's cpu order of operations, so
that outputs, running statistics and gradients are PyTorch's bit for bit: train mode (batch
statistics, output, the three gradients) and eval mode (running statistics).

Why: a network with ``BatchNorm1d`` on ``(N, C)`` input drifted ~1e-4 from PyTorch after six epochs
of training when these loops summed in their own (vectorised, reassociated) order. The order below
is that of ``aten/src/ATen/native/cpu/batch_norm_kernel.cpp`` and ``Normalization.cpp``
(``batch_norm_cpu_update_stats_template``), as torch 2.13's float32 kernels run it: ATen registers
this kernel with ``REGISTER_DISPATCH``, which registers no AVX512 variant, so its vectors are
AVX2's, eight floats; its compiler contracts some multiply-adds into fused ones (``fma`` below,
LLVM's exact ``llvm.fma``), found site by site against torch.

Statistics (train). ``L > 1`` (contiguous path): per channel, ``mean = f32(s / M)`` with ``s`` a
float64 sum of the values in memory order (one sequential chain), then ``var_sum = f32`` of the
float64 sequential sum of the float32 squares ``(x - mean)^2``. ``L == 1`` (``(N, C)`` input, the
channels-last path): when ``N > T`` (``T`` = intra-op threads, ATen's ``get_num_threads``) the rows
are cut as ``at::parallel_for`` cuts them (``ceil(N / T)`` rows a chunk), each chunk summed into
float32 per channel, the chunk sums added in float64 in order; the squares likewise, each chunk
accumulating ``fma(d, d, acc)``; with ``N <= T``, float64 sums over the rows (squares rounded to
float32 first). ``var = f32(var_sum / f32(M))``, ``invstd = f32(1 / sqrt(f64(var) + eps))``, and
the unbiased variance for the running estimate ``f32(var_sum / f32(M - 1))``.

Output (train and eval): ``alpha = f32(invstd * w)``, ``beta = fma(-mean, alpha, b)``,
``out = fma(x, alpha, beta)``; in eval ``invstd = f32(1 / sqrt(running_var + f32(eps)))`` in float32.

Backward (train). ``L > 1``: each row of ``L`` values (one sample, one channel) is reduced in
eight lanes (``vec::reduce_all`` / ``map2_reduce_all``): the first vector loaded, then the full
vectors added lane-wise, the partial last vector added into its first lanes, the lanes summed
as ``((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))``; rows under eight values are summed in order. For
``sum(g)`` the terms are ``g``; for ``dotp = sum((x - mean) g)`` the products, rounded, except in
the partial last vector where they are fused (``fma``). The row results are added in float64 over
the samples. ``L == 1``: per chunk of rows (as above, whatever ``N``), float32 ``acc += g`` and
``acc = fma(x - mean, g, acc)``, the chunks added in float64, rounded to float32. Then
``k = dotp * invstd * invstd / M`` and ``gm = sum / M`` (float32; for ``L > 1`` ``gm`` divides the
float64 sum), ``gx = (fma(-(x - mean), k, g - gm) * invstd) * w`` (for ``L == 1`` the last ``C % 8``
channels, ATen's scalar-masked tail, round the product instead), ``gw = dotp * invstd``,
``gb = sum``. Eval: the same sums about the running mean, ``gx = (g * invstd) * w`` with
``invstd = f32(1 / sqrt(f64(running_var) + eps))`` (float64 here, as ATen's backward has it).

Work is split over channels (``kernels.parallel_ranges``): a channel's sums are one thread's, and
the chunking that mimics ATen's threads is by ``T`` rows, not by how this pool splits, so any split
gives the same floats. The float64 chains are sequential by definition; for ``L > 1`` eight or 16
channels run their chains side by side, eight values of eight channels loaded and transposed so
that one vector add steps eight chains (ResNet's (16, 32, 16, 16) statistics 95 -> 37 us at one
thread), and the backward reads the forward's mean and invstd.
Rows of whole vectors (``L`` a multiple of eight) are reduced four samples at a time, their eight
vector chains in registers (ResNet's (16, 32, 16, 16) sums 45 -> 14 us). For ``L > 1`` each
channel's gradient is written right after its sums, and the forward's output after each 16
channels' statistics, while those rows are still in L2 (a (32, 16, 28, 28) backward's x and g,
3.2 MB, are not: 275 -> 189 us at one thread).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import parallel_ranges, threads
from .fastmath import fma

__all__ = ["forward", "backward", "eval_forward", "eval_backward", "LANES"]

F = np.float32
D = np.float64
LANES = 8          # ATen's Vectorized<float> in its AVX2 kernel
_JIT = dict(cache=True, error_model="numpy", nogil=True)


@intrinsic
def _lanes(typingctx, gr, xr, mu, body, acc_s, acc_p):
    """Eight-lane sums of a row's whole vectors ``8:body`` (ATen's loop body, ``+`` only, products
    rounded), onto ``acc_s``/``acc_p`` (8,) (the first vector's values): LLVM vectors, as numba's
    scalar lanes did not vectorise."""
    if not (isinstance(gr, types.Array) and gr.ndim == 1 and gr.layout == "C" and gr.dtype == types.float32):
        return None

    def codegen(context, builder, signature, args):
        g_arr = context.make_array(signature.args[0])(context, builder, args[0])
        x_arr = context.make_array(signature.args[1])(context, builder, args[1])
        s_arr = context.make_array(signature.args[4])(context, builder, args[4])
        p_arr = context.make_array(signature.args[5])(context, builder, args[5])
        vec = ir.VectorType(ir.FloatType(), 8)
        zero = ir.Constant(ir.IntType(32), 0)
        mu_v = builder.insert_element(ir.Constant(vec, ir.Undefined), args[2], zero)
        mu_v = builder.shuffle_vector(mu_v, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8))

        def load(ptr, k):
            p = builder.gep(ptr, [k])
            v = builder.load(builder.bitcast(p, vec.as_pointer()))
            v.align = 4
            return v
        s_ptr = builder.bitcast(s_arr.data, vec.as_pointer())
        p_ptr = builder.bitcast(p_arr.data, vec.as_pointer())
        s_slot, p_slot = cgutils.alloca_once(builder, vec), cgutils.alloca_once(builder, vec)
        ls, lp = builder.load(s_ptr), builder.load(p_ptr)
        ls.align = lp.align = 4
        builder.store(ls, s_slot)
        builder.store(lp, p_slot)
        start = ir.Constant(args[3].type, 8)
        with cgutils.for_range_slice(builder, start, args[3], ir.Constant(args[3].type, 8)) as (k, _):
            gv = load(g_arr.data, k)
            xv = load(x_arr.data, k)
            builder.store(builder.fadd(builder.load(s_slot), gv), s_slot)
            builder.store(builder.fadd(builder.load(p_slot), builder.fmul(builder.fsub(xv, mu_v), gv)), p_slot)
        st = builder.store(builder.load(s_slot), s_ptr)
        st.align = 4
        st = builder.store(builder.load(p_slot), p_ptr)
        st.align = 4
        return context.get_dummy_value()
    return types.void(gr, xr, mu, body, acc_s, acc_p), codegen


def _rows_sums(rows, reduced):
    """An intrinsic: ATen's eight-lane ``reduce_all(g row)`` and ``map2_reduce_all((x - mu) * g row)``
    over the first ``body`` values (a multiple of eight) of ``rows`` rows at once, row ``r`` at flat
    offset ``base + r * stride``; ``reduced``: the row results into ``out[2r]``, ``out[2r + 1]``, else
    the lanes into ``out[16r:16r + 8]``, ``out[16r + 8:16r + 16]`` (for the caller to add a partial
    last vector). One row's two sums are chains of dependent vector adds; ``rows`` rows side by side
    keep ``2 rows`` chains in flight, all in registers (the per-row loop of ``_lanes`` spent more on
    its lane arrays than on its adds)."""
    @intrinsic
    def rows_sums(typingctx, gf, xf, mu, base, stride, body, out):
        if not all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" and a.dtype == types.float32
                   for a in (gf, xf, out)):
            return None

        def codegen(context, builder, signature, args):
            g_arr = context.make_array(signature.args[0])(context, builder, args[0])
            x_arr = context.make_array(signature.args[1])(context, builder, args[1])
            o_arr = context.make_array(signature.args[6])(context, builder, args[6])
            vec = ir.VectorType(ir.FloatType(), LANES)
            i64 = ir.IntType(64)
            mu_v = builder.insert_element(ir.Constant(vec, ir.Undefined), args[2], ir.Constant(ir.IntType(32), 0))
            mu_v = builder.shuffle_vector(mu_v, ir.Constant(vec, ir.Undefined),
                                          ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))
            base_, stride_, body_ = (builder.sext(a, i64) if a.type.width < 64 else a for a in args[3:6])
            starts = [builder.add(base_, builder.mul(stride_, ir.Constant(i64, r))) for r in range(rows)]

            def load(data, k):
                v = builder.load(builder.bitcast(builder.gep(data, [k]), vec.as_pointer()))
                v.align = 4
                return v

            slots = []
            for st in starts:
                gv, xv = load(g_arr.data, st), load(x_arr.data, st)
                s_slot, p_slot = cgutils.alloca_once(builder, vec), cgutils.alloca_once(builder, vec)
                builder.store(gv, s_slot)
                builder.store(builder.fmul(builder.fsub(xv, mu_v), gv), p_slot)
                slots.append((s_slot, p_slot))
            with cgutils.for_range_slice(builder, ir.Constant(i64, LANES), body_, ir.Constant(i64, LANES)) as (k, _):
                for st, (s_slot, p_slot) in zip(starts, slots):
                    at = builder.add(st, k)
                    gv, xv = load(g_arr.data, at), load(x_arr.data, at)
                    builder.store(builder.fadd(builder.load(s_slot), gv), s_slot)
                    builder.store(builder.fadd(builder.load(p_slot), builder.fmul(builder.fsub(xv, mu_v), gv)), p_slot)

            def reduce_all(v):                       # ATen's vec_reduce_all over eight lanes
                e = [builder.extract_element(v, ir.Constant(ir.IntType(32), j)) for j in range(LANES)]
                return builder.fadd(builder.fadd(builder.fadd(e[0], e[4]), builder.fadd(e[2], e[6])),
                                    builder.fadd(builder.fadd(e[1], e[5]), builder.fadd(e[3], e[7])))
            for r, (s_slot, p_slot) in enumerate(slots):
                if reduced:
                    for j, slot in ((2 * r, s_slot), (2 * r + 1, p_slot)):
                        builder.store(reduce_all(builder.load(slot)), builder.gep(o_arr.data, [ir.Constant(i64, j)]))
                    continue
                for j, slot in ((16 * r, s_slot), (16 * r + LANES, p_slot)):
                    st = builder.store(builder.load(slot), builder.bitcast(builder.gep(o_arr.data, [ir.Constant(i64, j)]),
                                                                           vec.as_pointer()))
                    st.align = 4
            return context.get_dummy_value()
        return types.void(gf, xf, mu, base, stride, body, out), codegen
    return rows_sums


_rows4 = _rows_sums(4, True)
_rows1 = _rows_sums(1, True)
_lanes4 = _rows_sums(4, False)
_lanes1 = _rows_sums(1, False)


# ---------------------------------------------------------------- statistics
def _chains(groups, squares):
    """An intrinsic: one sample's row of ``length`` values for ``8 groups`` channels (channel ``j`` at
    flat offset ``base + j * cstride``) added in memory order onto ``acc`` (``8 groups`` float64
    chains), the values themselves or, with ``squares``, the float32 squares ``(x - mean[c0 + j])^2``.
    Eight values of eight channels are loaded as eight vectors and transposed, so each step adds one
    value to every channel's chain in one vector add: the chains stay sequential, the conversions and
    adds run eight wide (scalar chains were bound by their conversion and add instructions)."""
    @intrinsic
    def chains(typingctx, xf, base, cstride, length, mean, c0, acc):
        if not (isinstance(xf, types.Array) and xf.dtype == types.float32 and xf.layout == "C" and xf.ndim == 1):
            return None

        def codegen(context, builder, signature, args):
            x_arr = context.make_array(signature.args[0])(context, builder, args[0])
            m_arr = context.make_array(signature.args[4])(context, builder, args[4])
            a_arr = context.make_array(signature.args[6])(context, builder, args[6])
            f32, f64, i32, i64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)
            vec, dvec = ir.VectorType(f32, LANES), ir.VectorType(f64, LANES)
            base_, cs, length_, c0_ = (builder.sext(a, i64) if a.type.width < 64 else a
                                       for a in (args[1], args[2], args[3], args[5]))

            def shuffle(a, b, idx):
                return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(i32, LANES), idx))

            def splat(v):
                return shuffle(builder.insert_element(ir.Constant(vec, ir.Undefined), v, ir.Constant(i32, 0)),
                               ir.Constant(vec, ir.Undefined), [0] * LANES)

            def transpose(r):                          # 8x8: out[t][j] = r[j][t]
                t = []
                for j in range(0, 8, 2):
                    t += [shuffle(r[j], r[j + 1], [0, 8, 1, 9, 4, 12, 5, 13]),
                          shuffle(r[j], r[j + 1], [2, 10, 3, 11, 6, 14, 7, 15])]
                lo, hi = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]
                u = [shuffle(t[0], t[2], lo), shuffle(t[0], t[2], hi), shuffle(t[1], t[3], lo), shuffle(t[1], t[3], hi),
                     shuffle(t[4], t[6], lo), shuffle(t[4], t[6], hi), shuffle(t[5], t[7], lo), shuffle(t[5], t[7], hi)]
                return ([shuffle(u[i], u[i + 4], [0, 1, 2, 3, 8, 9, 10, 11]) for i in range(4)]
                        + [shuffle(u[i], u[i + 4], [4, 5, 6, 7, 12, 13, 14, 15]) for i in range(4)])

            starts, means, slots = [], [], []
            for gi in range(groups):
                st = [builder.add(base_, builder.mul(cs, ir.Constant(i64, 8 * gi + j))) for j in range(LANES)]
                starts.append(st)
                mj = [builder.load(builder.gep(m_arr.data, [builder.add(c0_, ir.Constant(i64, 8 * gi + j))]))
                      for j in range(LANES)]
                mv = ir.Constant(vec, ir.Undefined)
                for j in range(LANES):
                    mv = builder.insert_element(mv, mj[j], ir.Constant(i32, j))
                means.append((mv, [splat(m) for m in mj]))
                slot = cgutils.alloca_once(builder, dvec)
                ptr = builder.bitcast(builder.gep(a_arr.data, [ir.Constant(i64, 8 * gi)]), dvec.as_pointer())
                ld = builder.load(ptr)
                ld.align = 8
                builder.store(ld, slot)
                slots.append((slot, ptr))
            body = builder.sub(length_, builder.srem(length_, ir.Constant(i64, LANES)))
            with cgutils.for_range_slice(builder, ir.Constant(i64, 0), body, ir.Constant(i64, LANES)) as (k, _):
                for gi in range(groups):
                    rows = []
                    for j in range(LANES):
                        v = builder.load(builder.bitcast(builder.gep(x_arr.data, [builder.add(starts[gi][j], k)]),
                                                         vec.as_pointer()))
                        v.align = 4
                        if squares:
                            d = builder.fsub(v, means[gi][1][j])
                            v = builder.fmul(d, d)
                        rows.append(v)
                    for col in transpose(rows):
                        builder.store(builder.fadd(builder.load(slots[gi][0]), builder.fpext(col, dvec)), slots[gi][0])
            with cgutils.for_range_slice(builder, body, length_, ir.Constant(i64, 1)) as (k, _):
                for gi in range(groups):
                    v = ir.Constant(vec, ir.Undefined)
                    for j in range(LANES):
                        e = builder.load(builder.gep(x_arr.data, [builder.add(starts[gi][j], k)]))
                        v = builder.insert_element(v, e, ir.Constant(i32, j))
                    if squares:
                        d = builder.fsub(v, means[gi][0])
                        v = builder.fmul(d, d)
                    builder.store(builder.fadd(builder.load(slots[gi][0]), builder.fpext(v, dvec)), slots[gi][0])
            for slot, ptr in slots:
                st = builder.store(builder.load(slot), ptr)
                st.align = 8
            return context.get_dummy_value()
        return types.void(xf, base, cstride, length, mean, c0, acc), codegen
    return chains


_sums16 = _chains(2, False)
_squares16 = _chains(2, True)
_sums8 = _chains(1, False)
_squares8 = _chains(1, True)


@njit(**_JIT)
def _vec_stats(x, c, width, mean, var_sum):
    """``L > 1``, ``width`` (8 or 16) channels from ``c``: per channel, the float64 sum of its values
    in memory order, ``mean = f32(s / M)``, then the float64 sum of the float32 squares ``(x - mean)^2``;
    the channels' chains side by side, eight a vector (``_chains``)."""
    n, channels, length = x.shape
    xf = x.reshape(x.size)
    m = n * length
    acc = np.zeros(width, D)
    for b in range(n):
        if width == 16:
            _sums16(xf, (b * channels + c) * length, length, length, mean, c, acc)
        else:
            _sums8(xf, (b * channels + c) * length, length, length, mean, c, acc)
    for j in range(width):
        mean[c + j] = F(acc[j] / m)
    acc[:] = 0
    for b in range(n):
        if width == 16:
            _squares16(xf, (b * channels + c) * length, length, length, mean, c, acc)
        else:
            _squares8(xf, (b * channels + c) * length, length, length, mean, c, acc)
    for j in range(width):
        var_sum[c + j] = F(acc[j])


@njit(**_JIT)
def _seq_stats(x, c0, c1, mean, var_sum):
    """``L > 1``: per channel, the float64 sum of the values in memory order, ``mean = f32(s / M)``,
    then the float64 sum of the float32 squares ``(x - mean)^2``."""
    n, _, length = x.shape
    m = n * length
    c = c0
    while c + 16 <= c1:  # the widths as int64, not literals: one compiled _vec_stats serves both
        _vec_stats(x, c, np.int64(16), mean, var_sum)
        c += 16
    while c + 8 <= c1:
        _vec_stats(x, c, np.int64(8), mean, var_sum)
        c += 8
    while c < c1:
        s = 0.0
        for b in range(n):
            for k in range(length):
                s += x[b, c, k]
        mu = F(s / m)
        q = 0.0
        for b in range(n):
            for k in range(length):
                d = x[b, c, k] - mu
                q += d * d
        mean[c] = mu
        var_sum[c] = F(q)
        c += 1


@njit(**_JIT)
def _row_stats(x, c0, c1, nthreads, mean, var_sum):
    """``L == 1``: ATen's channels-last collection over rows for channels ``c0:c1``."""
    n = x.shape[0]
    w = c1 - c0
    tot = np.zeros(w, D)
    chunk = (n + nthreads - 1) // nthreads    # N <= T: one row a chunk, the float64 sums over the rows
    acc = np.empty(w, F)
    for lo in range(0, n, chunk):
        acc[:] = 0
        for r in range(lo, min(n, lo + chunk)):
            for j in range(w):
                acc[j] += x[r, c0 + j, 0]
        for j in range(w):
            tot[j] += acc[j]
    for j in range(w):
        mean[c0 + j] = F(tot[j] / n)
    tot[:] = 0
    for lo in range(0, n, chunk):
        acc[:] = 0
        for r in range(lo, min(n, lo + chunk)):
            for j in range(w):
                d = x[r, c0 + j, 0] - mean[c0 + j]
                acc[j] = fma(d, d, acc[j])
        for j in range(w):
            tot[j] += acc[j]
    for j in range(w):
        var_sum[c0 + j] = F(tot[j])


@njit(**_JIT)
def _stats(x, eps, c0, c1, nthreads, mean, invstd, var, unbiased):
    """Mean, invstd (and the biased/unbiased variances when asked) of channels ``c0:c1``."""
    n, _, length = x.shape
    m = n * length
    var_sum = np.empty(x.shape[1], F)
    if length == 1:
        _row_stats(x, c0, c1, nthreads, mean, var_sum)
    else:
        _seq_stats(x, c0, c1, mean, var_sum)
    for c in range(c0, c1):
        v = var_sum[c] / F(m)
        if v != 0 or eps != 0:
            invstd[c] = F(1.0 / np.sqrt(D(v) + eps))
        else:
            invstd[c] = F(0)
        if var.size:
            var[c] = v
            unbiased[c] = var_sum[c] / F(m - 1)


# ---------------------------------------------------------------- outputs
@njit(**_JIT)
def _affine_out(x, mean, invstd, w, b, out, c0, c1):
    """``out = fma(x, alpha, beta)``, ``alpha = invstd * w``, ``beta = fma(-mean, alpha, b)``."""
    n, _, length = x.shape
    for c in range(c0, c1):
        alpha = invstd[c] * w[c]
        beta = fma(-mean[c], alpha, b[c])
        for i in range(n):
            for k in range(length):
                out[i, c, k] = fma(x[i, c, k], alpha, beta)


def forward(x, w, b, eps: float, out, mean, var, unbiased=None, invstd=None) -> None:
    """Train mode: ``out`` the normalised, scaled and shifted ``x``; ``mean``, ``var`` (biased),
    ``unbiased`` and ``invstd`` (C,) receive the batch statistics (ATen's ``save_mean`` and
    ``save_invstd`` are ``mean`` and ``invstd``). ``w``/``b`` are ones/zeros when absent."""
    invstd = np.empty(x.shape[1], F) if invstd is None else invstd
    unbiased = np.empty(x.shape[1], F) if unbiased is None else unbiased
    parallel_ranges(_forward, x.shape[1], x.size,
                    lambda first, lo, hi: (x, w, b, eps, out, mean, invstd, var, unbiased, threads(), lo, hi), True)


@njit(**_JIT)
def _forward(x, w, b, eps, out, mean, invstd, var, unbiased, nthreads, c0, c1):
    step = c1 - c0 if x.shape[2] == 1 else 2 * LANES  # L > 1: 16 channels' stats, then their output
    for lo in range(c0, c1, step):                     # while their values are cached
        hi = min(c1, lo + step)
        _stats(x, eps, lo, hi, nthreads, mean, invstd, var, unbiased)
        _affine_out(x, mean, invstd, w, b, out, lo, hi)


def eval_forward(x, running_mean, running_var, w, b, eps: float, out) -> None:
    """Eval mode: ``out`` from the running statistics (``invstd`` in float32, as ATen's forward)."""
    invstd = (F(1) / np.sqrt(running_var + F(eps))).astype(F)
    parallel_ranges(_affine_out, x.shape[1], x.size,
                    lambda first, lo, hi: (x, running_mean, invstd, w, b, out, lo, hi), True)


# ---------------------------------------------------------------- gradients
@njit(**_JIT)
def _row_sums(gr, xr, mu, acc_s, acc_p):
    """``reduce_all(g row)`` and ``map2_reduce_all((x - mu) * g row)`` of one row in ATen's eight lanes."""
    length = xr.shape[0]
    if length < LANES:
        s = gr[0]
        p = (xr[0] - mu) * gr[0]
        for k in range(1, length):
            s += gr[k]
            p += (xr[k] - mu) * gr[k]
        return s, p
    for j in range(LANES):
        acc_s[j] = gr[j]
        acc_p[j] = (xr[j] - mu) * gr[j]
    body = length - length % LANES
    _lanes(gr, xr, mu, body, acc_s, acc_p)
    for k in range(body, length):                    # the partial last vector: its products fused
        acc_s[k - body] += gr[k]
        acc_p[k - body] = fma(xr[k] - mu, gr[k], acc_p[k - body])
    return (((acc_s[0] + acc_s[4]) + (acc_s[2] + acc_s[6])) + ((acc_s[1] + acc_s[5]) + (acc_s[3] + acc_s[7])),
            ((acc_p[0] + acc_p[4]) + (acc_p[2] + acc_p[6])) + ((acc_p[1] + acc_p[5]) + (acc_p[3] + acc_p[7])))


@njit(**_JIT)
def _reduce8(a, o):
    """ATen's ``vec_reduce_all`` of the eight lanes ``a[o:o + 8]``."""
    return ((a[o] + a[o + 4]) + (a[o + 2] + a[o + 6])) + ((a[o + 1] + a[o + 5]) + (a[o + 3] + a[o + 7]))


@njit(**_JIT)
def _partial_rows_sums(gf, xf, mean, n, channels, length, c0, c1, gsum, dotp):
    """``_sums`` for rows of eight or more values with a partial last vector: four samples' rows'
    whole vectors at a time (``_lanes4``), then each row's last values added into its first lanes
    (the products fused), reduced, added in float64 in sample order."""
    lanes = np.empty(16 * 4, F)
    body = length - length % LANES
    stride = channels * length
    for c in range(c0, c1):
        s = 0.0
        p = 0.0
        mu = mean[c]
        i = 0
        while i < n:
            rows = 4 if i + 4 <= n else 1
            base = (i * channels + c) * length
            if rows == 4:
                _lanes4(gf, xf, mu, base, stride, body, lanes)
            else:
                _lanes1(gf, xf, mu, base, stride, body, lanes)
            for r in range(rows):
                o = 16 * r
                at = base + r * stride
                for k in range(body, length):
                    gv = gf[at + k]
                    lanes[o + k - body] += gv
                    lanes[o + LANES + k - body] = fma(xf[at + k] - mu, gv, lanes[o + LANES + k - body])
                s += _reduce8(lanes, o)
                p += _reduce8(lanes, o + LANES)
            i += rows
        gsum[c] = s
        dotp[c] = p


@njit(**_JIT)
def _whole_row_sums(gf, xf, mean, n, channels, length, c0, c1, gsum, dotp):
    """``_sums`` for rows of whole vectors (``L`` a multiple of eight): four samples' rows at a time,
    their results added in float64 in sample order."""
    res = np.empty(2 * 4, F)
    for c in range(c0, c1):
        s = 0.0
        p = 0.0
        mu = mean[c]
        i = 0
        while i + 4 <= n:
            _rows4(gf, xf, mu, (i * channels + c) * length, channels * length, length, res)
            for r in range(4):
                s += res[2 * r]
                p += res[2 * r + 1]
            i += 4
        while i < n:
            _rows1(gf, xf, mu, (i * channels + c) * length, channels * length, length, res)
            s += res[0]
            p += res[1]
            i += 1
        gsum[c] = s
        dotp[c] = p


@njit(**_JIT)
def _sums(g, x, mean, c0, c1, nthreads, gsum, dotp):
    """``gsum = sum(g)`` and ``dotp = sum((x - mean) g)`` per channel ``c0:c1`` in ATen's order;
    float64 for ``L > 1`` (ATen keeps them so), float32-rounded for ``L == 1``."""
    n, channels, length = x.shape
    if length == 1:
        w = c1 - c0
        acc = np.empty(w, F)
        acc2 = np.empty(w, F)
        tot = np.zeros(w, D)
        tot2 = np.zeros(w, D)
        chunk = (n + nthreads - 1) // nthreads
        for lo in range(0, n, chunk):
            acc[:] = 0
            acc2[:] = 0
            for r in range(lo, min(n, lo + chunk)):
                for j in range(w):
                    gv = g[r, c0 + j, 0]
                    acc[j] += gv
                    acc2[j] = fma(x[r, c0 + j, 0] - mean[c0 + j], gv, acc2[j])
            for j in range(w):
                tot[j] += acc[j]
                tot2[j] += acc2[j]
        for j in range(w):
            gsum[c0 + j] = F(tot[j])
            dotp[c0 + j] = F(tot2[j])
        return
    if length % LANES == 0:                           # no partial last vector: whole rows in registers
        _whole_row_sums(g.reshape(g.size), x.reshape(x.size), mean, n, channels, length, c0, c1, gsum, dotp)
        return
    if length > LANES:
        _partial_rows_sums(g.reshape(g.size), x.reshape(x.size), mean, n, channels, length, c0, c1, gsum, dotp)
        return
    acc_s = np.empty(LANES, F)
    acc_p = np.empty(LANES, F)
    for c in range(c0, c1):
        s = 0.0
        p = 0.0
        mu = mean[c]
        for i in range(n):
            rs, rp = _row_sums(g[i, c], x[i, c], mu, acc_s, acc_p)
            s += rs
            p += rp
        gsum[c] = s
        dotp[c] = p


def backward(g, x, w, eps: float, gx, gw, gb, mean=None, invstd=None) -> None:
    """Train mode: ``gx``, ``gw = sum(g xhat)``, ``gb = sum(g)`` per channel (``w`` ones when the
    layer has none), from the forward's ``mean`` and ``invstd`` when given (as ATen's backward reads
    its saved ones), else recomputed (the same floats)."""
    c = x.shape[1]
    if mean is None:
        mean, invstd = np.empty(c, F), np.empty(c, F)
        parallel_ranges(_stats_only, c, x.size, lambda first, lo, hi: (x, eps, mean, invstd, threads(), lo, hi), True)
    parallel_ranges(_backward, c, x.size, lambda first, lo, hi: (g, x, w, gx, gw, gb, mean, invstd, threads(), lo, hi),
                    True)


@njit(**_JIT)
def _stats_only(x, eps, mean, invstd, nthreads, c0, c1):
    """``_stats``' mean and invstd of channels ``c0:c1`` for a backward not given the forward's: a
    kernel of its own, so that ``_backward`` does not link ``_stats`` and compile it again inside itself."""
    none = np.empty(0, F)
    _stats(x, eps, c0, c1, nthreads, mean, invstd, none, none)


@njit(**_JIT)
def _backward(g, x, w, gx, gw, gb, mean, invstd, nthreads, c0, c1):
    n, channels, length = x.shape
    m = n * length
    gsum = np.empty(channels, D)
    dotp = np.empty(channels, D)
    if length == 1:
        _sums(g, x, mean, c0, c1, nthreads, gsum, dotp)
    tail = channels - channels % LANES          # L == 1: ATen's masked last vector rounds the product
    for c in range(c0, c1):
        if length > 1:                          # the channel's sums, then its gx while its rows are cached
            _sums(g, x, mean, c, c + 1, nthreads, gsum, dotp)
        mu = mean[c]
        rs = invstd[c]
        k = F(dotp[c]) * rs * rs / F(m)
        gm = F(gsum[c] / m) if length > 1 else F(gsum[c]) / F(m)
        wc = w[c]
        fused = length > 1 or c < tail
        for i in range(n):
            for kk in range(length):
                t = g[i, c, kk] - gm
                xm = x[i, c, kk] - mu
                if fused:
                    t = fma(-xm, k, t)
                else:
                    t = t - xm * k
                gx[i, c, kk] = t * rs * wc
        gw[c] = dotp[c] * rs
        gb[c] = gsum[c]


def eval_backward(g, x, running_mean, running_var, w, eps: float, gx, gw, gb) -> None:
    """Eval mode: ``gx = (g * invstd) * w`` (``gx`` may be None), ``gw = sum((x - running_mean) g)
    * invstd``, ``gb = sum(g)`` (``gw``/``gb`` may be None)."""
    c = x.shape[1]
    invstd = (1 / np.sqrt(running_var.astype(D) + eps)).astype(F)
    none = np.empty((0, 0, 0), F)
    gx = none if gx is None else gx
    gw_, gb_ = (np.empty(c, F) if a is None else a for a in (gw, gb))
    parallel_ranges(_eval_backward, c, x.size,
                    lambda first, lo, hi: (g, x, running_mean, invstd, w, gx, gw_, gb_, gw is not None or gb is not None,
                                           threads(), lo, hi), True)


@njit(**_JIT)
def _eval_backward(g, x, mean, invstd, w, gx, gw, gb, want_sums, nthreads, c0, c1):
    n, channels, length = x.shape
    if want_sums:
        gsum = np.empty(channels, D)
        dotp = np.empty(channels, D)
        _sums(g, x, mean, c0, c1, nthreads, gsum, dotp)
        for c in range(c0, c1):
            gw[c] = dotp[c] * invstd[c]
            gb[c] = gsum[c]
    if gx.size:
        for c in range(c0, c1):
            rs = invstd[c]
            wc = w[c]
            for i in range(n):
                for k in range(length):
                    gx[i, c, k] = g[i, c, k] * rs * wc
