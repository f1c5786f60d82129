"""The LSTM and GRU cell nonlinearities as one op each (``lstm_cell``, ``gru_cell``), after the
matmuls: the composites were ~12 forward dispatches per time step and as many backward nodes.

``lstm_cell(gates, c)`` takes the summed gate pre-activations ``(B, 4H)`` (PyTorch's order i, f,
g, o) and returns ``[h', c']`` side by side ``(B, 2H)``; ``gru_cell(gi, gh, h)`` takes the input
and hidden projections ``(B, 3H)`` (r, z, n) and returns ``h'``. Plain backward is one fused op
per step (extra gradients as extra outputs); under ``create_graph`` the vjp is written in Tensor
ops, so double backward stays exact. Activations are recomputed from the inputs in backward.
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..base.pool import ranges
from ..kernels import gemm, gemms
from ..kernels.gemm import OWN_MIN_ROWS, loop_gemm
from ..base.grad_mode import is_grad_enabled
from ..core.dispatch import apply
from ..core.registry import Op
from ..core.tensor import Tensor
from ..autograd.engine import grad as _grad
from ..ops.movement import cat, stack
from ._fused_linear import linear

__all__ = ["lstm_cell", "gru_cell", "lstm_layer", "gru_layer"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_cols(g, x, k: int, n: int) -> list:
    """The ``n`` column blocks of width ``k`` of ``x (B, n*k)``."""
    return [g.op("Slice", x, g.const([i * k], "int64"), g.const([(i + 1) * k], "int64"), g.const([1], "int64"))
            for i in range(n)]


def _onnx_lstm_cell(g, gates, c):
    i, f, gg, o = _onnx_cols(g, gates, int(g.shape(c)[-1]), 4)
    c2 = g.op("Add", g.op("Mul", g.op("Sigmoid", f), c), g.op("Mul", g.op("Sigmoid", i), g.op("Tanh", gg)))
    return g.op("Concat", g.op("Mul", g.op("Sigmoid", o), g.op("Tanh", c2)), c2, axis=1)


def _onnx_gru_cell(g, gi, gh, hx):
    h = int(g.shape(hx)[-1])
    (ir, iz, inn), (hr, hz, hn) = _onnx_cols(g, gi, h, 3), _onnx_cols(g, gh, h, 3)
    r, z = g.op("Sigmoid", g.op("Add", ir, hr)), g.op("Sigmoid", g.op("Add", iz, hz))
    n = g.op("Tanh", g.op("Add", inn, g.op("Mul", r, hn)))
    return g.op("Add", n, g.op("Mul", z, g.op("Sub", hx, n)))


def _sig(xp, a):
    return 1 / (1 + xp.exp(-a))


# ---------------------------------------------------------------- LSTM
def _lstm_acts(xp, gates):
    h = gates.shape[-1] // 4
    return (_sig(xp, gates[:, :h]), _sig(xp, gates[:, h:2 * h]), xp.tanh(gates[:, 2 * h:3 * h]),
            _sig(xp, gates[:, 3 * h:]))


def _lstm_fwd(xp, gates, c):
    i, f, g, o = _lstm_acts(xp, gates)
    h = c.shape[-1]
    out = xp.empty((c.shape[0], 2 * h), gates.dtype)
    c2 = out[:, h:]
    xp.multiply(f, c, out=c2)
    c2 += i * g
    xp.multiply(o, xp.tanh(c2), out=out[:, :h])
    return out


def _lstm_bwd_fwd(xp, grad, gates, c):
    i, f, g, o = _lstm_acts(xp, gates)
    h = c.shape[-1]
    gh, gc = grad[:, :h], grad[:, h:]
    tc = xp.tanh(f * c + i * g)
    dc2 = gc + gh * o * (1 - tc * tc)
    d = xp.empty(gates.shape, gates.dtype)
    d[:, :h] = dc2 * g * i * (1 - i)
    d[:, h:2 * h] = dc2 * c * f * (1 - f)
    d[:, 2 * h:3 * h] = dc2 * i * (1 - g * g)
    d[:, 3 * h:] = gh * tc * o * (1 - o)
    return d, dc2 * f


def _lstm_vjp(grad, out, gates, c):
    if not is_grad_enabled():
        dgates, dc = apply(_lstm_bwd, grad, gates, c)
        return dgates, dc
    h = c.shape[-1]
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    gh, gc = grad[:, :h], grad[:, h:]
    tc = (f * c + i * g).tanh()
    dc2 = gc + gh * o * (1 - tc * tc)
    dgates = cat([dc2 * g * i * (1 - i), dc2 * c * f * (1 - f), dc2 * i * (1 - g * g), gh * tc * o * (1 - o)], -1)
    return dgates, dc2 * f


# ---------------------------------------------------------------- GRU
def _gru_acts(xp, gi, gh):
    h = gi.shape[-1] // 3
    r = _sig(xp, gi[:, :h] + gh[:, :h])
    z = _sig(xp, gi[:, h:2 * h] + gh[:, h:2 * h])
    n = xp.tanh(gi[:, 2 * h:] + r * gh[:, 2 * h:])
    return r, z, n


def _gru_fwd(xp, gi, gh, hx):
    r, z, n = _gru_acts(xp, gi, gh)
    return n + z * (hx - n)


def _gru_bwd_fwd(xp, grad, gi, gh, hx):
    r, z, n = _gru_acts(xp, gi, gh)
    h = hx.shape[-1]
    dn = grad * (1 - z) * (1 - n * n)
    dgi = xp.empty(gi.shape, gi.dtype)
    dgi[:, :h] = dn * gh[:, 2 * h:] * r * (1 - r)
    dgi[:, h:2 * h] = grad * (hx - n) * z * (1 - z)
    dgi[:, 2 * h:] = dn
    dgh = dgi.copy()
    dgh[:, 2 * h:] *= r
    return dgi, dgh, grad * z


def _gru_vjp(grad, out, gi, gh, hx):
    if not is_grad_enabled():
        return apply(_gru_bwd, grad, gi, gh, hx)
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    dn = grad * (1 - z) * (1 - n * n)
    dr = dn * h_n * r * (1 - r)
    dz = grad * (hx - n) * z * (1 - z)
    return cat([dr, dz, dn], -1), cat([dr, dz, dn * r], -1), grad * z


def _cost(per):
    return lambda shapes, out: per * math.prod(shapes[-1])


_lstm = Op("lstm_cell", _lstm_fwd, _lstm_vjp, promote="common", cost=_cost(20), onnx=_onnx_lstm_cell)
_lstm_bwd = Op("lstm_cell_backward", _lstm_bwd_fwd, None, n_extra=1)
_gru = Op("gru_cell", _gru_fwd, _gru_vjp, promote="common", cost=_cost(20), onnx=_onnx_gru_cell)
_gru_bwd = Op("gru_cell_backward", _gru_bwd_fwd, None, n_extra=2)


def lstm_cell(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """``(h', c')`` from the summed gate pre-activations ``(B, 4H)`` and the cell state ``(B, H)``."""
    hc = apply(_lstm, gates, c)
    h = c.shape[-1]
    return hc[:, :h], hc[:, h:]


def gru_cell(gi: Tensor, gh: Tensor, hx: Tensor) -> Tensor:
    """``h'`` from the input and hidden projections ``(B, 3H)`` and the state ``(B, H)``."""
    return apply(_gru, gi, gh, hx)


# ---------------------------------------------------------------- whole LSTM and GRU layers
# One layer-direction over the whole sequence: the input projection of every time step is one GEMM
# up front, the recurrence runs on arrays (one GEMM and a few in-place ufuncs per step), and the
# backward through time is one op whose input and weight gradients are one GEMM each at the end.
# A step's own products (h W_hhᵀ, d W_hh) are one call each (``kernels.gemm_here``), never split
# over the intra-op threads: ~3M multiply-adds (55-70 us) a step against a 20-80 us hand-off, and
# the pool's whole form runs the blocks one after another (two calls); through ``gemm`` at 2
# threads a step's product took 190-300 us against 56-66 (bench/README.md, issue 17 session 9).
# On cpu float32 that call is our own GEMM (``kernels/sgemm.py``) with the weight prepacked once
# per layer and direction (``kernels.prepack``), as oneDNN's RNN packs its weights.
# On cpu float32 a step's cell is one numba loop (``kernels/rnn.py``) after its GEMM, forward and
# backward, and where our GEMM takes the step products the whole recurrence is one compiled loop
# (no Python per step); the input projection and its weight gradient run once per distinct input
# row (an embedding's output repeats rows: ``_distinct``). Other dtypes, cupy and a checkout
# without numba run the numpy formula below.
# Two ops per layer, as ``max(dim)`` is two: ``lstm_scan``/``gru_scan`` (not differentiable) run
# the recurrence and also return what the backward reads (every step's activations, ``ws``);
# ``lstm``/``gru`` take both as inputs and are the differentiable result ``y``: the outputs
# (T, B, H), and for the LSTM ``c_n`` as row T. The backward reads ``y`` (h_{t-1}) through the
# saved output, so an in-place change of the result is caught as for any op.
def _sig_(xp, a):
    """The logistic function in place, four ufunc passes and no temporaries."""
    xp.negative(a, out=a)
    xp.exp(a, out=a)
    a += 1
    xp.reciprocal(a, out=a)
    return a


def _steps(T: int, reverse: bool) -> list:
    """(t, the step before t) in the order the recurrence runs; -1 or T marks the initial state."""
    return [(t, t + 1) for t in range(T - 1, -1, -1)] if reverse else [(t, t - 1) for t in range(T)]


def _prev(t: int, T: int, seq, first):
    return first if t < 0 or t >= T else seq[t]


def _w_hh_grad(xp, d, h0, y, T: int, reverse: bool):
    """``sum_t d_tᵀ h_{t-1}`` as two GEMMs: h_{t-1} is ``y`` shifted by one step, h0 at the start."""
    first, rest, shifted = (T - 1, slice(0, T - 1), slice(1, T)) if reverse else (0, slice(1, T), slice(0, T - 1))
    gw = gemm(xp, d[first].T, h0)
    if T > 1:
        gw += gemm(xp, d[rest].reshape(-1, d.shape[-1]).T, y[shifted].reshape(-1, h0.shape[-1]))
    return gw


def _input_grads(xp, d, x, w_ih, needs_x: bool, needs_w: bool, empty, distinct=None, dsum=None):
    """``(dx, dw_ih)`` from the gate gradients of every step, one GEMM each; with ``distinct``
    (``_distinct`` of x's rows) the weight gradient is ``dsumᵀ`` times the distinct rows, ``dsum``
    the gate gradients summed per distinct row."""
    flat = d.reshape(-1, d.shape[-1])
    rows_x = x.reshape(flat.shape[0], -1)
    w_terms = (flat.T, rows_x) if distinct is None else (dsum.T, rows_x[distinct[0]])
    if needs_x and needs_w:
        dx, dw = gemms(xp, (flat, w_ih), w_terms)
        return dx.reshape(x.shape), dw
    return (gemm(xp, flat, w_ih).reshape(x.shape) if needs_x else empty,
            gemm(xp, *w_terms) if needs_w else empty)


def _distinct(xp, rows):
    """``(first, inverse)`` of the distinct rows of ``rows`` (N, I) when at most 7/8 of them are
    distinct, else None: an embedding's output repeats a row for each repeated token (700 tokens
    of a 256-word vocabulary hold ~240 distinct rows), and a distinct row's projection and its
    weight-gradient terms are then computed once (``_input_proj``, ``_input_grads``)."""
    if not kernels.use(xp, rows) or rows.shape[0] < 2 or rows.shape[1] == 0:
        return None
    inverse, first = xp.empty(rows.shape[0], xp.int64), xp.empty(rows.shape[0], xp.int64)
    count = kernels.loops("rnn").distinct_rows(rows.view(xp.uint32), inverse, first)
    return (first[:count], inverse) if 8 * count <= 7 * rows.shape[0] else None


def _input_proj(xp, x, w_ih, distinct):
    """``(xw, rows)``: the input projection ``x W_ihᵀ`` of the distinct rows (every row without
    ``distinct``), (N', G), and for each time step the row of ``xw`` of each batch row, (T, B)."""
    T, B = x.shape[:2]
    flat = x.reshape(T * B, -1)
    if distinct is None:
        return gemm(xp, flat, w_ih.T), xp.arange(T * B).reshape(T, B)
    return gemm(xp, flat[distinct[0]], w_ih.T), distinct[1].reshape(T, B)


def _distinct_grads(xp, x, needs_w: bool, gates: int):
    """``(distinct, rows, dsum)`` for a backward through time: x's distinct rows where the weight
    gradient is wanted (``_distinct``), each step's rows of them (T, B), and the zeroed per-row
    sums of the gate gradients (empty without distinct rows)."""
    T, B = x.shape[:2]
    distinct = _distinct(xp, x.reshape(T * B, -1)) if needs_w else None
    rows = xp.arange(T * B).reshape(T, B) if distinct is None else distinct[1].reshape(T, B)
    return distinct, rows, xp.zeros((0 if distinct is None else len(distinct[0]), gates), x.dtype)


def _own_gemm_weight(xp, packed, rows: int):
    """The padded array of a ``kernels.prepack`` weight when our GEMM takes every product of a
    ``rows``-row state with it, as ``kernels.gemm_here`` would (the whole-layer loops call its
    kernel directly), else None."""
    if type(packed) is xp.ndarray or not OWN_MIN_ROWS <= rows <= kernels.loops("sgemm").MAX_ROWS:
        return None
    return packed.array


def _loop_gemm(packed, rows: int) -> tuple:
    """How the layer loops run their ``rows``-row step products with ``packed`` (``gemm.loop_gemm``)."""
    return loop_gemm(rows, packed.array.shape[0], packed.n)


def _batch_cuts(B: int):
    """The batch rows cut into one part per intra-op thread (int64 cuts, each part at least
    ``OWN_MIN_ROWS`` rows) where a layer loop's parts run at once as one OpenMP region
    (``kernels/regions.py``), else None. A batch row's recurrence reads no other row, so the parts
    need no hand-off between steps; MKL's two threads on one 20 x 200 x 800 step product wait for
    each other every step, and the cell loop ran on one of them."""
    n = min(kernels.threads(), B // OWN_MIN_ROWS)
    if n < 2 or not kernels.native() or kernels.loops("regions").parts(n) < 2:
        return None
    return np.array([lo for lo, _ in ranges(B, n)] + [B], np.int64)


def _layer_loop(xp, fn, args_with, packed, B: int):
    """``fn(*args_with(w, parts), mkl, lo, hi)``, a whole-layer loop of ``kernels/rnn.py`` over the B batch
    rows with ``w`` our GEMM's padded weight (``_own_gemm_weight``): the rows' parts at once (``_batch_cuts``),
    each step product on one thread, or all rows in one call. Returns None where our GEMM does not
    take the step products (nothing ran), else whether the parts ran."""
    cuts = _batch_cuts(B)
    if cuts is not None:
        small, large = int(np.diff(cuts).min()), int(np.diff(cuts).max())
        own = _own_gemm_weight(xp, packed, small)
        if own is not None and _own_gemm_weight(xp, packed, large) is not None:
            args = args_with(own, True)
            region = kernels.loops("regions").spans(fn, len(args) + 1)
            if region is not None:
                address, local, _ = _loop_gemm(packed, small)
                region(cuts, *args, (address, local, 1))
                return True
    own = _own_gemm_weight(xp, packed, B)
    if own is None:
        return None
    fn(*args_with(own, False), _loop_gemm(packed, B), 0, B)
    return False


# LSTM: ws (T, B, 6H) holds i f g o (activated), c_t and tanh c_t of every step
def _lstm_scan_fwd(xp, x, h0, c0, w_ih, w_hh, *b, reverse):
    T, B = x.shape[:2]
    H = h0.shape[-1]
    y = xp.empty((T + 1, B, H), x.dtype)
    ws = xp.empty((T, B, 6 * H), x.dtype)
    if kernels.use(xp, y):                    # the cell loop adds the biases (a pass over xw saved)
        xw, rows = _input_proj(xp, x, w_ih, _distinct(xp, x.reshape(T * B, -1)))
        bias = (b[0] + b[1]).astype(xw.dtype, copy=False) if b else xp.zeros((4 * H,), xw.dtype)
        return _lstm_scan_loop(xp, xw, rows, bias, h0, c0, w_hh, y, ws, reverse)
    xw = gemm(xp, x.reshape(T * B, -1), w_ih.T).reshape(T, B, 4 * H)
    if b:
        xw += b[0] + b[1]
    # tanh g = 2 sigmoid(2 g) - 1: the g block's pre-activation doubled (exactly: a power of two) lets
    # one logistic pass cover all four gates; W_hhᵀ contiguous makes the per-step GEMM ~8% faster
    xw[..., 2 * H:3 * H] *= 2
    w_t = w_hh.T.copy()                   # a copy even when w_hh.T is contiguous: it is scaled below
    w_t[:, 2 * H:3 * H] *= 2
    h, c = h0, c0
    for t, _ in _steps(T, reverse):
        a, cs, tc = ws[t, :, :4 * H], ws[t, :, 4 * H:5 * H], ws[t, :, 5 * H:]
        xp.add(xp.matmul(h, w_t), xw[t], out=a)
        _sig_(xp, a)
        g = a[:, 2 * H:3 * H]
        g *= 2
        g -= 1
        xp.multiply(a[:, H:2 * H], c, out=cs)
        cs += a[:, :H] * g
        xp.tanh(cs, out=tc)
        h, c = xp.multiply(a[:, 3 * H:], tc, out=y[t]), cs
    y[T] = c
    return y, ws


def _lstm_scan_loop(xp, xw, rows, bias, h0, c0, w_hh, y, ws, reverse: bool):
    """The float32 recurrence with the fused cell loop (``kernels/rnn.py``): one compiled loop over
    the steps where our GEMM takes the step products, else a GEMM and one cell pass a step."""
    T, B = rows.shape
    loop = kernels.loops("rnn")
    w_t = kernels.prepack(xp, xp.ascontiguousarray(w_hh.T))
    h, c = xp.array(h0, dtype=xw.dtype, order="C"), xp.array(c0, dtype=xw.dtype, order="C")  # c_t, rewritten
    if _layer_loop(xp, loop.lstm_layer, lambda w, _: (xw, rows, bias, h, c, w, y, ws, reverse), w_t, B) is None:
        a = xp.empty((B, xw.shape[-1]), xw.dtype)
        for t, _ in _steps(T, reverse):
            loop.lstm_cell(kernels.gemm_here(xp, h, w_t, out=a), xw, rows[t], bias, c, ws[t], y[t])
            h = y[t]
    y[T] = c
    return y, ws


def _lstm_bptt_loop(xp, gy, c0, w_hh, ws, da, db, rows, dsum, reverse: bool, needs_dh0: bool):
    """The float32 backward through time with the fused cell loop: ``(dh0, dc0)``, ``da`` filled,
    the bias gradient summed into ``db`` and each row's gate gradients into ``dsum[rows]`` (unless
    empty); without ``needs_dh0`` the last step's GEMM is skipped."""
    T, B = rows.shape
    H = c0.shape[-1]
    loop = kernels.loops("rnn")
    dh, dc = xp.zeros(c0.shape, gy.dtype), gy[T].copy()
    c0 = xp.array(c0, dtype=gy.dtype, order="C")
    w = kernels.prepack(xp, w_hh)

    def args_with(own, parts: bool) -> tuple:     # parts leave the sums to ``_gate_sums``
        return (gy, dh, dc, c0, own, ws, da, db[:0] if parts else db, rows, dsum[:0] if parts else dsum,
                reverse, needs_dh0)
    parts = _layer_loop(xp, loop.lstm_layer_backward, args_with, w, B)
    if parts is not None:
        if parts:
            _gate_sums(loop, da, rows, db, dsum, reverse)
        return dh, dc
    cs = ws[:, :, 4 * H:5 * H]
    first = T - 1 if reverse else 0                 # the forward's first step, the backward's last
    for t, p in reversed(_steps(T, reverse)):
        loop.lstm_cell_backward(gy[t], dh, dc, ws[t], _prev(p, T, cs, c0), da[t], db, rows[t], dsum)
        if t != first or needs_dh0:
            kernels.gemm_here(xp, da[t], w, out=dh)     # the step kernel has read dh_t
    return dh, dc


def _gate_sums(loop, da, rows, db, dsum, reverse: bool) -> None:
    """The bias gradient ``db`` and the distinct rows' sums ``dsum`` (each unless empty) from every step's
    gate gradients ``da`` (``rnn.gate_sums``, in the whole loop's order, so the same floats) after the
    batch's parts ran at once: the columns split over the threads."""
    kernels.parallel_ranges(loop.gate_sums, da.shape[-1], da.size,
                            lambda first, lo, hi: (da, rows, db, dsum, reverse, lo, hi), shared=True)


def _lstm_bptt(xp, gy, c0, w_hh, ws, da, reverse: bool):
    """The backward through time in numpy ufuncs (any dtype, cupy): ``(dh0, dc0)``, ``da`` filled."""
    T, H = ws.shape[0], c0.shape[-1]
    dh = xp.zeros(c0.shape, gy.dtype)
    dc = gy[T].copy()
    cs = ws[:, :, 4 * H:5 * H]
    for t, p in reversed(_steps(T, reverse)):      # the forward's steps, last first
        dh += gy[t]
        act, tc = ws[t, :, :4 * H], ws[t, :, 5 * H:]
        i, g, o = act[:, :H], act[:, 2 * H:3 * H], act[:, 3 * H:]
        d = da[t]
        dc += dh * o * (1 - tc * tc)
        xp.multiply(dc, g, out=d[:, :H])
        xp.multiply(dc, _prev(p, T, cs, c0), out=d[:, H:2 * H])
        xp.multiply(dh, tc, out=d[:, 3 * H:])
        d *= act * (1 - act)                      # the logistic derivative (the g block is rewritten next)
        xp.multiply(dc * i, 1 - g * g, out=d[:, 2 * H:3 * H])
        dh = xp.matmul(d, w_hh)
        dc *= act[:, H:2 * H]
    return dh, dc


def _lstm_seq_bwd_fwd(xp, gy, x, h0, c0, w_ih, w_hh, y, ws, *, reverse, needs):
    """Backward through time: (dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh), empty where ``needs`` says no."""
    T, B = x.shape[:2]
    H = h0.shape[-1]
    da = xp.empty((T, B, 4 * H), gy.dtype)
    empty = xp.empty((0,), gy.dtype)
    if kernels.use(xp, gy, da, ws):
        distinct, rows, dsum = _distinct_grads(xp, x, needs[3], 4 * H)
        db = xp.zeros((4 * H,), gy.dtype)
        dh, dc = _lstm_bptt_loop(xp, gy, c0, w_hh, ws, da, db, rows, dsum, reverse, needs[1])
    else:
        distinct, dsum = None, None
        dh, dc = _lstm_bptt(xp, gy, c0, w_hh, ws, da, reverse)
        db = da.reshape(T * B, 4 * H).sum(axis=0) if needs[5] else empty
    db = db if needs[5] else empty
    dx, dw_ih = _input_grads(xp, da, x, w_ih, needs[0], needs[3], empty, distinct, dsum)
    dw_hh = _w_hh_grad(xp, da, h0, y, T, reverse) if needs[4] else empty
    # the two biases get arrays of their own: accumulation into one .grad must not write the other
    return (dx, dh if needs[1] else empty, dc if needs[2] else empty, dw_ih, dw_hh, db, db.copy())


def _lstm_seq_tensors(x, states, w_ih, w_hh, b, reverse):
    """The same layer in Tensor ops (the per-step cells): ``y`` as ``lstm`` gives it."""
    gi = linear(x, w_ih, b[0] if b else None)
    (h, c), outs = states, [None] * x.shape[0]
    for t, _ in _steps(x.shape[0], reverse):
        h, c = lstm_cell(gi[t] + linear(h, w_hh, b[1] if b else None), c)
        outs[t] = h
    return stack(outs + [c])


# GRU: ws (T, B, 4H) holds r z n and the hidden projection's n block (h W_hnᵀ + b_hn) of every step
def _gru_scan_fwd(xp, x, h0, w_ih, w_hh, *b, reverse):
    T, B = x.shape[:2]
    H = h0.shape[-1]
    y = xp.empty((T, B, H), x.dtype)
    ws = xp.empty((T, B, 4 * H), x.dtype)
    if kernels.use(xp, y):                    # the cell loop adds b_hh
        gi, rows = _input_proj(xp, x, w_ih, _distinct(xp, x.reshape(T * B, -1)))
        if b:
            gi += b[0]
        b_hh = xp.ascontiguousarray(b[1], dtype=gi.dtype) if b else xp.zeros((3 * H,), gi.dtype)
        return _gru_scan_loop(xp, gi, rows, h0, w_hh, b_hh, y, ws, reverse)
    gi = gemm(xp, x.reshape(T * B, -1), w_ih.T).reshape(T, B, 3 * H)
    if b:
        gi += b[0]
        gi[..., :2 * H] += b[1][:2 * H]
    w_t = w_hh.T.copy()
    h = h0
    for t, _ in _steps(T, reverse):
        gh = xp.matmul(h, w_t)
        rz, n, ghn = ws[t, :, :2 * H], ws[t, :, 2 * H:3 * H], ws[t, :, 3 * H:]
        _sig_(xp, xp.add(gi[t, :, :2 * H], gh[:, :2 * H], out=rz))
        if b:
            xp.add(gh[:, 2 * H:], b[1][2 * H:], out=ghn)
        else:
            ghn[...] = gh[:, 2 * H:]
        xp.multiply(rz[:, :H], ghn, out=n)
        n += gi[t, :, 2 * H:]
        xp.tanh(n, out=n)
        h = xp.subtract(h, n, out=y[t])           # h' = n + z (h - n)
        h *= rz[:, H:]
        h += n
    return y, ws


def _gru_scan_loop(xp, gi, rows, h0, w_hh, b_hh, y, ws, reverse: bool):
    """The float32 recurrence with the fused cell loop (``kernels/rnn.py``), as ``_lstm_scan_loop``."""
    T, B = rows.shape
    loop = kernels.loops("rnn")
    w_t = kernels.prepack(xp, xp.ascontiguousarray(w_hh.T))
    h = xp.array(h0, dtype=gi.dtype, order="C")
    if _layer_loop(xp, loop.gru_layer, lambda w, _: (gi, rows, b_hh, h, w, y, ws, reverse), w_t, B) is not None:
        return y, ws
    gh = xp.empty((B, gi.shape[-1]), gi.dtype)
    for t, _ in _steps(T, reverse):
        loop.gru_cell(gi, rows[t], kernels.gemm_here(xp, h, w_t, out=gh), b_hh, h, ws[t], y[t])
        h = y[t]
    return y, ws


def _gru_bptt_loop(xp, gy, h0, w_hh, y, ws, dgi, dgh, rows, dsum, reverse: bool, needs_dh0: bool):
    """The float32 backward through time with the fused cell loop: dh0, ``dgi`` and ``dgh`` filled,
    each row of ``dgi`` summed into ``dsum[rows]`` (unless empty); without ``needs_dh0`` the last
    step's GEMM is skipped."""
    T, B = rows.shape
    loop = kernels.loops("rnn")
    dh, dhz = xp.zeros(h0.shape, gy.dtype), xp.zeros(h0.shape, gy.dtype)
    h0 = xp.array(h0, dtype=gy.dtype, order="C")
    w = kernels.prepack(xp, w_hh)

    def args_with(own, parts: bool) -> tuple:     # parts leave the sums to ``_gate_sums``
        return (gy, dh, dhz, h0, own, y, ws, dgi, dgh, rows, dsum[:0] if parts else dsum, reverse, needs_dh0)
    parts = _layer_loop(xp, loop.gru_layer_backward, args_with, w, B)
    if parts is not None:
        if parts and dsum.shape[0]:
            _gate_sums(loop, dgi, rows, dsum[0, :0], dsum, reverse)
        return dh + dhz
    first = T - 1 if reverse else 0
    for t, p in reversed(_steps(T, reverse)):
        loop.gru_cell_backward(gy[t], dh, dhz, ws[t], _prev(p, T, y, h0), dgi[t], dgh[t], rows[t], dsum)
        if t != first or needs_dh0:
            kernels.gemm_here(xp, dgh[t], w, out=dh)
    return dh + dhz


def _gru_bptt(xp, gy, h0, w_hh, y, ws, dgi, dgh, reverse: bool):
    """The backward through time in numpy ufuncs (any dtype, cupy): dh0, ``dgi`` and ``dgh`` filled."""
    T, H = ws.shape[0], h0.shape[-1]
    dh = xp.zeros(h0.shape, gy.dtype)
    for t, p in reversed(_steps(T, reverse)):
        dh += gy[t]
        r, z, n, ghn = ws[t, :, :H], ws[t, :, H:2 * H], ws[t, :, 2 * H:3 * H], ws[t, :, 3 * H:]
        di, dg = dgi[t], dgh[t]
        xp.multiply(dh * (1 - z), 1 - n * n, out=di[:, 2 * H:])
        xp.multiply(dh * (_prev(p, T, y, h0) - n), z * (1 - z), out=di[:, H:2 * H])
        xp.multiply(di[:, 2 * H:] * ghn, r * (1 - r), out=di[:, :H])
        dg[:, :2 * H] = di[:, :2 * H]
        xp.multiply(di[:, 2 * H:], r, out=dg[:, 2 * H:])
        dh = xp.matmul(dg, w_hh) + dh * z
    return dh


def _gru_seq_bwd_fwd(xp, gy, x, h0, w_ih, w_hh, y, ws, *, reverse, needs):
    """Backward through time: (dx, dh0, dw_ih, dw_hh, db_ih, db_hh), empty where ``needs`` says no."""
    T, B = x.shape[:2]
    H = h0.shape[-1]
    dgi = xp.empty((T, B, 3 * H), gy.dtype)
    dgh = xp.empty((T, B, 3 * H), gy.dtype)
    if kernels.use(xp, gy, dgi, ws):
        distinct, rows, dsum = _distinct_grads(xp, x, needs[2], 3 * H)
        dh = _gru_bptt_loop(xp, gy, h0, w_hh, y, ws, dgi, dgh, rows, dsum, reverse, needs[1])
    else:
        distinct = dsum = None
        dh = _gru_bptt(xp, gy, h0, w_hh, y, ws, dgi, dgh, reverse)
    empty = xp.empty((0,), gy.dtype)
    dx, dw_ih = _input_grads(xp, dgi, x, w_ih, needs[0], needs[2], empty, distinct, dsum)
    dw_hh = _w_hh_grad(xp, dgh, h0, y, T, reverse) if needs[3] else empty
    db_ih = dgi.reshape(T * B, 3 * H).sum(axis=0) if needs[4] else empty
    db_hh = dgh.reshape(T * B, 3 * H).sum(axis=0) if needs[4] else empty
    return (dx, dh if needs[1] else empty, dw_ih, dw_hh, db_ih, db_hh)


def _gru_seq_tensors(x, states, w_ih, w_hh, b, reverse):
    gi = linear(x, w_ih, b[0] if b else None)
    (h,), outs = states, [None] * x.shape[0]
    for t, _ in _steps(x.shape[0], reverse):
        h = gru_cell(gi[t], linear(h, w_hh, b[1] if b else None), h)
        outs[t] = h
    return stack(outs)


def _seq_vjp(n_states: int, tensors, bwd):
    """The vjp of ``lstm``/``gru``: one backward op, or under ``create_graph`` the per-step Tensor
    form recomputed and differentiated (so every order of derivative stays exact)."""
    def vjp(gy, y, *args, reverse):
        *inputs, _, ws = args
        x, states, (w_ih, w_hh, *b) = inputs[0], inputs[1:1 + n_states], inputs[1 + n_states:]
        if is_grad_enabled():
            live = [t for t in inputs if t.requires_grad]
            ref = tensors(x, states, w_ih, w_hh, b, reverse)
            got = iter(_grad([ref], live, [gy], create_graph=True, allow_unused=True))
            return tuple(next(got) if t.requires_grad else None for t in inputs) + (None, None)
        needs = tuple(t.requires_grad for t in inputs[:3 + n_states]) + (any(t.requires_grad for t in b),)
        grads = apply(bwd, gy, *inputs[:3 + n_states], y, ws, reverse=reverse, needs=needs)
        grads = grads[:3 + n_states] + grads[-2:][:len(b)]
        return tuple(gr if t.requires_grad else None for gr, t in zip(grads, inputs)) + (None, None)
    return vjp


def _seq_cost(gates: int):
    """The two GEMMs per step (input and hidden projections) and ~20 FLOPs per gate element."""
    def cost(shapes, out) -> int:
        (T, B, I), H = shapes[0], shapes[1][-1]
        return 2 * T * B * gates * H * (I + H) + 20 * T * B * H
    return cost


def _passthrough(xp, *arrays, reverse):
    """The differentiable op's forward: the scan's result, which it takes as an input."""
    return arrays[-2]


_lstm_scan = Op("lstm_scan", _lstm_scan_fwd, None, n_extra=1)
_lstm_seq_bwd = Op("lstm_backward", _lstm_seq_bwd_fwd, None, n_extra=6)
_lstm_seq = Op("lstm", _passthrough, _seq_vjp(2, _lstm_seq_tensors, _lstm_seq_bwd), save_output=True,
               cost=_seq_cost(4))
_gru_scan = Op("gru_scan", _gru_scan_fwd, None, n_extra=1)
_gru_seq_bwd = Op("gru_backward", _gru_seq_bwd_fwd, None, n_extra=5)
_gru_seq = Op("gru", _passthrough, _seq_vjp(1, _gru_seq_tensors, _gru_seq_bwd), save_output=True,
              cost=_seq_cost(3))


def lstm_layer(x: Tensor, h0: Tensor, c0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
               b_hh: Tensor | None, reverse: bool) -> tuple[Tensor, Tensor, Tensor]:
    """One LSTM layer-direction over ``x`` (T, B, I) from ``(h0, c0)`` (B, H): ``(out, h_n, c_n)``."""
    args = (x, h0, c0, w_ih, w_hh) + ((b_ih, b_hh) if b_ih is not None else ())
    y_raw, ws = apply(_lstm_scan, *args, reverse=reverse)
    y = apply(_lstm_seq, *args, y_raw, ws, reverse=reverse)
    T = x.shape[0]
    return y[:T], y[0 if reverse else T - 1], y[T]


def gru_layer(x: Tensor, h0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None,
              reverse: bool) -> tuple[Tensor, Tensor]:
    """One GRU layer-direction over ``x`` (T, B, I) from ``h0`` (B, H): ``(out, h_n)``."""
    args = (x, h0, w_ih, w_hh) + ((b_ih, b_hh) if b_ih is not None else ())
    y_raw, ws = apply(_gru_scan, *args, reverse=reverse)
    y = apply(_gru_seq, *args, y_raw, ws, reverse=reverse)
    return y, y[0 if reverse else x.shape[0] - 1]
