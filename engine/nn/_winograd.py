"""Winograd F(2x2, 3x3) for 3x3, stride-1 convolutions: the forward and the weight gradient.

An im2col convolution spends one multiply-add per kernel tap; F(2, 3) computes each 2x2 output
tile from a 4x4 input patch with 16 products instead of 36, as 16 GEMMs of ``(tiles, C) @ (C, O)``
(2.25x fewer FLOPs) between cheap add/subtract transforms (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks", 2015; the matrices are theirs). On the ResNet block's shape
(N 16, C = O = 32, 16x16) the GEMMs take ~40% of the im2col GEMM's time and the transforms,
whole-array numpy passes, about as much again (bench/README.md, issue 17 session 4).

Layout: the input transform writes ``V (16, T, C)`` (T = N * tile rows * tile columns, channels
last, a contiguous GEMM operand per tap ``xi = 4 * i + j``), from a zero-padded channels-last copy
of x whose columns are split by parity so each pass reads runs of ``tiles * C`` floats. The stride-1
input gradient is the forward with the flipped kernel (``_ops._conv_t_fwd``), so it runs here too.
Forwards receive ``xp`` (numpy here: the caller checks) and never import numpy.
"""
from __future__ import annotations

from .. import kernels

__all__ = ["fits", "out_size", "conv3x3", "weight3x3"]

# G (4x3) takes a kernel row to its 4 Winograd taps, A^T (2x4) 4 products to 2 outputs; B^T is
# written out as the add/subtract passes of ``_input_transform``
_G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))
_AT = ((1.0, 1.0, 1.0, 0.0), (0.0, 1.0, -1.0, -1.0))
# Where the transforms pay for themselves (1 thread, im2col time / Winograd time, bench/README.md):
# the forward needs 32 input and output channels (ResNet's 32 -> 32 at 16x16: 1.1x; CNN's 16 -> 32
# at 14x14: 0.96x; 64 -> 64: 1.7-2.1x), the weight gradient 16 (1.2-1.5x on both), and an output of
# at least 8x8 (at 7x7 the 4x4 tiles cover 64 positions for 49 and both lose: 0.86x, 0.92x)
MIN_CHANNELS = {"forward": 32, "weight": 16}
MIN_OUT = 8


def fits(pass_: str, kernel, stride, dilation, groups, c: int, o: int, out) -> bool:
    """Whether a 2-D convolution's ``pass_`` ("forward" or "weight") takes the Winograd path:
    3x3, stride 1, undilated, one group, enough channels and output positions."""
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and min(c, o) >= MIN_CHANNELS[pass_] and min(out) >= MIN_OUT)


def out_size(size, pads) -> tuple:
    """The output size of a 3x3, stride-1 convolution of an input of ``size`` padded by ``pads``."""
    return tuple(n + lo + hi - 2 for n, (lo, hi) in zip(size, pads))


def _tiles(size, pads):
    """Tile rows and columns covering the output (its last odd row/column computed and dropped)."""
    return tuple((n + lo + hi - 1) // 2 for n, (lo, hi) in zip(size, pads))


def _input_transform(xp, x, pads, th, tw):
    """``V (16, T, C)``: B^T d B of every 4x4 patch (stride 2) of the zero-padded input."""
    n, c, h, w = x.shape
    (pt, _), (pl, _) = pads
    # padded, channels last, columns split by parity: p[:, r, b, q] is padded column 2q + b
    p = xp.zeros((n, 2 * th + 2, 2, tw + 1, c), x.dtype)
    xt = x.transpose(0, 2, 3, 1)
    for b in (0, 1):
        src = xt[:, :, (b - pl) % 2::2]
        first = (pl + (b - pl) % 2) // 2
        p[:, pt:pt + h, b, first:first + src.shape[2]] = src
    if kernels.use(xp, p):
        from . import _winograd_loops        # imports numba: only once a loop runs
        v = xp.empty((4, 4, n, th, tw * c), x.dtype)
        scratch = xp.empty((n, 4, 2 * th + 2, tw * c), x.dtype)
        kernels.parallel(_winograd_loops.input_transform, 2, scratch, xp.arange(n),
                         p.reshape(n, 2 * th + 2, 2, -1), v)
        return v.reshape(16, -1, c)
    # columns (B^T d): d0 - d2, d1 + d2, d2 - d1, d1 - d3 with d0..d3 = even, odd, even + 1, odd + 1
    cw = xp.empty((4, n, 2 * th + 2, tw, c), x.dtype)
    d0, d1, d2, d3 = p[:, :, 0, :tw], p[:, :, 1, :tw], p[:, :, 0, 1:], p[:, :, 1, 1:]
    xp.subtract(d0, d2, out=cw[0])
    xp.add(d1, d2, out=cw[1])
    xp.subtract(d2, d1, out=cw[2])
    xp.subtract(d1, d3, out=cw[3])
    # rows, the same combination of padded rows 2i .. 2i + 3
    v = xp.empty((4, 4, n, th, tw, c), x.dtype)
    r0, r1, r2, r3 = (cw[:, :, k:k + 2 * th:2] for k in range(4))
    xp.subtract(r0, r2, out=v[0])
    xp.add(r1, r2, out=v[1])
    xp.subtract(r2, r1, out=v[2])
    xp.subtract(r1, r3, out=v[3])
    return v.reshape(16, -1, c)


_KRON = {}


def _kron(xp, dtype, name):
    """The 2-D transforms as Kronecker products, built once per array module and dtype:
    ``G (x) G`` (16, 9) takes a kernel's 9 taps to its 16 Winograd taps, ``A^T (x) A^T`` (4, 16) the
    16 products of a tile to its 2x2 outputs, ``A (x) A`` (16, 4) an output gradient tile back."""
    key = (xp, dtype, name)
    if key not in _KRON:
        m = xp.asarray(_G if name == "G" else _AT, dtype)
        k = xp.kron(m, m)
        _KRON[key] = k.T.copy() if name == "A" else k
    return _KRON[key]


def conv3x3(xp, x, w, pads):
    """Cross-correlation of ``x (N, C, H, W)`` with ``w (O, C, 3, 3)``, stride 1, ``pads``."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    th, tw = _tiles((h, wd), pads)
    v = _input_transform(xp, x, pads, th, tw)
    u = xp.matmul(_kron(xp, x.dtype, "G"), w.reshape(o * c, 9).T).reshape(16, o, c)
    m = xp.matmul(v, u.transpose(0, 2, 1))                                # (16, T, O)
    # A^T m A for every tile and channel as one (4, 16) @ (16, T * O) GEMM (the add/subtract passes
    # took 1.7x as long), then the 2x2 outputs into place, channels last, and NCHW
    ys = xp.matmul(_kron(xp, x.dtype, "AT"), m.reshape(16, -1)).reshape(2, 2, n, th, tw, o)
    y = xp.empty((n, th, 2, tw, 2, o), x.dtype)
    y.transpose(2, 4, 0, 1, 3, 5)[...] = ys
    oh, ow = out_size((h, wd), pads)
    y = y.reshape(n, 2 * th, 2 * tw, o)[:, :oh, :ow]
    return xp.ascontiguousarray(y.transpose(0, 3, 1, 2))


def weight3x3(xp, x, gy, pads):
    """The weight gradient ``(O, C, 3, 3)`` of ``conv3x3(x, w, pads)`` for output gradient ``gy``:
    ``G^T [sum over tiles V (.) A gy A^T] G``, the 16 sums over tiles being GEMMs with K = T."""
    n, c, h, wd = x.shape
    o, oh, ow = gy.shape[1:]
    th, tw = _tiles((h, wd), pads)
    v = _input_transform(xp, x, pads, th, tw)
    # gy channels last, zero-filled to whole tiles, then grouped by position in the tile:
    # q[a, b, :, i, j] is output (2i + a, 2j + b); A gy A^T is one (16, 4) @ (4, T * O) GEMM
    g6 = xp.zeros((n, th, 2, tw, 2, o), gy.dtype) if (oh, ow) != (2 * th, 2 * tw) else \
        xp.empty((n, th, 2, tw, 2, o), gy.dtype)
    g6.reshape(n, 2 * th, 2 * tw, o)[:, :oh, :ow] = gy.transpose(0, 2, 3, 1)
    q = xp.ascontiguousarray(g6.transpose(2, 4, 0, 1, 3, 5)).reshape(4, -1)
    dm = xp.matmul(_kron(xp, gy.dtype, "A"), q).reshape(16, -1, o)       # (16, T, O)
    du = xp.matmul(dm.transpose(0, 2, 1), v)                              # (16, O, C)
    gw = xp.matmul(_kron(xp, x.dtype, "G").T, du.reshape(16, o * c))       # (9, O * C)
    return xp.ascontiguousarray(gw.T).reshape(o, c, 3, 3)
