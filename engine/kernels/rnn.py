"""The per-step LSTM and GRU cell loops of the whole-layer scans (``nn/_fused_rnn.py``), forward
and backward through time.

numpy runs a step's cell as ~12 passes over the (B, 4H) gates (the logistic alone is four, and
every product a temporary); the GEMM of a step is as fast as PyTorch's, so those passes were the
gap on the LSTM LM step (bench/README.md, issue 17 session 5). Here one pass reads the step's GEMM
result and input projection and writes the activations, the states and the output. The layouts
are the scans' own: ``ws`` rows hold i f g o c tanh(c) (LSTM) or r z n (W_hn h + b_hn) (GRU).
Where our GEMM (``sgemm.py``) takes the step products, ``lstm_layer``/``gru_layer`` and their
backwards run every step of a layer-direction in one call, each step product on MKL's GEMM where
it takes it (``gemm.loop_gemm``: where MKL runs its AVX-512 code; on an AVX-512 Xeon at two threads
20x200x800 27 us, ours 51; on an AMD EPYC ours, 57 us against MKL's 74 at one thread) (a step's Python calls cost ~6 us of
~45). Each step reads the input projection through a row index, so a projection computed once
per distinct input row (``distinct_rows``) serves every repeat of it.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .blas_call import sgemm as _mkl_sgemm
from .fastmath import exp32, tanh32
from .sgemm import _sgemm

__all__ = ["lstm_cell", "lstm_cell_backward", "lstm_layer", "lstm_layer_backward", "gate_sums", "gru_cell", "gru_cell_backward",
           "gru_layer", "gru_layer_backward", "distinct_rows"]

F = np.float32
U64 = np.uint64
_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT)
def _sig(x):
    return F(1.0) / (F(1.0) + exp32(-x))


@njit(**_JIT)
def _act(a, xw, bias, out, lo, hi, tanh):
    """``out[k] = sigmoid or tanh(a[k] + xw[k] + bias[k])`` for k in [lo, hi): one read per input,
    one write, so the loop vectorises (over slices from 0: a ``range(lo, hi)`` loop ran 1.7x slower)."""
    a, xw, bias, out = a[lo:hi], xw[lo:hi], bias[lo:hi], out[lo:hi]
    if tanh:
        for k in range(out.shape[0]):
            out[k] = tanh32(a[k] + xw[k] + bias[k])
    else:
        for k in range(out.shape[0]):
            out[k] = _sig(a[k] + xw[k] + bias[k])


@njit(**_JIT)
def lstm_cell(a, xw, rows, bias, c, ws, h):
    """One step: ``a = h_{t-1} W_hhᵀ``, the input projection of batch row b ``xw[rows[b]]`` and
    ``bias`` (b_ih + b_hh, (4H,)) give the gates;
    writes i f g o, c_t and tanh c_t into ``ws`` (B, 6H) and h_t into ``h``; ``c`` holds c_{t-1}
    and is overwritten with c_t (a contiguous array of its own, so the state loop vectorises)."""
    B, H = c.shape
    for b in range(B):
        ar, xr, wr, cr, hr = a[b], xw[rows[b]], ws[b], c[b], h[b]
        _act(ar, xr, bias, wr, 0, 2 * H, False)
        _act(ar, xr, bias, wr, 2 * H, 3 * H, True)
        _act(ar, xr, bias, wr, 3 * H, 4 * H, False)
        i, f, g, o, cs, tc = wr[:H], wr[H:2 * H], wr[2 * H:3 * H], wr[3 * H:4 * H], wr[4 * H:5 * H], wr[5 * H:]
        for j in range(H):
            cj = f[j] * cr[j] + i[j] * g[j]
            t = tanh32(cj)
            cr[j], cs[j], tc[j], hr[j] = cj, cj, t, o[j] * t


@njit(**_JIT)
def lstm_cell_backward(gy, dh, dc, ws, c, d, db, rows, dsum):
    """One step back: ``gy + dh`` is dL/dh_t (output and recurrent parts), ``dc`` dL/dc_t, replaced
    by dL/dc_{t-1}; writes the gate pre-activation gradients into ``d`` (B, 4H) and adds them over
    the batch into ``db`` (4H,), the bias gradient, and row b into ``dsum[rows[b]]``, each unless
    empty (the input projection's distinct rows, ``distinct_rows``); ``c`` is c_{t-1}."""
    B, H = dc.shape
    for b in range(B):
        wr, dr, dcr, ghr, dhr, cr = ws[b], d[b], dc[b], gy[b], dh[b], c[b]
        i, f, g, o, tc = wr[:H], wr[H:2 * H], wr[2 * H:3 * H], wr[3 * H:4 * H], wr[5 * H:]
        di, df, dg, do = dr[:H], dr[H:2 * H], dr[2 * H:3 * H], dr[3 * H:]
        for j in range(H):                      # per-row slices from 0: the loop vectorises
            gh = ghr[j] + dhr[j]
            dct = dcr[j] + gh * o[j] * (F(1.0) - tc[j] * tc[j])
            di[j] = dct * g[j] * (i[j] * (F(1.0) - i[j]))
            df[j] = dct * cr[j] * (f[j] * (F(1.0) - f[j]))
            dg[j] = dct * i[j] * (F(1.0) - g[j] * g[j])
            do[j] = gh * tc[j] * (o[j] * (F(1.0) - o[j]))
            dcr[j] = dct * f[j]
        if db.shape[0]:
            for k in range(4 * H):
                db[k] += dr[k]
        if dsum.shape[0]:
            sr = dsum[rows[b]]
            for k in range(4 * H):
                sr[k] += dr[k]


@njit(**_JIT)
def _product(x, w, out, mkl):
    """``out = x @ w[:, :n]`` (``w`` padded by ``sgemm.pad_columns``, ``n`` = out's columns): MKL's GEMM
    where ``mkl`` (``gemm.loop_gemm``'s address, thread-local setting, threads) names it, else ours."""
    if mkl[0]:
        n = out.shape[1]
        # CBLAS's 111: neither operand transposed; leading dimensions in float32 elements
        _mkl_sgemm(mkl[0], 111, 111, x.shape[0], n, x.shape[1], x, x.strides[0] // 4, w, w.shape[1], 0.0,
                   out, n, mkl[1], mkl[2])
    else:
        _sgemm(x, w, out)


@njit(**_JIT)
def lstm_layer(xw, rows, bias, h0, c, w_t, y, ws, reverse, mkl, lo, hi):
    """The forward recurrence of one layer-direction for batch rows ``lo:hi``, every step ``h_{t-1} @ w_t``
    (``_product``, ``w_t`` = W_hhᵀ padded by ``sgemm.pad_columns``) and ``lstm_cell``: step t reads ``xw``
    through ``rows[t]`` (B,) and writes ``ws[t]``, ``y[t]`` and ``c``. One compiled loop: the per-step
    Python calls cost ~6 us a step against a ~50 us step. A batch row's recurrence reads no other row,
    so the rows' parts may run at once (``_fused_rnn._batch_cuts``)."""
    T = ws.shape[0]
    a = np.empty((hi - lo, 4 * c.shape[1]), np.float32)
    h, cs = h0[lo:hi], c[lo:hi]
    for s in range(T):
        t = T - 1 - s if reverse else s
        _product(h, w_t, a, mkl)
        lstm_cell(a, xw, rows[t][lo:hi], bias, cs, ws[t][lo:hi], y[t][lo:hi])
        h = y[t][lo:hi]


@njit(**_JIT)
def lstm_layer_backward(gy, dh, dc, c0, w, ws, d, db, rows, dsum, reverse, needs_dh0, mkl, lo, hi):
    """The backward through time of ``lstm_layer`` for batch rows ``lo:hi``: ``lstm_cell_backward`` and
    ``d_t @ w`` (``_product``, ``w`` = W_hh padded) a step, last step first; ``dh`` (zeros) and ``dc``
    (dL/dc_T) end as dL/dh0 and dL/dc0; without ``needs_dh0`` the last GEMM is skipped. ``db`` and
    ``dsum`` are summed into only where not empty (parts at once leave them to ``gate_sums``)."""
    T, H = ws.shape[0], c0.shape[1]
    dhp, dcp = dh[lo:hi], dc[lo:hi]
    for s in range(T):
        t = s if reverse else T - 1 - s
        p = t + 1 if reverse else t - 1
        c = c0[lo:hi] if p < 0 or p >= T else ws[p][lo:hi, 4 * H:5 * H]
        lstm_cell_backward(gy[t][lo:hi], dhp, dcp, ws[t][lo:hi], c, d[t][lo:hi], db, rows[t][lo:hi], dsum)
        if s < T - 1 or needs_dh0:
            _product(d[t][lo:hi], w, dhp, mkl)          # the step kernel has read dh_t


@njit(**_JIT)
def gate_sums(d, rows, db, dsum, reverse, lo, hi):
    """Columns ``lo:hi`` of a layer backward's sums after its parts ran at once: ``d`` (T, B, G) added
    into ``db`` (G,) and row (t, b) into ``dsum[rows[t, b]]``, each unless empty, in the
    order the whole loop adds them (last step first, rows in order), so the floats are the same."""
    T, B = rows.shape
    for s in range(T):
        t = s if reverse else T - 1 - s
        for b in range(B):
            dr = d[t, b, lo:hi]
            if db.shape[0]:
                acc = db[lo:hi]
                for k in range(hi - lo):
                    acc[k] += dr[k]
            if dsum.shape[0]:
                sr = dsum[rows[t, b], lo:hi]
                for k in range(hi - lo):
                    sr[k] += dr[k]


@njit(**_JIT)
def _row_hash(r):
    """A hash of a row's bits: a sum of independent terms (LLVM vectorises it), then mixed."""
    h = U64(0)
    for k in range(r.shape[0]):
        h += (U64(r[k]) ^ (U64(k) * U64(0x9E3779B97F4A7C15))) * U64(0xBF58476D1CE4E5B9)
    h ^= h >> U64(31)
    h *= U64(0x94D049BB133111EB)
    return h ^ (h >> U64(29))


@njit(**_JIT)
def _same(p, q):
    """Whether two rows hold the same bits (no early exit: the loop vectorises)."""
    d = p[0] ^ p[0]
    for k in range(p.shape[0]):
        d |= p[k] ^ q[k]
    return d == 0


@njit(**_JIT)
def distinct_rows(x, inverse, first):
    """The distinct rows of ``x`` (N, K), compared as bits (an ``(N, K)`` uint32 view): writes
    ``inverse[n]``, the id of row n's value, and ``first[u]``, the first row holding value u, in
    order of first appearance; returns their count. An open-addressing table on a hash of the
    whole row, each hit checked against the row it names: 20-30 us for 700 x 200."""
    n = x.shape[0]
    size = 2
    while size < 2 * n:
        size *= 2
    table = np.full(size, -1, np.int64)
    count = 0
    for i in range(n):
        slot = np.int64(_row_hash(x[i]) & U64(size - 1))
        while True:
            u = table[slot]
            if u < 0:
                table[slot], first[count], inverse[i] = count, i, count
                count += 1
                break
            if _same(x[first[u]], x[i]):
                inverse[i] = u
                break
            slot = (slot + 1) & (size - 1)
    return count


@njit(**_JIT)
def gru_cell(gi, rows, gh, b_hh, hx, ws, h):
    """One step: the input projection and b_ih of batch row b ``gi[rows[b]]``, ``gh = h_{t-1} W_hhᵀ``
    and ``b_hh`` (3H,) give r z n; writes r z n and the n block of the hidden projection into
    ``ws`` (B, 4H), h_t into ``h``."""
    B, H = hx.shape
    for b in range(B):
        ir, wr, xr, out = gi[rows[b]], ws[b], hx[b], h[b]
        _act(ir, gh[b], b_hh, wr, 0, 2 * H, False)
        r, z, n, ghn = wr[:H], wr[H:2 * H], wr[2 * H:3 * H], wr[3 * H:]
        hn, inn, b_hn = gh[b, 2 * H:], ir[2 * H:], b_hh[2 * H:]
        for j in range(H):
            ghn[j] = hn[j] + b_hn[j]
        for j in range(H):
            n[j] = tanh32(r[j] * ghn[j] + inn[j])
        for j in range(H):
            out[j] = (xr[j] - n[j]) * z[j] + n[j]


@njit(**_JIT)
def gru_cell_backward(gy, dh, dhz, ws, hx, di, dg, rows, dsum):
    """One step back: ``gy + dh + dhz`` is dL/dh_t (``dhz``, the previous call's dL/dh_t z, is
    replaced by this step's); writes the gradients of the input projection into ``di`` (row b
    also added into ``dsum[rows[b]]`` unless ``dsum`` is empty) and of the hidden projection into
    ``dg`` (B, 3H); ``hx`` is h_{t-1}."""
    B, H = hx.shape
    for b in range(B):
        wr, gyr, dhr, dzr, hxr = ws[b], gy[b], dh[b], dhz[b], hx[b]
        r, z, n, ghn = wr[:H], wr[H:2 * H], wr[2 * H:3 * H], wr[3 * H:]
        ir, iz, in_, hr, hz, hn = di[b, :H], di[b, H:2 * H], di[b, 2 * H:], dg[b, :H], dg[b, H:2 * H], dg[b, 2 * H:]
        for j in range(H):                      # per-row slices from 0: the loop vectorises
            g = gyr[j] + dhr[j] + dzr[j]
            dn = g * (F(1.0) - z[j]) * (F(1.0) - n[j] * n[j])
            dz = g * (hxr[j] - n[j]) * (z[j] * (F(1.0) - z[j]))
            dr = dn * ghn[j] * (r[j] * (F(1.0) - r[j]))
            ir[j], iz[j], in_[j] = dr, dz, dn
            hr[j], hz[j], hn[j] = dr, dz, dn * r[j]
            dzr[j] = g * z[j]
        if dsum.shape[0]:
            sr, dr_ = dsum[rows[b]], di[b]
            for k in range(3 * H):
                sr[k] += dr_[k]


@njit(**_JIT)
def gru_layer(gi, rows, b_hh, h0, w_t, y, ws, reverse, mkl, lo, hi):
    """``lstm_layer`` for the GRU, batch rows ``lo:hi``: every step ``h_{t-1} @ w_t`` (``_product``, ``w_t`` =
    W_hhᵀ padded) and ``gru_cell``, which reads ``gi`` through ``rows[t]`` and writes ``ws[t]`` and ``y[t]``."""
    T = ws.shape[0]
    gh = np.empty((hi - lo, 3 * h0.shape[1]), np.float32)
    h = h0[lo:hi]
    for s in range(T):
        t = T - 1 - s if reverse else s
        _product(h, w_t, gh, mkl)
        gru_cell(gi, rows[t][lo:hi], gh, b_hh, h, ws[t][lo:hi], y[t][lo:hi])
        h = y[t][lo:hi]


@njit(**_JIT)
def gru_layer_backward(gy, dh, dhz, h0, w, y, ws, di, dg, rows, dsum, reverse, needs_dh0, mkl, lo, hi):
    """The backward through time of ``gru_layer`` for batch rows ``lo:hi``: ``gru_cell_backward`` and
    ``dg_t @ w`` (``_product``, ``w`` = W_hh padded) a step, last step first; ``dh + dhz`` ends as
    dL/dh0; without ``needs_dh0`` the last GEMM is skipped."""
    T = ws.shape[0]
    dhp, dzp = dh[lo:hi], dhz[lo:hi]
    for s in range(T):
        t = s if reverse else T - 1 - s
        p = t + 1 if reverse else t - 1
        hx = h0[lo:hi] if p < 0 or p >= T else y[p][lo:hi]
        gru_cell_backward(gy[t][lo:hi], dhp, dzp, ws[t][lo:hi], hx, di[t][lo:hi], dg[t][lo:hi], rows[t][lo:hi], dsum)
        if s < T - 1 or needs_dh0:
            _product(dg[t][lo:hi], w, dhp, mkl)
