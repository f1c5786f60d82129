"""Winograd F(m x m, 3x3) for 3x3, stride-1 convolutions: the forward and the weight gradient.

An im2col convolution spends one multiply-add per kernel tap and output; F(m, 3) computes each
m x m output tile from an (m + 2)^2 input patch with (m + 2)^2 products instead of 9 m^2, as that
many GEMMs of ``(tiles, C) @ (C, O)`` between transforms (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks", 2015; the matrices are theirs): F(2, 3) has 2.25x fewer products,
F(4, 3) 4x. On the ResNet block's shape (N 16, C = O = 32, 16x16, 1 thread) F(4, 3)'s 36 GEMMs
of 256 tiles also run at a higher rate than F(2, 3)'s 16 of 1024 (they fit in cache): weight-
gradient GEMMs 0.72 vs 2.10 ms, forward 0.74 vs 1.36 ms (im2col's: ~3.2 and ~3.5 ms). But F(4, 3)'s
float32 rounding error is ~2e-6 of the output's scale (F(2, 3)'s ~1e-7, PyTorch's direct
convolution's ~3e-7), too much for a forward that later layers amplify (``tile_size``): the
forward and input gradient run F(2, 3), the weight gradient F(4, 3) where the output allows.

Layout: the input transform writes ``V (a^2, T, C)`` (a = m + 2, T = N * tile rows * tile
columns, channels last: a contiguous GEMM operand per tap), from a zero-padded channels-last copy
of x whose columns are split by residue mod m, so each pass reads runs of ``tiles * C`` floats
(the eager kernels build that copy one image at a time, in cache).
The output and output-gradient transforms are single GEMMs with the Kronecker products of A^T
(with the eager kernels, F(2, 3)'s output and F(4, 3)'s output-gradient transforms are loops).
The stride-1 input gradient is the forward with the flipped kernel (``_ops._conv_t_fwd``), so it
runs here too. Forwards receive ``xp`` (numpy here: the caller checks) and never import numpy.
"""
from __future__ import annotations

import math

from .. import kernels
from ..base.pool import ranges
from ..kernels import gemm

__all__ = ["fits", "out_size", "tile_size", "conv3x3", "weight3x3", "narrow_loop", "narrow_gemm", "add_bias"]

# B^T (a x a) takes a patch row to its taps, G (a x 3) a kernel row, A^T (m x a) products to outputs
_MATS = {
    2: dict(BT=((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
            G=((1, 0, 0), (1 / 2, 1 / 2, 1 / 2), (1 / 2, -1 / 2, 1 / 2), (0, 0, 1)),
            AT=((1, 1, 1, 0), (0, 1, -1, -1))),
    4: dict(BT=((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0), (0, -2, -1, 2, 1, 0),
                (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1)),
            G=((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6), (1 / 24, 1 / 12, 1 / 6),
               (1 / 24, -1 / 12, 1 / 6), (0, 0, 1)),
            AT=((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))),
}
# Where the transforms pay for themselves (1 thread, im2col time / Winograd time, bench/README.md):
# the forward needs 16 input and 16 output channels (32 -> 32 at 16x16 1.5x, 32 -> 16 at 14x14 1.26x;
# 16 -> 32 at 14x14 0.96x in session 9, 1.3x since ``conv_f23`` runs an image at a time in cache, 2.4x
# at two threads, 626 -> 481 and 597 -> 253 us, issue 17 session 27), the weight
# gradient 32 input and 16 output channels (32 -> 32 at 16x16, F(4, 3): 1.5-2.2x; 16 -> 32 at
# 14x14, F(2, 3): im2col 1.15-1.24x faster on the AMD EPYC machine of session 9, either OpenBLAS
# core type), and an output of at least 8x8 (at 7x7 the tiles cover 64 positions for 49 and both
# passes lose: 0.86x, 0.92x)
MIN_CHANNELS = {"forward": (16, 16), "weight": (32, 16)}
MIN_OUT = 8
# At 2 threads on a quiet machine (bench/README.md, end of the fifth session; the ResNet program in
# its own process, wall clock) Winograd with the BLAS's own threads is the fastest of the three
# measured: 33.5 ms a step, against 46.7 for im2col and 40.7 for one block of images per thread with
# single-threaded BLAS (session 5's split, measured under load 5-6, dropped again). ``MAX_THREADS``
# is the switch back to im2col above a thread count
MAX_THREADS = 1 << 20
# The per-tap GEMMs run in blocks of at most this many tile rows: OpenBLAS's SkylakeX kernels take
# a product of up to ~10^6 multiply-adds with N = 32 through their unpacked small-matrix path,
# 1.5x faster here than the packed path a (1024, 32) @ (32, 32) tap takes (bench/README.md, issue
# 17 session 9); other cores run the blocks as fast as the whole. Each output row is the same
# K-long dot product either way, and the cut depends only on the shape
TAP_ROWS = 512
# The forward runs a block of images at a time, at most this many tiles x channels (the larger of
# C and O) per tap: the block's V and per-tap products (16 taps x 4 bytes x this: 1 MiB) stay in
# L2 from the input transform through the GEMMs to the output transform. 1.05-1.19x per pass on
# the ResNet (16 images, 32 -> 32) and CNN input-gradient (32 images, 32 -> 16) shapes against the
# whole batch at once, both OpenBLAS core types; 4x smaller blocks lose to their per-call costs
# (bench/README.md, issue 17 session 9)
BLOCK_TILE_CHANNELS = 1 << 14


def fits(pass_: str, kernel, stride, dilation, groups, c: int, o: int, out) -> bool:
    """Whether a 2-D convolution's ``pass_`` ("forward" or "weight") of ``c`` input and ``o``
    output channels takes the Winograd path: 3x3, stride 1, undilated, one group, enough channels
    and output positions, at most ``MAX_THREADS`` intra-op threads."""
    min_c, min_o = MIN_CHANNELS[pass_]
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and c >= min_c and o >= min_o and min(out) >= MIN_OUT
            and kernels.threads() <= MAX_THREADS)


def out_size(size, pads, kernel=(3, 3)) -> tuple:
    """The output size of a stride-1, undilated convolution (3x3 unless ``kernel`` says) of an
    input of ``size`` padded by ``pads``."""
    return tuple(n + lo + hi - k + 1 for n, (lo, hi), k in zip(size, pads, kernel))


def tile_size(pass_: str, out) -> int:
    """F(4, 3) for the weight gradient where both output sides are multiples of 4 (no wasted tile
    rows), else F(2, 3). The forward (and so the input gradient) stays F(2, 3): F(4, 3)'s larger
    rounding error passes through every later layer and train-mode batch norm amplifies it
    (resnet18 at batch 2: input gradients 1% off PyTorch's, tests/test_vision_models.py); a weight
    gradient is a leaf, its error stays ~2e-6 of its scale."""
    return 4 if pass_ == "weight" and all(n % 4 == 0 for n in out) else 2


def _tiles(out, m):
    """Tile rows and columns covering the output (a last partial tile computed and cropped)."""
    return tuple(-(-n // m) for n in out)


_MAT_CACHE: dict = {}
def _mat(xp, dtype, m, name):
    """The 2-D transforms as Kronecker products, built once per module, dtype and m: ``G (x) G``
    (a^2, 9) takes a kernel's 9 taps to its Winograd taps, ``A^T (x) A^T`` (m^2, a^2) a tile's
    products to its outputs, ``A (x) A`` (a^2, m^2) an output-gradient tile back."""
    key = (xp, dtype, m, name)
    if key not in _MAT_CACHE:
        g = xp.asarray(_MATS[m]["G" if name == "G" else "AT"], dtype)
        k = xp.kron(g, g)
        _MAT_CACHE[key] = xp.ascontiguousarray(k.T) if name == "A" else k
    return _MAT_CACHE[key]


def _combine(xp, bt, row, terms, out):
    """``out = sum_q bt[row, q] * terms[q]`` over the nonzero coefficients, left to right (the
    numba loop adds in the same order, so both give the same floats)."""
    first = True
    for q, coef in enumerate(bt[row]):
        if coef == 0:
            continue
        if first:
            xp.multiply(terms[q], coef, out=out)
            first = False
        else:
            out += terms[q] * coef


def _input_transform(xp, x, pads, m, th, tw, split=True):
    """``V (a^2, T, C)``: B^T d B of every a x a patch (stride m) of the zero-padded input (image
    ranges over the threads when ``split``, see ``_ranges``)."""
    x = xp.ascontiguousarray(x)
    n, c, h, w = x.shape
    (pt, _), (pl, _) = pads
    a = m + 2
    rows = m * th + 2
    if kernels.use(xp, x):                 # the loop pads one image at a time, into cache
        v = xp.empty((a, a, n, th, tw * c), x.dtype)
        _ranges(_transform_images, n, x.size, lambda first, lo, hi: (xp, x, pads, m, v, lo, hi), split)
        return v.reshape(a * a, -1, c)
    # padded, channels last, columns split by residue: p[:, r, res, k] is padded column m k + res
    p = xp.zeros((n, rows, m, tw + 1, c), x.dtype)
    xt = x.transpose(0, 2, 3, 1)
    for res in range(m):
        start = (res - pl) % m
        src = xt[:, :, start::m]
        first = (start + pl) // m
        p[:, pt:pt + h, res, first:first + src.shape[2]] = src
    bt = _MATS[m]["BT"]
    # columns: patch column q of tile column k is padded column m k + q
    cols = [p[:, :, q % m, q // m:q // m + tw] for q in range(a)]
    cw = xp.empty((a, n, rows, tw, c), x.dtype)
    for j in range(a):
        _combine(xp, bt, j, cols, cw[j])
    # rows, the same combination of padded rows m i .. m i + a - 1
    v = xp.empty((a, a, n, th, tw, c), x.dtype)
    rws = [cw[:, :, q:q + m * th:m] for q in range(a)]
    for i in range(a):
        _combine(xp, bt, i, rws, v[i])
    return v.reshape(a * a, -1, c)


def conv3x3(xp, x, w, pads, bias=None):
    """Cross-correlation of ``x (N, C, H, W)`` with ``w (O, C, 3, 3)``, stride 1, ``pads``, plus the
    per-channel ``bias`` when given (added by each image block, in cache)."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    oh, ow = out_size((h, wd), pads)
    m = tile_size("forward", (oh, ow))
    ut = _forward_taps(xp, x.dtype, w, m)
    y = xp.empty((n, o, oh, ow), x.dtype)
    if m == 2 and narrow_loop(xp, x.dtype, ut) and kernels.use(xp, x, y):
        # the three stages an image at a time, a tile row at a time in L1 (kernels/winograd.py
        # ``conv_f23``), the image ranges one OpenMP region where the regions run: as the pool's blocks
        # (``_conv_blocks``) the worker took a CPU from the spinning OpenMP threads, and the ResNet
        # step at two threads was 1.15x slower (issue 17, session 27)
        (pt, _), (pl, _) = pads
        kernels.parallel_ranges(kernels.loops("winograd").conv_f23, n, x.size + y.size,
                                lambda first, lo, hi: (x, ut, y, pt, pl, lo, hi), shared=True)
        return add_bias(y, bias)
    spans = _image_blocks(n, max(1, BLOCK_TILE_CHANNELS // (math.prod(_tiles((oh, ow), m)) * max(c, o))),
                          kernels.use(xp, x, ut))
    kernels.parallel_ranges(_conv_blocks, len(spans), x.size + y.size,
                            lambda first, lo, hi: (spans[lo:hi], x, y, ut, xp, pads, m, len(spans) < 2, bias))
    return y


def _forward_taps(xp, dtype, w, m):
    """The forward's transformed kernel ``(a^2, C, O)``, C-contiguous: ``G w G^T`` of every (O, C) pair."""
    o, c = w.shape[:2]
    u = gemm(xp, _mat(xp, dtype, m, "G"), w.reshape(o * c, 9).T).reshape(-1, o, c)
    return xp.ascontiguousarray(u.transpose(0, 2, 1))


def grads_at_once(xp, g, x, flipped, flipped_pads, pads):
    """The input gradient ``conv3x3(g, flipped, flipped_pads)`` and the weight gradient ``weight3x3(x, g,
    pads)`` at once on two threads (``kernels/winograd.py`` ``grads_f23_f43``), ``(gx, gw)``; None where
    either would not run its one-image-at-a-time loop (``conv_f23``, ``weight_f43``). The same floats as
    the two calls: each loop runs whole, as it does alone."""
    n, o, oh, ow = g.shape
    c = flipped.shape[0]
    if tile_size("weight", (oh, ow)) != 4 or not _f43_loop(xp, x, g):
        return None
    ut = _forward_taps(xp, g.dtype, flipped, 2)
    if not narrow_loop(xp, g.dtype, ut):
        return None
    gx = xp.empty((n, c) + out_size((oh, ow), flipped_pads), g.dtype)
    du = xp.zeros((36, o, c), x.dtype)
    kernels.loops("winograd").grads_f23_f43(g, ut, gx, flipped_pads[0][0], flipped_pads[1][0], x, du, pads[0][0],
                                             pads[1][0])
    return gx, _weight_from_taps(xp, du, x.dtype, 4)


def add_bias(y, bias):
    """``y += bias`` over ``y``'s channels (dim 1), in place, when ``bias`` is not None; returns ``y``.
    The same floats as adding it to the whole output afterwards."""
    if bias is not None:
        y += bias.reshape((-1,) + (1,) * (y.ndim - 2))
    return y


def _image_blocks(n: int, step: int, loops: bool) -> list:
    """The forward's image blocks, ``(lo, hi)`` ranges of at most ``step`` images, near-equal. With
    the eager kernels their count is a multiple of the intra-op threads (up to one image a block),
    so each thread takes whole blocks of equal work: every stage of a block (transforms, tap
    GEMMs, copies) then runs on one thread, in its core's cache, with one hand-off per pass instead
    of one per stage. Each image's outputs are the same floats in any block (the loops' sums run
    per image, tile and channel); BLAS's per-block products may round by their size, so without
    the loops the blocks are the batch cut by ``step`` alone, whatever the thread count."""
    count = -(-n // step)
    if loops:
        t = kernels.threads()
        count = min(n, -(-count // t) * t)
    return ranges(n, count)


def _conv_blocks(spans, x, y, ut, xp, pads, m, split, bias) -> None:
    """``_conv_images`` for each image range in ``spans``, one after another (one thread's share),
    plus ``bias``; their stages split over the threads only when the batch is a single block (``split``)."""
    for lo, hi in spans:
        _conv_images(x[lo:hi], y[lo:hi], ut, xp, pads, m, split)
        add_bias(y[lo:hi], bias)


def _ranges(fn, count: int, size: int, args_for, split: bool, shared: bool = False) -> None:
    """``kernels.parallel_ranges(fn, count, size, args_for, shared)`` when ``split``, else ``fn`` over all
    ``count`` items on this thread: inside a forward's image blocks the blocks are what the threads
    share, and when the pool runs them one after another (a split measured slower) the blocks'
    stages would not pay either; their own splits would only add the pool's timing to each stage."""
    if split:
        kernels.parallel_ranges(fn, count, size, args_for, shared)
    else:
        fn(*args_for(True, 0, count))


def _conv_images(x, y, ut, xp, pads, m, split):
    """``y``, the convolution of images ``x`` with the transformed kernel ``ut (a^2, C, O)``."""
    n = x.shape[0]
    o, oh, ow = y.shape[1:]
    th, tw = _tiles((oh, ow), m)
    v = _input_transform(xp, x, pads, m, th, tw, split)
    prod = _tap_gemm(xp, v, ut, split)                                    # (a^2, T, O)
    # A^T prod A for every tile and channel as one (m^2, a^2) @ (a^2, T * O) GEMM, then the m x m
    # outputs into place, channels last, and NCHW (F(2, 3) with the eager kernels: its sums and
    # differences written straight into y, a tile row at a time, kernels/winograd.py)
    prod = prod.reshape(prod.shape[0], -1)
    if m == 2 and kernels.use(xp, prod, y):
        _ranges(kernels.loops("winograd").output_f23_nchw, n, prod.size, lambda first, lo, hi: (prod, y, lo, hi),
                split, shared=True)
        return
    ys = gemm(xp, _mat(xp, x.dtype, m, "AT"), prod)
    ys = ys.reshape(m, m, n, th, tw, o)
    yt = xp.empty((n, th, m, tw, m, o), x.dtype)
    yt.transpose(2, 4, 0, 1, 3, 5)[...] = ys
    y[...] = yt.reshape(n, m * th, m * tw, o)[:, :oh, :ow].transpose(0, 3, 1, 2)


def _transform_images(xp, x, pads, m, v, lo, hi) -> None:
    """Images ``lo:hi`` of ``x`` into ``v (a, a, N, th, tw * C)`` through the input transform loop,
    with this thread's scratch (one image padded, then its column transform)."""
    (pt, _), (pl, _) = pads
    c = x.shape[1]
    rows, tw = m * v.shape[3] + 2, v.shape[4] // c
    p = xp.empty((rows, m, (tw + 1) * c), x.dtype)
    cw = xp.empty((m + 2, rows, tw * c), x.dtype)
    loops = kernels.loops("winograd")
    (loops.input_transform_f23 if m == 2 else loops.input_transform_f43)(x, pt, pl, p, cw, v, lo, hi)


def _tap_gemm(xp, v, ut, split=True):
    """``v (a^2, T, C) @ ut (a^2, C, O)`` (the forward's per-tap products; the weight gradient's
    ``(a^2, O, T) @ (a^2, T, C)`` with a transposed view as ``v``): with the eager kernels and a
    contiguous float32 ``ut`` whose last dim is a multiple of 16 up to 64, ``kernels/winograd.py``'s
    register-blocked loop (the taps split over threads when ``split``); else BLAS, ``TAP_ROWS`` rows at a time."""
    t = v.shape[1]
    if narrow_loop(xp, v.dtype, ut):
        prod = xp.empty((v.shape[0], t, ut.shape[2]), v.dtype)
        _ranges(kernels.loops("winograd").tap_gemm, v.shape[0], prod.size, lambda first, lo, hi: (v, ut, prod, lo, hi),
                split, shared=True)
        return prod
    if t <= TAP_ROWS:
        return gemm(xp, v, ut)
    prod = xp.empty((v.shape[0], t, ut.shape[2]), v.dtype)
    for lo in range(0, t, TAP_ROWS):
        gemm(xp, v[:, lo:lo + TAP_ROWS], ut, out=prod[:, lo:lo + TAP_ROWS])
    return prod


def narrow_loop(xp, dtype, b) -> bool:
    """Whether products with ``b (..., K, N)`` of an operand of ``dtype`` (the per-tap GEMMs,
    ``narrow_gemm``) run ``kernels/winograd.py``'s register-blocked loop: the eager kernels, float32,
    contiguous, N a multiple of 16 up to 64 (each output row then the same floats however the rows are cut)."""
    return b.shape[-1] in (16, 32, 48, 64) and dtype == b.dtype and kernels.use(xp, b)


def narrow_gemm(xp, a, b):
    """``a (M, K) @ b (K, N)`` for im2col's forward (N = O output channels): with the eager
    kernels, contiguous float32 ``b`` and N a multiple of 16 up to 64, the per-tap GEMMs' loop on
    one "tap", its rows split over the threads (each row's floats the same either way); else
    ``kernels.gemm``. The CNN's 16 -> 32 forward 1.68x (OpenBLAS Haswell) and 1.11x (SkylakeX);
    its weight gradient ``(144, 6272) @ (6272, 32)`` stays BLAS (1.15x / 0.88x)."""
    if not narrow_loop(xp, a.dtype, b):
        return gemm(xp, a, b)
    out = xp.empty((a.shape[0], b.shape[1]), a.dtype)
    kernels.parallel_ranges(kernels.loops("winograd").narrow_rows, a.shape[0], out.size,
                            lambda first, lo, hi: (a, b, out, lo, hi), shared=True)
    return out


def weight3x3(xp, x, gy, pads):
    """The weight gradient ``(O, C, 3, 3)`` of ``conv3x3(x, w, pads)`` for output gradient ``gy``:
    ``G^T [sum over tiles V (.) A gy A^T] G``, the sums over tiles being GEMMs with K = T."""
    m = tile_size("weight", tuple(gy.shape[2:]))
    return _weight_from_taps(xp, _weight_images(x, gy, xp, pads, m), x.dtype, m)


def _f43_loop(xp, x, gy) -> bool:
    """Whether F(4, 3)'s weight gradient runs ``weight_f43``, its one-image-at-a-time loop, on these arrays:
    the loops take them (C-contiguous float32) and the input channels are a tap product's (16 to 64)."""
    return kernels.use(xp, x, gy) and x.shape[1] in (16, 32, 48, 64)


def _weight_from_taps(xp, du, dtype, m):
    """The weight gradient ``(O, C, 3, 3)`` from the tap sums ``du (a^2, O, C)``: ``G^T du G``."""
    o, c = du.shape[1:]
    gw = gemm(xp, _mat(xp, dtype, m, "G").T, du.reshape(du.shape[0], o * c))   # (9, O * C)
    return xp.ascontiguousarray(gw.T).reshape(o, c, 3, 3)


def _weight_images(x, gy, xp, pads, m):
    """The sum over the tiles of every image of V (.) A gy A^T ``(a^2, O, C)``, one GEMM per tap."""
    n, o, oh, ow = gy.shape
    th, tw = _tiles((oh, ow), m)
    x, gy = xp.ascontiguousarray(x), xp.ascontiguousarray(gy)
    if m == 4 and _f43_loop(xp, x, gy):
        # an image at a time, in cache (kernels/winograd.py ``weight_f43``; the same floats): the ResNet
        # block's (16, 32, 16, 16) conv forward+backward took 1512 us so at two threads against 1715-1779
        # with the transforms split by images (issue 17, session 26). Its 36 taps split over the threads
        # (each range transforms every image itself), as one OpenMP region where the regions run: no sum
        # changes, so the floats are one thread's
        du = xp.zeros((36, o, x.shape[1]), x.dtype)
        kernels.parallel_ranges(kernels.loops("winograd").weight_f43, 36, x.size + gy.size,
                                lambda first, lo, hi: (x, gy, pads[0][0], pads[1][0], du, lo, hi), shared=True)
        return du
    if m == 4 and kernels.use(xp, x, gy):
        # each thread transforms its images' inputs and output gradients, in its core's cache
        v = xp.empty((6, 6, n, th, tw * x.shape[1]), x.dtype)
        dm = xp.empty((36, n * th * tw * o), gy.dtype)
        kernels.parallel_ranges(_weight_transforms, n, x.size + gy.size,
                                lambda first, lo, hi: (xp, x, gy, pads, v, dm, lo, hi))
        v = v.reshape(36, -1, x.shape[1])
    else:
        v = _input_transform(xp, x, pads, m, th, tw)
        # gy channels last, zero-filled to whole tiles, then grouped by position in the tile:
        # q[a, b, :, i, j] is output (m i + a, m j + b); A gy A^T is one (a^2, m^2) @ (m^2, T * O) GEMM
        shape = (n, th, m, tw, m, o)
        g6 = xp.zeros(shape, gy.dtype) if (oh, ow) != (m * th, m * tw) else xp.empty(shape, gy.dtype)
        g6.reshape(n, m * th, m * tw, o)[:, :oh, :ow] = gy.transpose(0, 2, 3, 1)
        q = xp.ascontiguousarray(g6.transpose(2, 4, 0, 1, 3, 5)).reshape(m * m, -1)
        dm = gemm(xp, _mat(xp, gy.dtype, m, "A"), q)
    dm = dm.reshape(v.shape[0], -1, o)                                         # (a^2, T, O)
    return _tap_gemm(xp, dm.transpose(0, 2, 1), v)


def _weight_transforms(xp, x, gy, pads, v, dm, lo, hi) -> None:
    """F(4, 3)'s input transform ``v`` and output-gradient transform ``dm`` of images ``lo:hi``,
    with this thread's scratch."""
    _transform_images(xp, x, pads, 4, v, lo, hi)
    span = v.shape[3] * (v.shape[4] // x.shape[1]) * gy.shape[1]
    kernels.loops("winograd").grad_transform_f43(gy, xp.empty((16, span), gy.dtype), dm,
                                                 xp.empty((24, 1024), gy.dtype), lo, hi)    # 96 KB: L2
