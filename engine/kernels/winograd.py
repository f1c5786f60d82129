"""The Winograd transforms as numba loops (``nn/_winograd.py`` loads them through
``kernels.loops("winograd")`` once ``kernels.use`` says yes).

Input transforms (``input_transform_f23``, ``input_transform_f43``): numpy's whole-array passes
(a zero-padded channels-last copy of the batch, then one pass per nonzero of B^T, twice) write
through strided temporaries; here each image is padded into a scratch (``_pad_image``), its column
transform goes to a second scratch and the row transform reads it from there, all in cache. B^T
is built in, each row's nonzero terms taken in the order ``_winograd._combine`` takes them, with
float32 coefficients and no fused multiply-add: the results equal the numpy passes' bit for bit.
On the ResNet block's shape F(2, 3)'s loop is ~4x the numpy passes (0.43 -> 0.32 ms per call
from padding in the loop, session 5), F(4, 3)'s 1.7x the general coefficient-scanning loop it
replaced (0.74 -> 0.43 ms).
``output_transform_f23`` is F(2, 3)'s A^T M A over the per-tap products (the numpy form's one
``(4, 16) @ (16, T*O)`` GEMM, which BLAS runs at ~11 GFLOP/s with M = 4 and K = 16): the column
then row sums and differences, in chunks that stay in L1, 4.4x faster than that GEMM; its sums
are in another order than BLAS's, so the two agree to float32 rounding. ``grad_transform_f43``
is the weight gradient's F(4, 3) A gy A^T the same way (the numpy form's ``(36, 16)`` GEMM):
4x faster per call on the ResNet block's shape (0.34 -> 0.09 ms), reading each image's output
gradient in NCHW itself.
The helpers are inlined into the loops (``inline="always"``): a call passing 8-12 array views per
run of 128-256 floats cost more than the run; inlined, the same floats 1.4-1.6x faster (session 9).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .conv import _rows_into

__all__ = ["input_transform_f23", "input_transform_f43", "output_transform_f23", "output_f23_nchw", "conv_f23",
           "grad_transform_f43", "weight_f43", "weight_taps", "tap_gemm"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)
F = np.float32


@njit(**_JIT, inline="always")
def _pad_image(x, b, pt, pl, p):
    """Image ``b`` of ``x (N, C, H, W)`` into ``p (rows, m, (tw + 1) * C)``: zero-padded by ``pt``
    rows and ``pl`` columns, channels last, columns split by residue (``p[r, res, k C + ch]`` is
    padded column m k + res): one image at a time, so the transform reads it from cache."""
    rows, m, width = p.shape
    c, h, wd = x.shape[1], x.shape[2], x.shape[3]
    for r in range(rows):
        i = r - pt
        for res in range(m):
            out = p[r, res]
            for k in range(width // c):
                col = m * k + res - pl
                if i < 0 or i >= h or col < 0 or col >= wd:
                    for ch in range(c):
                        out[k * c + ch] = 0.0
                else:
                    for ch in range(c):
                        out[k * c + ch] = x[b, ch, i, col]


@njit(**_JIT, inline="always")
def _bt23(d0, d1, d2, d3, o0, o1, o2, o3):
    """F(2, 3)'s B^T applied across four runs: ``(d0 - d2, d1 + d2, d2 - d1, d1 - d3)``."""
    for k in range(o0.shape[0]):
        a0 = d0[k]
        a1 = d1[k]
        a2 = d2[k]
        a3 = d3[k]
        o0[k] = a0 - a2
        o1[k] = a1 + a2
        o2[k] = a2 - a1
        o3[k] = a1 - a3


@njit(**_JIT, inline="always")
def _transform_f23(x, b, pt, pl, p, cw, v, vb):
    """Image ``b`` of ``x`` into ``v[:, :, vb]`` (``input_transform_f23``'s layout), through the scratch
    ``p`` and ``cw``."""
    rows = p.shape[0]
    th, span = v.shape[3], v.shape[4]
    c = p.shape[2] - span
    _pad_image(x, b, pt, pl, p)
    for r in range(rows):                # patch column q of tile column j: residue q % 2, tile j + q // 2
        even, odd = p[r, 0], p[r, 1]
        _bt23(even[:span], odd[:span], even[c:], odd[c:], cw[0, r], cw[1, r], cw[2, r], cw[3, r])
    for i in range(th):
        for j in range(4):
            _bt23(cw[j, 2 * i], cw[j, 2 * i + 1], cw[j, 2 * i + 2], cw[j, 2 * i + 3],
                  v[0, j, vb, i], v[1, j, vb, i], v[2, j, vb, i], v[3, j, vb, i])


@njit(**_JIT)
def input_transform_f23(x, pt, pl, p, cw, v, b0, b1):
    """``v (4, 4, N, th, tw * C)`` = F(2, 3)'s B^T d B of every 4 x 4 patch (stride 2) of images
    ``b0:b1`` of ``x (N, C, H, W)`` zero-padded by ``pt`` rows and ``pl`` columns; ``p (rows, 2,
    (tw + 1) * C)`` (``_pad_image``) and ``cw (4, rows, tw * C)`` are one image's scratch (one per
    thread: threads take disjoint image ranges)."""
    for b in range(b0, b1):
        _transform_f23(x, b, pt, pl, p, cw, v, b)


@njit(**_JIT, inline="always")
def _bt43(d0, d1, d2, d3, d4, d5, o0, o1, o2, o3, o4, o5):
    """F(4, 3)'s B^T applied across six runs, each row's nonzero terms in ``_combine``'s order with
    float32 coefficients (a float64 literal would round the products differently)."""
    for k in range(o0.shape[0]):
        a1 = d1[k]
        a2 = d2[k]
        a3 = d3[k]
        a4 = d4[k]
        o0[k] = (d0[k] * F(4.0) + a2 * F(-5.0)) + a4
        o1[k] = ((a1 * F(-4.0) + a2 * F(-4.0)) + a3) + a4
        o2[k] = ((a1 * F(4.0) + a2 * F(-4.0)) - a3) + a4
        o3[k] = ((a1 * F(-2.0) - a2) + a3 * F(2.0)) + a4
        o4[k] = ((a1 * F(2.0) - a2) + a3 * F(-2.0)) + a4
        o5[k] = (a1 * F(4.0) + a3 * F(-5.0)) + d5[k]


@njit(**_JIT, inline="always")
def _transform_f43(x, b, pt, pl, p, cw, v, vb):
    """``_transform_f23`` for F(4, 3): image ``b`` into ``v[:, :, vb]`` (``input_transform_f43``'s layout)."""
    rows = p.shape[0]
    th, span = v.shape[3], v.shape[4]
    c = p.shape[2] - span
    _pad_image(x, b, pt, pl, p)
    for r in range(rows):                # patch column q of tile column j: residue q % 4, tile j + q // 4
        pr = p[r]
        _bt43(pr[0, :span], pr[1, :span], pr[2, :span], pr[3, :span], pr[0, c:], pr[1, c:],
              cw[0, r], cw[1, r], cw[2, r], cw[3, r], cw[4, r], cw[5, r])
    for i in range(th):
        for j in range(6):
            s = cw[j]
            _bt43(s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3], s[4 * i + 4], s[4 * i + 5],
                  v[0, j, vb, i], v[1, j, vb, i], v[2, j, vb, i], v[3, j, vb, i], v[4, j, vb, i], v[5, j, vb, i])


@njit(**_JIT)
def input_transform_f43(x, pt, pl, p, cw, v, b0, b1):
    """``input_transform_f23`` for F(4, 3): ``v (6, 6, ...)``, ``p (rows, 4, ...)``, ``cw (6, ...)``."""
    for b in range(b0, b1):
        _transform_f43(x, b, pt, pl, p, cw, v, b)


@njit(**_JIT, inline="always")
def _at23(d0, d1, d2, d3, o0, o1):
    """F(2, 3)'s A^T across four runs: ``(d0 + d1 + d2, d1 - d2 - d3)``."""
    for k in range(o0.shape[0]):
        a1 = d1[k]
        a2 = d2[k]
        o0[k] = d0[k] + a1 + a2
        o1[k] = a1 - a2 - d3[k]


@njit(**_JIT)
def output_transform_f23(prod, ys, tmp, s0, s1):
    """``ys (4, s1 - s0)`` = (A^T (x) A^T) of columns ``s0:s1`` of ``prod (16, L)``: output (a, b) of
    every tile and channel from its 16 tap products (tap 4 r + c); ``tmp (8, chunk)`` is scratch,
    chunk elements at a time."""
    chunk = tmp.shape[1]
    for s in range(s0, s1, chunk):
        e = min(s1, s + chunk)
        w = e - s
        for c in range(4):                   # tmp[r * 4 + c] = sum_q A^T[r, q] prod[4 q + c]
            _at23(prod[c, s:e], prod[4 + c, s:e], prod[8 + c, s:e], prod[12 + c, s:e], tmp[c, :w], tmp[4 + c, :w])
        for r in range(2):                   # ys[2 r + b] = sum_c A^T[b, c] tmp[4 r + c]
            _at23(tmp[4 * r, :w], tmp[4 * r + 1, :w], tmp[4 * r + 2, :w], tmp[4 * r + 3, :w], ys[2 * r, s - s0:e - s0],
                  ys[2 * r + 1, s - s0:e - s0])


@njit(**_JIT, inline="always")
def _tile_row_out(prod, s, y, b, i, tmp):
    """Tile row ``i`` of image ``b`` of ``y (N, O, OH, OW)`` from its tiles' 16 tap products, columns
    ``s:s + tw O`` of ``prod (16, L)``: ``output_transform_f23`` into ``tmp[8:]`` (rows 0-7 its column
    sums), then the 2 x 2 outputs of every tile and channel into place in NCHW, cropped at the edge."""
    o, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    tw = (ow + 1) // 2
    out = tmp[8:]
    output_transform_f23(prod, out, tmp[:8], s, s + tw * o)
    for a in range(min(2, oh - 2 * i)):
        e0, e1 = out[2 * a], out[2 * a + 1]
        for ch in range(o):
            yr = y[b, ch, 2 * i + a]
            for j in range(ow // 2):
                yr[2 * j] = e0[j * o + ch]
                yr[2 * j + 1] = e1[j * o + ch]
            if ow % 2:
                yr[ow - 1] = e0[(tw - 1) * o + ch]


@njit(**_JIT)
def output_f23_nchw(prod, y, b0, b1):
    """Images ``b0:b1`` of ``y (N, O, OH, OW)`` from their tiles' 16 tap products ``prod (16, N th tw
    O)``: ``output_transform_f23`` on one tile row at a time (the same sums, in the same order),
    its 2 x 2 outputs of every tile and channel then written into place in NCHW, cropped at the
    edge. One pass, in L1, where the transform's ``(4, T O)`` result went through two whole-block
    numpy layout copies."""
    o, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    tmp = np.empty((12, tw * o), prod.dtype)
    for b in range(b0, b1):
        for i in range(th):
            _tile_row_out(prod, (b * th + i) * tw * o, y, b, i, tmp)


@njit(**_JIT)
def conv_f23(x, u, y, pt, pl, b0, b1):
    """Images ``b0:b1`` of ``y (N, O, OH, OW)``, F(2, 3)'s convolution of ``x (N, C, H, W)`` zero-padded
    by ``pt`` rows and ``pl`` columns with the transformed kernel ``u (16, C, O)`` (O as ``tap_gemm``
    takes it), one image at a time: its input transform (``input_transform_f23``'s), its 16 tap GEMMs
    (``tap_gemm``) and its output transform (``output_f23_nchw``'s) on scratch that stays in cache,
    where the three passes over a block of images wrote and read ``V (16, T, C)`` and the products
    ``(16, T, O)`` through L2 (2 x 1 MiB a block). The same operations on every element in the same
    order, so the same floats as the three passes."""
    c, o = x.shape[1], u.shape[2]
    oh, ow = y.shape[2], y.shape[3]
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    p = np.empty((2 * th + 2, 2, (tw + 1) * c), x.dtype)
    cw = np.empty((4, 2 * th + 2, tw * c), x.dtype)
    v = np.empty((16, th * tw, c), x.dtype)
    prod = np.empty((16, th * tw, o), x.dtype)
    flat = prod.reshape(16, th * tw * o)
    tmp = np.empty((12, tw * o), x.dtype)
    for b in range(b0, b1):
        _transform_f23(x, b, pt, pl, p, cw, v.reshape(4, 4, 1, th, tw * c), 0)
        tap_gemm(v, u, prod, 0, 16)
        for i in range(th):
            _tile_row_out(flat, i * tw * o, y, b, i, tmp)


@njit(**_JIT, inline="always")
def _a43(d0, d1, d2, d3, o0, o1, o2, o3, o4, o5):
    """F(4, 3)'s A across four runs: ``(d0, d0 + d1 + d2 + d3, d0 - d1 + d2 - d3, d0 + 2 d1 + 4 d2
    + 8 d3, d0 - 2 d1 + 4 d2 - 8 d3, d3)`` (powers of two: the products are exact)."""
    for k in range(o0.shape[0]):
        a0 = d0[k]
        a1 = d1[k]
        a2 = d2[k]
        a3 = d3[k]
        e = a0 + a2
        f = a1 + a3
        g = a0 + F(4.0) * a2
        h = F(2.0) * a1 + F(8.0) * a3
        o0[k] = a0
        o1[k] = e + f
        o2[k] = e - f
        o3[k] = g + h
        o4[k] = g - h
        o5[k] = a3


@njit(**_JIT, inline="always")
def _grad_f43(gy, b, q, dm, d, tmp):
    """Image ``b``'s tap gradients into columns ``d:d + th tw O`` of ``dm`` (``grad_transform_f43``)."""
    o, oh, ow = gy.shape[1], gy.shape[2], gy.shape[3]
    th, tw = (oh + 3) // 4, (ow + 3) // 4
    span = th * tw * o
    chunk = tmp.shape[1]
    for i in range(th):
        for a in range(4):
            r = 4 * i + a
            for j in range(tw):
                for bb in range(4):
                    c = 4 * j + bb
                    row = q[4 * a + bb]
                    at = (i * tw + j) * o
                    if r < oh and c < ow:
                        for ch in range(o):
                            row[at + ch] = gy[b, ch, r, c]
                    else:
                        for ch in range(o):
                            row[at + ch] = 0.0
    for s in range(0, span, chunk):
        e = min(span, s + chunk)
        w = e - s
        d0, d1 = d + s, d + e
        for a in range(4):               # tmp[6 a + j] = sum_b A[j, b] q[4 a + b]
            r = 6 * a
            _a43(q[4 * a, s:e], q[4 * a + 1, s:e], q[4 * a + 2, s:e], q[4 * a + 3, s:e], tmp[r, :w],
                 tmp[r + 1, :w], tmp[r + 2, :w], tmp[r + 3, :w], tmp[r + 4, :w], tmp[r + 5, :w])
        for j in range(6):               # dm[6 i + j] = sum_a A[i, a] tmp[6 a + j]
            _a43(tmp[j, :w], tmp[6 + j, :w], tmp[12 + j, :w], tmp[18 + j, :w], dm[j, d0:d1], dm[6 + j, d0:d1],
                 dm[12 + j, d0:d1], dm[18 + j, d0:d1], dm[24 + j, d0:d1], dm[30 + j, d0:d1])


@njit(**_JIT)
def grad_transform_f43(gy, q, dm, tmp, b0, b1):
    """Images ``b0:b1``'s columns of ``dm (36, N th tw O)`` = (A (x) A) of their 4 x 4 output-gradient
    tiles: F(4, 3)'s 6 x 6 tap gradients of every tile and channel (dm row 6 i + j, column t O + o).
    Each image of ``gy (N, O, OH, OW)`` goes channels last into ``q (16, th tw O)`` first (row 4 a + b
    holds output (4 i + a, 4 j + b) of tile (i, j), zero past the edge), in cache: the numpy form's two
    whole-batch layout copies and its (36, 16) GEMM (~11 GFLOP/s) in one pass per image, split by
    images over the threads. ``q`` and ``tmp (24, chunk)`` are one thread's scratch."""
    span = q.shape[1]
    for b in range(b0, b1):
        _grad_f43(gy, b, q, dm, b * span, tmp)


@njit(**_JIT)
def weight_f43(x, gy, pt, pl, out, t0, t1):
    """``out[t0:t1] (taps, O, C) += `` the weight gradient's per-tap products ``sum_t dm[:, t] v[t, :]`` over
    every tile of ``x (N, C, H, W)`` (zero-padded by ``pt`` rows, ``pl`` columns) and ``gy (N, O, OH, OW)``,
    F(4, 3), taps ``t0:t1`` of 36, one image at a time: its input transform (``input_transform_f43``'s), its
    output-gradient transform (``grad_transform_f43``'s) and its products (``tap_gemm``'s, the accumulators
    continued from ``out``) on scratch in cache, where the transforms of the whole batch went through L2 and
    memory (V and the tap gradients, 2 x 1.2 MiB on the ResNet block). Each sum runs over the tiles in the
    same order with the same fused multiply-adds as one ``tap_gemm`` over the batch, so ``out`` (zeros on
    entry) is its floats. Tap ranges split the work over threads without changing a sum: each range
    transforms every image itself (the transforms are ~1/5 of the work, the products the rest)."""
    c, o = x.shape[1], gy.shape[1]
    th, tw = (gy.shape[2] + 3) // 4, (gy.shape[3] + 3) // 4
    p = np.empty((4 * th + 2, 4, (tw + 1) * c), x.dtype)
    cw = np.empty((6, 4 * th + 2, tw * c), x.dtype)
    v = np.empty((36, th * tw, c), x.dtype)
    q = np.empty((16, th * tw * o), x.dtype)
    dm = np.empty((36, th * tw * o), x.dtype)
    tmp = np.empty((24, 1024), x.dtype)
    dm3 = dm.reshape(36, th * tw, o)
    for b in range(x.shape[0]):
        _transform_f43(x, b, pt, pl, p, cw, v.reshape(6, 6, 1, th, tw * c), 0)
        _grad_f43(gy, b, q, dm, 0, tmp)
        for tap in range(t0, t1):
            # each tap's (O, tiles) view as a 2-D ``.T``: a 3-D ``transpose(0, 2, 1)`` compiles numba's
            # general permutation (sets, fancy indexing), 1/3 of this kernel's compile
            _taps(np.expand_dims(dm3[tap].T, 0), v[tap:tap + 1], out[tap:tap + 1], 0, 1, True)


@njit(**_JIT, parallel=True)
def grads_f23_f43(g, ut, gx, qt, ql, x, du, pt, pl):
    """A 3x3 convolution's two gradients at once, each whole on one of two threads (one OpenMP region):
    ``conv_f23`` of the output gradient ``g`` with the flipped kernel's ``ut`` into ``gx`` (padded by
    ``qt``, ``ql``), the input's gradient, beside ``weight_f43``'s 36 tap sums of ``x`` and ``g`` into
    ``du`` (padded by ``pt``, ``pl``), the weight's. Each loop runs as it runs alone, so the floats are
    its own; the ResNet block's 32-channel backward at two threads: 645 -> 520 us, where each loop
    split over both threads reread the batch from the other core's cache (issue 17, session 28). The
    weight's loop takes ~0.83 of the input's time (400 against 480 us alone), so its thread also runs
    the input gradient's last image in twelve (per image, the same floats) rather than wait ~100 us:
    the pair 533 -> 511 us, the ResNet step at two threads 1.023x (issue 17, session 30)."""
    n = g.shape[0]
    k = n - n // 12
    for t in prange(2):
        if t == 0:
            conv_f23(g, ut, gx, qt, ql, 0, k)
        else:
            weight_f43(x, g, pt, pl, du, 0, 36)
            conv_f23(g, ut, gx, qt, ql, k, n)


@njit(**_JIT)
def weight_taps(x, gy, pt, pl, kh, kw, out, t0, t1):
    """``out[t0:t1] (taps, C, O) += `` a stride-1, undilated convolution's weight gradient for kernel
    offsets ``t0:t1`` of ``kh * kw`` (row-major), ``x (N, C, H, W)`` padded by ``pt`` rows and ``pl``
    columns on top and left, ``gy (N, O, OH, OW)``, O one of 16, 32, 48, 64: one image at a time, in
    cache. As ``conv.weight_stride1`` lays them out, the image sits in a zero grid as wide as the padded
    input (``width = OW + kw - 1``), so offset (i, j)'s window is the contiguous run from ``i * width +
    j`` of every channel's flat grid, and ``gy`` goes channels last over the same width (zeros in the
    extra columns): each offset is one ``tap_gemm`` product ``(C, OH * width) @ (OH * width, O)``, its
    sums continued image after image. Where im2col copied a (N * OH * OW, 9 C) matrix through memory
    before one long GEMM (the CNN's 16 -> 32 weight gradient: 3.6 MiB). Each offset's sums run in the
    same order however the offsets are cut over threads, so the floats do not depend on the split."""
    n, c = x.shape[0], x.shape[1]
    o, oh, ow = gy.shape[1], gy.shape[2], gy.shape[3]
    width = ow + kw - 1
    span = oh * width
    grid = np.zeros((c, (oh + kh - 1) * width + kw), x.dtype)
    g = np.zeros((1, span, o), x.dtype)
    for b in range(n):
        for ch in range(c):
            _rows_into(x[b, ch], grid[ch], pt * width + pl, width)
        for r in range(oh):
            for q in range(ow):
                dst = g[0, r * width + q]
                for k in range(o):
                    dst[k] = gy[b, k, r, q]
        for t in range(t0, t1):
            at = (t // kw) * width + t % kw
            _taps(np.expand_dims(grid[:, at:at + span], 0), g, out[t:t + 1], 0, 1, True)


# The per-tap GEMMs ``(T, C) @ (C, O)``: OpenBLAS runs K = C = 32, N = O = 32 at a fraction of the
# machine's rate (its Haswell kernels, the default core type here, are AVX2; its SkylakeX ones reach
# full rate only through their small-matrix path). This register-blocked kernel keeps ROWS x O/16
# accumulators of 16 float32 lanes (12 vector registers) while it streams K: for each k, one
# broadcast of v[t, k] per row and one fused multiply-add per 16 outputs. LLVM lowers the vectors
# to the host's widest (AVX-512 here; two AVX2 halves elsewhere). Rounding: each output is
# ``fma(v[t, k], u[k, j], acc)`` for k ascending, whatever the split over threads.
_ROWS = {1: 16, 2: 8, 3: 5, 4: 4}           # accumulator rows for O = 16, 32, 48, 64
_HALF_ROWS = 8   # O = 8 or 4 (a grouped convolution's group, ``kernels/grouped.py``): 8- or 4-float vectors, 8 rows


def _tile_kernel(nv: int, accumulate: bool, lanes: int = 16):
    """An intrinsic ``tile(v, u, out, t0)``: ``out[t0:t0 + rows] = v[t0:t0 + rows] @ u`` (``+=`` when
    ``accumulate``: the accumulators start from ``out``, so a product split along K into calls in
    order rounds as one call) for float32 ``v (T, K)`` (any strides: its elements are broadcast one
    at a time) and C-contiguous ``u (K, lanes nv)``, ``out (T, lanes nv)``."""
    rows = _ROWS[nv] if lanes == 16 else _HALF_ROWS

    @intrinsic
    def tile(typingctx, v, u, out, t0):
        def codegen(context, builder, sig, args):
            arrays = [context.make_array(ty)(context, builder, a) for ty, a in zip(sig.args[:3], args[:3])]
            vdata, udata, odata = (a.data for a in arrays)
            k_len = builder.extract_value(arrays[0].shape, 1)
            f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
            vec = ir.VectorType(f32, lanes)
            vptr = ir.PointerType(vec)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3),
                                                 f"llvm.fma.v{lanes}f32")
            width = ir.Constant(i64, lanes * nv)
            row_at = [builder.add(args[3], ir.Constant(i64, r)) for r in range(rows)]

            def out_at(r, q):
                orow = builder.gep(odata, [builder.mul(row_at[r], width)])
                return builder.bitcast(builder.gep(orow, [ir.Constant(i64, lanes * q)]), vptr)
            zero = ir.Constant(vec, [0.0] * lanes)
            accs = [cgutils.alloca_once_value(builder, builder.load(out_at(r, q), align=4) if accumulate else zero)
                    for r in range(rows) for q in range(nv)]
            with cgutils.for_range(builder, k_len) as loop:
                k = loop.index
                urow = builder.gep(udata, [builder.mul(k, width)])
                bs = [builder.load(builder.bitcast(builder.gep(urow, [ir.Constant(i64, lanes * q)]), vptr), align=4)
                      for q in range(nv)]
                for r in range(rows):
                    s = builder.load(cgutils.get_item_pointer2(
                        context, builder, vdata, cgutils.unpack_tuple(builder, arrays[0].shape),
                        cgutils.unpack_tuple(builder, arrays[0].strides), sig.args[0].layout, [row_at[r], k]))
                    sv = builder.insert_element(ir.Constant(vec, ir.Undefined), s, ir.Constant(i32, 0))
                    sv = builder.shuffle_vector(sv, ir.Constant(vec, ir.Undefined),
                                                ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
                    for q in range(nv):
                        acc = accs[r * nv + q]
                        builder.store(builder.call(fma, [sv, bs[q], builder.load(acc)]), acc)
            for r in range(rows):
                for q in range(nv):
                    builder.store(builder.load(accs[r * nv + q]), out_at(r, q), align=4)
            return context.get_dummy_value()
        return types.void(v, u, out, t0), codegen
    return tile


_TILE1, _TILE2, _TILE3, _TILE4 = (_tile_kernel(nv, False) for nv in (1, 2, 3, 4))
_ADD1, _ADD2, _ADD3, _ADD4 = (_tile_kernel(nv, True) for nv in (1, 2, 3, 4))
_TILE_HALF, _ADD_HALF = _tile_kernel(1, False, 8), _tile_kernel(1, True, 8)
_TILE_QUARTER, _ADD_QUARTER = _tile_kernel(1, False, 4), _tile_kernel(1, True, 4)


@njit(**_JIT, fastmath={"contract"})
def _rest_rows(v, u, out, t0, accumulate):
    """Rows ``t0:`` the tiles left over, the same fused multiply-adds in the same order."""
    for t in range(t0, v.shape[0]):
        o = out[t]
        if not accumulate:
            o[:] = 0.0
        for k in range(v.shape[1]):
            a = v[t, k]
            uk = u[k]
            for j in range(o.shape[0]):
                o[j] = a * uk[j] + o[j]


@njit(**_JIT)
def narrow_rows(a, b, out, lo, hi):
    """Rows ``lo:hi`` of ``out (M, O) = a (M, C) @ b (C, O)`` (im2col's narrow GEMM): ``tap_gemm``
    on one tap, each row the same floats however the rows are cut."""
    tap_gemm(np.expand_dims(a[lo:hi], 0), np.expand_dims(b, 0), np.expand_dims(out[lo:hi], 0), 0, 1)


@njit(**_JIT)
def tap_gemm(v, u, out, p0, p1):
    """Taps ``p0:p1`` of ``out (P, T, O) = v (P, T, C) @ u (P, C, O)``, float32, ``u`` and ``out``
    C-contiguous (``v`` any strides: the weight gradient passes a transposed view), O one of 16,
    32, 48, 64 (``_winograd`` checks)."""
    _taps(v, u, out, p0, p1, False)


@njit(**_JIT, inline="always")
def _taps(v, u, out, p0, p1, accumulate):
    """``tap_gemm``, or with ``accumulate`` ``out += v @ u`` (the accumulators continued from ``out``);
    O may also be 8 or 4 (``_HALF_ROWS`` rows of 8- or 4-float vectors)."""
    nv = u.shape[2] // 16
    rows = _HALF_ROWS if nv == 0 else 16 if nv == 1 else 8 if nv == 2 else 5 if nv == 3 else 4
    full = v.shape[1] - v.shape[1] % rows
    for p in range(p0, p1):
        vp, up, op = v[p], u[p], out[p]
        for t in range(0, full, rows):
            if nv == 0 and u.shape[2] == 4:
                _ADD_QUARTER(vp, up, op, t) if accumulate else _TILE_QUARTER(vp, up, op, t)
            elif nv == 0:
                _ADD_HALF(vp, up, op, t) if accumulate else _TILE_HALF(vp, up, op, t)
            elif nv == 1:
                _ADD1(vp, up, op, t) if accumulate else _TILE1(vp, up, op, t)
            elif nv == 2:
                _ADD2(vp, up, op, t) if accumulate else _TILE2(vp, up, op, t)
            elif nv == 3:
                _ADD3(vp, up, op, t) if accumulate else _TILE3(vp, up, op, t)
            else:
                _ADD4(vp, up, op, t) if accumulate else _TILE4(vp, up, op, t)
        _rest_rows(vp, up, op, full, accumulate)
