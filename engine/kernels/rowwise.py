"""Row-wise loops over ``(rows, cols)`` float32 arrays: softmax and log_softmax forward and
backward, the scaled (optionally causal, or masked by an array) attention softmax in place, layer_norm forward and
backward, class-index cross-entropy from logits forward and backward, and class-index NLL (a
gather and its scatter, one pass each, after ``target_weights`` has checked the targets).

Each row is read once or twice while it sits in cache and written once; numpy's formulas make a
full-size temporary per step. softmax, log_softmax, their backwards and cross_entropy's forward are
PyTorch's float32 kernels bit for bit (Sleef's exp and log, ATen's lane order of the row sums: see
the section below), and so is layer_norm's forward (ATen's vectorised Welford moments, its fused
multiply-adds). The others' sums use ``reassoc`` (so LLVM vectorises them, as numpy's pairwise
sums are not sequential either); their elementwise arithmetic keeps IEEE order, and exp comes from
``fastmath.exp32`` (<= 2 ulp), so results agree with numpy's formulas within float32 rounding.
NaN and inf behave as there: a row's max is nan if any entry is, and ``inf - inf`` is nan.
"""
from __future__ import annotations


import numpy as np
from numba import njit

from .fastmath import _bits_to_f32, exp32, exp_sleef_u10, fma, log_sleef_u10
from .lanes import lane_loop, layer_norm_dots, layer_norm_grad_row, welford_lanes
from .row_masks import scale_first, scaled_max

__all__ = ["softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "attention_softmax", "attention_softmax_masked",
           "layer_norm", "layer_norm_backward", "layer_norm_backward_parts", "layer_norm_part_sums", "layer_norm_backward_chunks", "layer_norm_add_parts", "layer_norm_stats", "layer_norm_affine_grads_bfloat16", "log_softmax_inner", "log_softmax_backward_inner", "target_weights", "cross_entropy", "cross_entropy_backward", "nll_loss", "nll_loss_backward"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc"})


@njit(**_JIT)
def _row_max(bits, r, C):
    """The max of row ``r``'s first ``C`` entries, from ``bits``, the rows' float32 bits as int32
    (``x.view(np.int32)``, taken once per call: a view per row cost 18 of 61 us of log_softmax on
    2000 x 8). Compared as integers: a float's bits XOR its sign-spread low 31 bits order like the
    float (-0 just below +0, a nan with the sign bit clear above inf), and an integer max reduction
    vectorises where a float one with nan semantics does not (12 against 69 us on 700 x 256). A
    nan with the sign bit set is below every key: the callers' sum of ``exp(x - max)`` over the
    row is nan then, as for any nan."""
    top = np.int32(-2147483648)
    for c in range(C):
        k = bits[r, c]
        top = max(top, k ^ ((k >> 31) & np.int32(0x7FFFFFFF)))
    return _bits_to_f32(top ^ ((top >> 31) & np.int32(0x7FFFFFFF)))


# ATen's RowwiseMoments (moments_utils.h), which layer_norm's mean and 1/std come from: each of 8 lanes
# (a 256-bit vector of floats) runs Welford's update over its column of 16-vector chunks, the chunks
# merged through a binary cascade; the leftover columns run a scalar Welford, which then merges the 8
# lanes in order. The fused multiply-adds are where GCC contracts ATen's loops (found against PyTorch
# 2.13's native_layer_norm); no ``reassoc`` here, the order is the point.
# A row's merges are chains of dependent steps (the last, 8 lanes into one scalar, ~70 cycles), which
# ran one row at a time at the chains' latency: 51 of 54 us for 1024 rows of 128. ``_ROWS`` rows go
# through each merge together, the innermost loop over the rows (one vector op for eight rows, every
# row's arithmetic unchanged), as the cascade's counts and weights are the same for every row of a call:
# 1024 x 128 54 -> 27 us, 512 x 384 89 -> 41 (issue 17, session 31).
_EXACT_JIT = dict(cache=True, error_model="numpy", nogil=True)
_LANES, _CHUNK, _ROWS = 8, 16, 32


@njit(**_EXACT_JIT)
def _cascade_depth(C):
    """The levels of ATen's cascade for rows of ``C``: ``ceil(log2(chunks))``."""
    m = (C // _LANES + _CHUNK - 1) // _CHUNK
    depth = 0
    while (1 << depth) < m:
        depth += 1
    return depth


@njit(**_EXACT_JIT)
def _moment_scratch(C):
    """The per-call work space of ``_rows_mean_rstd`` for rows of ``C``: the cascade's counts, its levels'
    lanes of mean and of sum of squares for ``_ROWS`` rows, a chunk's lanes, the rows' running mean and
    sum of squares, and the weights ``1 / (j + 1)`` (as small as the rows need: 2 KB for 128 columns,
    where 64 levels' 128 KB, zeroed each call, cost a GPT d128 step at one thread 2%)."""
    inv = np.empty(_CHUNK, F)
    for j in range(_CHUNK):
        inv[j] = F(1.0) / F(j + 1)
    levels = max(_cascade_depth(C), 1)
    return (np.zeros(levels, np.int64), np.zeros((2, levels, _LANES, _ROWS), F), np.zeros((2, _LANES, _ROWS), F),
            np.zeros((2, _ROWS), F), inv)


@njit(**_EXACT_JIT, inline="always")
def _merge(s0, s1, s2, dst, k, m1_add, m2_add, nb):
    """``AddMomentsVec`` for ``nb`` rows: lanes ``m1_add``/``m2_add`` (lane, row) of ``k`` values merged
    into level ``dst``."""
    n = s0[dst] + k
    c = F(0.0) if n == 0 else F(k) / F(n)
    old = F(s0[dst])
    for lane in range(_LANES):
        for i in range(nb):
            delta = m1_add[lane, i] - s1[dst, lane, i]
            s1[dst, lane, i] = s1[dst, lane, i] + c * delta
            s2[dst, lane, i] = fma(delta, delta * c * old, s2[dst, lane, i] + m2_add[lane, i])
    s0[dst] = n


@njit(**_EXACT_JIT)
def _rows_mean_rstd(x, r0, nb, eps, mean, rstd, scratch):
    """Rows ``r0 .. r0 + nb - 1``'s (``nb <= _ROWS``) mean and ``1 / sqrt(biased var + eps)`` into
    ``mean``, ``rstd``, in ATen's float32 order (see above); ``scratch`` from ``_moment_scratch``; ``x``'s
    rows contiguous (the lanes load as vectors)."""
    s0, s, a, run, inv = scratch
    s1, s2, m1, m2 = s[0], s[1], run[0], run[1]
    C = x.shape[1]
    n = C // _LANES
    m = (n + _CHUNK - 1) // _CHUNK
    depth = _cascade_depth(C)
    for j in range(max(depth, 1)):
        s0[j] = 0
        s1[j] = 0
        s2[j] = 0
    for i in range(m):
        k = min(_CHUNK, n - i * _CHUNK)
        base = i * _CHUNK * _LANES
        for row in range(nb):
            w = welford_lanes(x[r0 + row], inv, base, k)   # the 8 lanes as one vector (lanes.py)
            for lane in range(_LANES):
                a[0, lane, row] = w[lane]
                a[1, lane, row] = w[_LANES + lane]
        _merge(s0, s1, s2, 0, k, a[0], a[1], nb)
        mask = i + 1
        j = 1
        while j < depth and (mask & 1) == 0:
            _merge(s0, s1, s2, j, s0[j - 1], s1[j - 1], s2[j - 1], nb)
            s0[j - 1] = 0
            s1[j - 1] = 0
            s2[j - 1] = 0
            mask >>= 1
            j += 1
    for j in range(1, depth):
        _merge(s0, s1, s2, 0, s0[j], s1[j], s2[j], nb)
    m1[:nb] = 0
    m2[:nb] = 0
    m0 = 0
    for c in range(n * _LANES, C):
        m0 += 1
        for row in range(nb):
            v = x[r0 + row, c]
            delta = v - m1[row]
            m1[row] = m1[row] + delta / F(m0)
            m2[row] = m2[row] + delta * (v - m1[row])
    for lane in range(_LANES):   # the scalar AddMoments, contracted both times
        total = m0 + n
        c = F(0.0) if total == 0 else F(n) / F(total)
        for row in range(nb):
            delta = s1[0, lane, row] - m1[row]
            m1[row] = fma(c, delta, m1[row])
            m2[row] = m2[row] + fma(delta * delta * c, F(m0), s2[0, lane, row])
        m0 = total
    for row in range(nb):
        mean[r0 + row] = m1[row]
        rstd[r0 + row] = F(1.0) / np.sqrt(max(m2[row] / F(C), F(0.0)) + eps)


# ---------------------------------------------------------------- softmax / log_softmax as ATen's
# PyTorch's float32 kernels over the last dim (SoftMaxKernel.cpp, LogSoftmaxKernelImpl.h, vec/functional):
# exp is Sleef's (``Vectorized::exp``), log_softmax's log of the sum Sleef's too, softmax multiplies by
# 1/sum; a row's sum keeps ``lanes`` partial sums (16 with AVX512, 8 with AVX2: ``fastmath.aten_lanes``)
# over the row's full vectors, adds its tail into the first lanes, then folds them pairwise (lane l with
# l + lanes/2, ...); a row shorter than ``lanes`` is summed in order. No ``reassoc`` here: these sums
# keep exactly that order, in one vector register (``lanes.lane_loop``).
_JIT_EXACT = dict(cache=True, error_model="numpy", nogil=True)


_vsum16, _vsum8, _vdot16, _vdot8 = (lane_loop(16, False), lane_loop(8, False), lane_loop(16, True),
                                    lane_loop(8, True))


@njit(**_JIT_EXACT)
def _seq_sum(a, C):
    """A row shorter than the lanes: summed in order. (Tested by the caller: an early return inside the
    lane sums kept their main loop from vectorising, 2x.)"""
    s = a[0]
    for c in range(1, C):
        s = s + a[c]
    return s


@njit(**_JIT_EXACT)
def _seq_dot(g, y, C):
    s = g[0] * y[0]
    for c in range(1, C):
        s = s + g[c] * y[c]
    return s










@njit(**_JIT_EXACT, inline="always")
def _lane_sum(a, C, lanes):
    """``vec::reduce_all`` of ``+`` over the row ``a``: ``lanes`` partial sums over the full vectors,
    the tail added into the first lanes, then lane l + lanes/2 into lane l, ... down to lane 0 (ATen's
    shuffles); a row shorter than ``lanes`` summed in order."""
    if C < lanes:
        return _seq_sum(a, C)
    return _vsum16(a, C) if lanes == 16 else _vsum8(a, C)


@njit(**_JIT_EXACT, inline="always")
def _lane_dot(g, y, C, lanes):
    """``vec::map2_reduce_all`` of ``g * y`` and ``+``: the full vectors' products added after rounding,
    the tail's fused into the sum (as GCC compiled ATen's loop)."""
    if C < lanes:
        return _seq_dot(g, y, C)
    return _vdot16(g, y, C) if lanes == 16 else _vdot8(g, y, C)


@njit(**_JIT_EXACT)
def softmax(x, out, lanes):
    """``out[r] = exp(x[r] - max) * (1 / sum)``. (Rows as 1-D views: the 2-D index arithmetic kept the
    sums from vectorising, 2x.)"""
    R, C = x.shape
    bits = x.view(np.int32)
    for r in range(R):
        m = _row_max(bits, r, C)
        xr, o = x[r], out[r]
        for c in range(C):
            o[c] = exp_sleef_u10(xr[c] - m)
        inv = F(1.0) / _lane_sum(o, C, lanes)
        for c in range(C):
            o[c] = o[c] * inv


@njit(**_JIT_EXACT)
def softmax_backward(g, y, out, lanes=16):
    """``out[r] = (g[r] - sum(g[r] y[r])) y[r]``; ``out`` may be ``g``."""
    R, C = g.shape
    for r in range(R):
        gr, yr, o = g[r], y[r], out[r]
        s = _lane_dot(gr, yr, C, lanes)
        for c in range(C):
            o[c] = (gr[c] - s) * yr[c]


@njit(**_JIT_EXACT)
def log_softmax(x, out, lanes):
    """``out[r] = (x[r] - max) - log(sum(exp(x[r] - max)))`` (``out`` holds the exps meanwhile). As ATen,
    the rows go in chunks: their maxes and sums first, then the chunk's logs in one loop (it vectorises:
    a log per row cost a sixth of the time on 4096 x 256), then the outputs."""
    R, C = x.shape
    bits = x.view(np.int32)
    chunk = 64
    mx = np.empty(chunk, np.float32)
    ls = np.empty(chunk, np.float32)
    for r0 in range(0, R, chunk):
        k = min(chunk, R - r0)
        for j in range(k):
            m = _row_max(bits, r0 + j, C)
            xr, o = x[r0 + j], out[r0 + j]
            for c in range(C):
                o[c] = exp_sleef_u10(xr[c] - m)
            mx[j] = m
            ls[j] = _lane_sum(o, C, lanes)
        for j in range(k):
            ls[j] = log_sleef_u10(ls[j])
        for j in range(k):
            xr, o = x[r0 + j], out[r0 + j]
            m, lj = mx[j], ls[j]
            for c in range(C):
                o[c] = (xr[c] - m) - lj


@njit(**_JIT_EXACT)
def log_softmax_backward(g, y, out, lanes):
    """``out[r] = g[r] - exp(y[r]) sum(g[r])`` (one FMA)."""
    R, C = g.shape
    for r in range(R):
        gr, yr, o = g[r], y[r], out[r]
        s = _lane_sum(gr, C, lanes)
        for c in range(C):
            o[c] = fma(-exp_sleef_u10(yr[c]), s, gr[c])


@njit(**_JIT)
def attention_softmax(s, L, scale, causal):
    """The attention weights from the scores ``s`` (rows of ``L`` queries stacked), in place:
    ``softmax(s scale)``, and with ``causal`` query ``i`` (row ``r % L``) sees keys ``j <= i``
    only (the others get 0) -- no mask array, no -inf fill, no pass over the masked half. The
    max and the normalisation (times ``1 / sum``, as ATen's softmax) run as 8-float vectors cut
    at the row's length (``row_masks``): numba's loops ran the causal rows' lengths through their
    scalar remainder; the exps keep numba's loop (``exp32``), the scale folded into it."""
    R, S = s.shape
    for r in range(R):
        n = min(r % L + 1, S) if causal else S
        row = s[r]
        m = scaled_max(row, n, scale)
        z = F(0.0)
        for j in range(n):
            e = exp32(row[j] * scale - m)
            row[j] = e
            z += e
        scale_first(row, n, F(1.0) / z)


@njit(**_JIT)
def attention_softmax_masked(s, heads, B, mask, scale):
    """The attention weights from the scores ``s`` (``N`` heads of ``(L, S)``), in place:
    ``softmax(s scale + mask)`` with a float ``mask`` of shape ``(A', B', L', S)``, each of its first
    three dims 1 (shared: a padding mask's heads and queries, a causal mask's batch) or the scores'
    (``heads[n]`` is head ``n``'s index ``a B + b`` among the scores' ``(A, B)`` heads), so no full-size
    ``s + mask`` is made. A row with nothing to attend (every score -inf) gives zeros."""
    N, L, S = s.shape
    for n in range(N):
        a, b = _mask_head(mask, heads[n], B)
        for i in range(L):
            row, m = s[n, i], mask[a, b, i if mask.shape[2] > 1 else 0]
            for j in range(S):
                row[j] = row[j] * scale + m[j]
            _softmax_in_place(row, S)


@njit(**_JIT)
def _mask_head(mask, head, B):
    """The mask's ``(a, b)`` for the scores' head ``head`` (``a B + b``), 0 along a shared dim."""
    return (head // B if mask.shape[0] > 1 else 0), (head % B if mask.shape[1] > 1 else 0)


@njit(**_JIT)
def _softmax_in_place(row, S):
    """``row[:S]`` replaced by its softmax (times ``1 / sum``, as ATen's); all -inf gives zeros. A key
    more than 87 below the row's max (a ``finfo.min`` mask entry) gets 0, not exp's subnormal: those
    took the loop 2x longer (the subnormal arithmetic's microcode), for weights under 1.2e-38."""
    m = scaled_max(row, S, F(1.0))
    if m == F(-np.inf):
        row[:S] = F(0.0)
        return
    z = F(0.0)
    for j in range(S):
        d = row[j] - m
        e = exp32(max(d, _FAR))
        e = e if d > _FAR else F(0.0)
        row[j] = e
        z += e
    scale_first(row, S, F(1.0) / z)


_FAR = F(-87.0)   # exp(-87) = 1.6e-38, just above float32's smallest normal


@njit(**_JIT)
def layer_norm(x, out, mean, rstd, w, b, eps):
    """``out[r] = (x[r] - mean) / sqrt(var + eps) * w + b`` (``w``/``b`` empty: not applied), rounded
    as ATen's kernel rounds; each row's mean and 1/std into ``mean``, ``rstd`` (ATen's forward keeps
    them for the backward too, which then skips the moments: the larger part of its time)."""
    R, C = x.shape
    has_w, has_b = w.shape[0] > 0, b.shape[0] > 0
    scratch = _moment_scratch(C)
    for r0 in range(0, R, _ROWS):
        r1 = min(R, r0 + _ROWS)
        _rows_mean_rstd(x, r0, r1 - r0, eps, mean, rstd, scratch)
        for r in range(r0, r1):
            mu, a = mean[r], rstd[r]
            if has_w and has_b:   # ATen's roundings: ``fma((x - mean) * rstd, w, b)``, ``fma(x - mean, rstd, b)``
                for c in range(C):
                    out[r, c] = fma((x[r, c] - mu) * a, w[c], b[c])
            elif has_b:
                for c in range(C):
                    out[r, c] = fma(x[r, c] - mu, a, b[c])
            elif has_w:
                for c in range(C):
                    out[r, c] = (x[r, c] - mu) * a * w[c]
            else:
                for c in range(C):
                    out[r, c] = (x[r, c] - mu) * a


_ln_dots_w, _ln_dots = layer_norm_dots(True), layer_norm_dots(False)


@njit(**_JIT_EXACT)
def _short_row_sums(g, x, w, has_w, sums):
    """``sums[r] = (ds, db)`` for rows shorter than the 8 lanes, summed in order (``_ln_dots``' sums)."""
    R, C = x.shape
    u = np.empty(C, F)
    for r in range(R):
        gr, xr = g[r], x[r]
        if has_w:
            for c in range(C):
                u[c] = gr[c] * xr[c]
            sums[r, 0], sums[r, 1] = _seq_dot(u, w, C), _seq_dot(gr, w, C)
        else:
            sums[r, 0], sums[r, 1] = _seq_dot(gr, xr, C), _seq_sum(gr, C)


@njit(**_JIT_EXACT, inline="always")
def _ln_grad_row(g, x, w, mean, rstd, gx, gw, gb, r, ds, db):
    """Row ``r``'s share of ``layer_norm_backward`` from its sums ``ds``, ``db``."""
    mu, a = mean[r], rstd[r]
    scale = F(1.0) / F(x.shape[1])
    b = fma(db, mu, -ds) * a * a * a * scale
    layer_norm_grad_row(g[r], x[r], w, gw, gb, gx[r], (a, -a * mu, b, fma(-b, mu, -(db * a * scale))), x.shape[1])


@njit(**_JIT_EXACT)
def layer_norm_backward(g, x, w, has_w, mean, rstd, gx, gw, gb):
    """layer_norm's three gradients as ATen's kernel rounds them (one thread), from the forward's
    ``mean`` and ``rstd`` per row: with ``a`` the 1/std and ``ds``, ``db`` the lane sums of ``g x w``
    and ``g w`` (of ``g x`` and ``g`` without a weight), ``gx = fma(b, x, a g w) + c``, ``b = fma(db,
    mean, -ds) a^3 / C``, ``c = fma(-b, mean, -db a / C)``; ``gw += fma(g, fma(a, x, -a mean), gw)`` and
    ``gb += g`` over rows into the caller's zeroed ``(C,)`` arrays (``w`` is ones when ``has_w`` is
    False). A row's sums and then its elementwise pass are ``lanes``' vector loops, the row in L1 for
    both. (ATen's layer-norm kernels are its AVX2 build's, no AVX512 registration: 8 lanes.) One loop
    per case: choosing the sums per row inside one loop made it 1.7x slower."""
    R, C = x.shape
    if C < 8:
        sums = np.empty((R, 2), F)
        _short_row_sums(g, x, w, has_w, sums)
        for r in range(R):
            _ln_grad_row(g, x, w, mean, rstd, gx, gw, gb, r, sums[r, 0], sums[r, 1])
    elif has_w:
        for r in range(R):
            ds, db = _ln_dots_w(g[r], x[r], w, C)
            _ln_grad_row(g, x, w, mean, rstd, gx, gw, gb, r, ds, db)
    else:
        for r in range(R):
            ds, db = _ln_dots(g[r], x[r], C)
            _ln_grad_row(g, x, w, mean, rstd, gx, gw, gb, r, ds, db)


@njit(**_JIT_EXACT)
def layer_norm_backward_parts(g, x, w, has_w, mean, rstd, gx, gw, gb, chunk):
    """``layer_norm_backward`` with the rows cut into parts of ``chunk`` (the last may be shorter), each
    part's weight and bias sums started from zero and then added into the caller's zeroed ``gw``, ``gb``
    in order: ATen's backward at ``n`` threads cuts its rows so (``parallel_for``'s ``ceil(R / n)``-row
    chunks, each thread summing into a buffer of its own, the buffers then added), so its floats
    differ from one thread's. One part (``chunk >= R``) is ``layer_norm_backward``'s floats. The parts
    one after another; ``layer_norm_backward_chunks`` runs them at once."""
    sums = layer_norm_part_sums(x.shape[0], x.shape[1], chunk)
    layer_norm_backward_chunks(g, x, w, has_w, mean, rstd, gx, sums, chunk, 0, sums.shape[0])
    layer_norm_add_parts(sums, gw, gb)


@njit(**_JIT_EXACT)
def layer_norm_part_sums(R, C, chunk):
    """The per-part weight and bias sums of ``layer_norm_backward_chunks``: ``(parts, 2, C + pad)``, each
    part's two rows ending at least a 64-byte line before the next part's start (two threads' sums on
    one line made the parts slower: session 29)."""
    return np.empty((-(-R // chunk), 2, C + 16), F)


@njit(**_JIT_EXACT)
def layer_norm_backward_chunks(g, x, w, has_w, mean, rstd, gx, sums, chunk, lo, hi):
    """Parts ``lo .. hi - 1`` (``chunk`` rows each) of ``layer_norm_backward_parts``: ``gx``, and part
    ``p``'s weight and bias sums from zero into ``sums[p, 0, :C]``, ``sums[p, 1, :C]``. Parts touch
    disjoint rows and sums, so ranges of them may run at once (``kernels.parallel_ranges``)."""
    R, C = x.shape
    for p in range(lo, hi):
        r0, r1 = p * chunk, min(R, (p + 1) * chunk)
        pw, pb = sums[p, 0, :C], sums[p, 1, :C]
        pw[:] = 0.0
        pb[:] = 0.0
        layer_norm_backward(g[r0:r1], x[r0:r1], w, has_w, mean[r0:r1], rstd[r0:r1], gx[r0:r1], pw, pb)


@njit(**_JIT_EXACT)
def layer_norm_add_parts(sums, gw, gb):
    """Each part's sums added into the zeroed ``gw``, ``gb`` in order (ATen's buffers' order)."""
    C = gw.shape[0]
    for p in range(sums.shape[0]):
        for c in range(C):
            gw[c] += sums[p, 0, c]
            gb[c] += sums[p, 1, c]


@njit(**_EXACT_JIT)
def layer_norm_stats(x, eps, mean, rstd):
    """Each row's mean and 1/std as layer_norm computes them (``native_layer_norm``'s saved statistics)."""
    scratch = _moment_scratch(x.shape[1])
    for r in range(0, x.shape[0], _ROWS):
        _rows_mean_rstd(x, r, min(_ROWS, x.shape[0] - r), eps, mean, rstd, scratch)


@njit(**_JIT_EXACT, inline="always")
def _round_bfloat16(v):
    """``v`` rounded to the nearest bfloat16 (ties to even), as a float32 (NaN stays NaN)."""
    if v != v:
        return v
    bits = np.array([v], F).view(np.uint32)[0]
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return np.array([bits], np.uint32).view(F)[0]


@njit(**_JIT_EXACT)
def layer_norm_affine_grads_bfloat16(g, x, mean, a, gw, gb):
    """A bfloat16 layer norm's weight and bias gradients as ATen accumulates them: row by row into
    bfloat16 buffers, ``gw = fma(g, fma(a, x, -a mean), gw)`` and ``gb = gb + g``, each step rounded;
    ``g``, ``x`` (R, C) float32 from bfloat16, ``mean``, ``a`` per row, ``gw``, ``gb`` zeroed (C,)."""
    R, C = x.shape
    for r in range(R):
        shift = -a[r] * mean[r]
        for c in range(C):
            gw[c] = _round_bfloat16(fma(g[r, c], fma(a[r], x[r, c], shift), gw[c]))
            gb[c] = _round_bfloat16(gb[c] + g[r, c])


# ---------------------------------------------------------------- cross-entropy from logits
# Row r's coefficients are a[c] = wt[r] (1 - ls) [c == t[r]] + ls/C w[c] (ls: label smoothing, w the
# class weights, ones when none; an ignored row has none); the loss is -sum_c a[c] logp[c] and its
# gradient (softmax A - a) g (A = sum_c a[c]). Neither loop makes a (rows, C) temporary: the forward
# reads a row once for its max and once for sum(exp), the backward writes the gradient in one pass.
@njit(**_JIT)
def target_weights(t, w, ignore, wt):
    """``wt[r] = w[t[r]]``, 0 where ``t[r] == ignore``; False (stop) at a target outside ``[0, C)``."""
    C = w.shape[0]
    for r in range(t.shape[0]):
        ti = t[r]
        if ti == ignore:
            wt[r] = F(0.0)
        elif 0 <= ti < C:
            wt[r] = w[ti]
        else:
            return False
    return True


@njit(**_JIT_EXACT)
def cross_entropy(x, t, wt, loss, lse, w, ignore, smooth, w_sum, lanes=16):
    """``loss[r] = -sum_c a[c] logp[c]`` with ``logp = (x - max) - log(sum(exp(x - max)))``, from
    the target term and ``sum_c w[c] (x[c] - max)`` (as PyTorch's, a class of weight 0 at -inf
    makes the smoothed loss nan); 0 for an ignored row. The rows' logs are taken after all sums,
    in one loop over rows that vectorises (a libm log per row was a third of the time at C = 8).
    exp, the sum's order and log are ``log_softmax``'s (ATen's), so without label smoothing the loss
    is PyTorch's ``nll_loss(log_softmax(x))`` bit for bit. ``lse[r]`` gets the row's log of its sum (0
    for an ignored row), which ``cross_entropy_backward`` reads instead of summing again."""
    R, C = x.shape
    bits = x.view(np.int32)
    picked = np.zeros(R, np.float32)    # x[t] - max, then the loss
    sw = np.zeros(R, np.float32)        # sum_c w[c] (x[c] - max), with label smoothing
    e = np.empty(C, np.float32)
    for r in range(R):
        ti = t[r]
        loss[r] = F(1.0)                # sum(exp(x - max)); log 1 = 0 keeps an ignored row's loss 0
        if ti == ignore:
            continue
        m = _row_max(bits, r, C)
        xr = x[r]
        for c in range(C):
            e[c] = exp_sleef_u10(xr[c] - m)
        if smooth != F(0.0):
            q = F(0.0)
            for c in range(C):
                q += w[c] * (xr[c] - m)
            sw[r] = q
        loss[r] = _lane_sum(e, C, lanes)
        picked[r] = xr[ti] - m
    keep = F(1.0) - smooth
    ls_c = smooth / F(C)
    for r in range(R):
        lg = log_sleef_u10(loss[r])
        lse[r] = lg
        if t[r] == ignore:   # +0.0 as ATen's; a kept row's is -0.0 where its log-probability is 0 (C = 1)
            loss[r] = F(0.0)
        else:
            loss[r] = -((wt[r] * keep) * (picked[r] - lg)) - ls_c * (sw[r] - lg * w_sum)


@njit(**_JIT_EXACT, inline="always")
def _smoothed_u(o, C, ti, u_t, s_r, w, ignore):
    """A row of the log-probabilities' gradient with label smoothing, as PyTorch's composite sums it (its two
    consumers' gradients added): ``(-s_r) w[c]`` from the smoothing term (``-input.sum`` or ``-(input w).sum``
    over the classes), plus nll_loss's ``u_t`` at the target; ``+0.0`` first, the nll gradient's zeros."""
    for c in range(C):
        o[c] = F(0.0) + (-s_r) * w[c]
    if ti != ignore:
        o[ti] = u_t + (-s_r) * w[ti]


@njit(**_JIT_EXACT)
def cross_entropy_backward(x, t, wt, gs, out, lse, gss, w, ignore, smooth, known, lanes=16):
    """The gradient of ``nll_loss(log_softmax(x))`` as PyTorch's two backwards compute it: nll_loss's
    ``u`` (``-(w[t] gs[r])`` at the target, zeros elsewhere), then log_softmax's ``u - exp(logp) sum(u)``
    with ``logp = (x - max) - lse`` as ``log_softmax`` makes it: bit for bit. ``lse`` holds the rows'
    logs of their sums where ``known`` (the forward's), else it is filled here (``log_softmax``'s exps,
    sum and log). A row's ``sum(u)`` is its one value (``+ 0``: a -0.0 target value sums to +0.0 in
    ATen's lanes); an ignored row's is 0, so its gradient is 0 (nan where its logits are). With label
    smoothing (``smooth``) PyTorch's composite's ``u`` (``_smoothed_u``: ``gss[r]`` the smoothing term's
    scaled gradient, 0 for an ignored row), summed in ``vec::reduce_all``'s lanes, then the same update."""
    R, C = x.shape
    bits = x.view(np.int32)
    for r in range(R):
        ti = t[r]
        m = _row_max(bits, r, C)
        xr, o = x[r], out[r]
        if not known:
            for c in range(C):
                o[c] = exp_sleef_u10(xr[c] - m)
            lse[r] = log_sleef_u10(_lane_sum(o, C, lanes))
        lg = lse[r]
        u = F(0.0) if ti == ignore else -(wt[r] * gs[r])
        if smooth != F(0.0):
            _smoothed_u(o, C, ti, u, gss[r], w, ignore)
            s = _lane_sum(o, C, lanes)
            for c in range(C):
                o[c] = fma(-exp_sleef_u10((xr[c] - m) - lg), s, o[c])
            continue
        s = u if C == 1 or ti == ignore else u + F(0.0)
        for c in range(C):
            o[c] = fma(-exp_sleef_u10((xr[c] - m) - lg), s, F(0.0))
        if ti != ignore:
            o[ti] = fma(-exp_sleef_u10((xr[ti] - m) - lg), s, u)


@njit(**_JIT)
def nll_loss(lp, t, wt, loss):
    """``loss[r] = -lp[r, t[r]] wt[r]``, 0 where ``wt[r]`` is (an ignored row, or a class of weight
    0: its -inf adds nothing), never -0.0; ``t`` checked by ``target_weights``."""
    for r in range(t.shape[0]):
        w = wt[r]
        loss[r] = -(lp[r, t[r]] * w) + F(0.0) if w != F(0.0) else F(0.0)


@njit(**_JIT)
def nll_loss_backward(t, wt, gs, out, ignore):
    """``out`` (zeros) gets ``-(wt[r] gs[r])`` at each kept row's target."""
    for r in range(t.shape[0]):
        ti = t[r]
        if ti != ignore:
            out[r, ti] = -(wt[r] * gs[r])


@njit(**_JIT_EXACT, inline="always")
def _inner_chunk(D, I, lanes):
    """ATen's block of inner positions for a softmax over a middle dim: as many as fill 128 KB of ``D``
    floats, a multiple of ``lanes``, at most ``I``."""
    return min(max(131072 // D // 4, lanes) // lanes * lanes, I)


@njit(**_JIT_EXACT)
def log_softmax_inner(x, out, lanes):
    """log_softmax over dim 1 of ``(outer, D, inner)``, as ATen's ``serial_vec_logsoftmax_range``: per block
    of inner positions the max (NaN never replaces it), the sum of ``exp(x - max)`` over ``D`` in order (Sleef's
    exp in the block's whole vectors of ``lanes``, libm's ``expf`` for its last ``size % lanes`` positions),
    Sleef's log, then ``(x - max) - log``."""
    O, D, I = x.shape
    chunk = _inner_chunk(D, I, lanes)
    mx = np.empty(chunk, F)
    sm = np.empty(chunk, F)
    for o in range(O):
        for k0 in range(0, I, chunk):
            size = min(chunk, I - k0)
            vec = size - size % lanes
            mx[:size] = -np.inf
            sm[:size] = 0.0
            for d in range(D):
                xd = x[o, d, k0:k0 + size]
                for i in range(size):
                    if xd[i] > mx[i]:
                        mx[i] = xd[i]
            for d in range(D):
                xd = x[o, d, k0:k0 + size]
                for i in range(vec):
                    sm[i] += exp_sleef_u10(xd[i] - mx[i])
                for i in range(vec, size):
                    sm[i] += np.exp(xd[i] - mx[i])
            for i in range(size):
                sm[i] = log_sleef_u10(sm[i])
            for d in range(D):
                xd, od = x[o, d, k0:k0 + size], out[o, d, k0:k0 + size]
                for i in range(size):
                    od[i] = (xd[i] - mx[i]) - sm[i]


@njit(**_JIT_EXACT)
def log_softmax_backward_inner(g, y, out, lanes):
    """``g - exp(y) sum(g)`` over dim 1 of ``(outer, D, inner)``, as ATen's ``_vec_log_softmax_backward``: the
    sums over ``D`` in order per inner position, one FMA each output, Sleef's exp in the block's whole
    vectors, libm's ``expf`` in its tail (``log_softmax_inner``'s blocks)."""
    O, D, I = g.shape
    chunk = _inner_chunk(D, I, lanes)
    sm = np.empty(chunk, F)
    for o in range(O):
        for k0 in range(0, I, chunk):
            size = min(chunk, I - k0)
            vec = size - size % lanes
            sm[:size] = 0.0
            for d in range(D):
                gd = g[o, d, k0:k0 + size]
                for i in range(size):
                    sm[i] += gd[i]
            for d in range(D):
                gd, yd, od = g[o, d, k0:k0 + size], y[o, d, k0:k0 + size], out[o, d, k0:k0 + size]
                for i in range(vec):
                    od[i] = fma(-exp_sleef_u10(yd[i]), sm[i], gd[i])
                for i in range(vec, size):
                    od[i] = fma(-np.exp(yd[i]), sm[i], gd[i])
