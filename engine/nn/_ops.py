"""The primitives nn adds: convolution, pooling, im2col/col2im and embedding.

Convolution is im2col (a strided window view, ``sliding_window_view``) followed by one GEMM
per group. Every vjp is itself one of these primitives (the adjoint of a convolution in its
input is a transposed convolution, in its weight a "weight convolution", and so on), so
double backward works. All ops take N spatial dims; ``pads`` is ``((lo, hi), ...)`` per dim.
Forwards receive ``xp`` and never import numpy or cupy.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..base.grad_mode import is_grad_enabled
from ..base.meta import has_data
from ..core.dispatch import apply, keeps_forward_state
from ..core.registry import ALL, NONE, OTHERS, Op
from ..core.tensor import Tensor
from ..ops.indexing import _index_select_bounds, add_at
from ..ops._util import unbroadcast
from ..ops.reduce import array_mean, array_sum
from ..ops.sparse import sparse_coo_tensor
from .. import kernels
from ..kernels import gemm
from ..base.backend import is_numpy
from ..base.dtype import BFLOAT16_NP, FLOATING_KINDS, REDUCED_NP, float64, from_np, in_float32, in_opmath
from . import _grouped, _winograd

__all__ = ["convolution", "convolution_transpose", "convolution_weight", "max_pool", "avg_pool",
           "im2col", "col2im", "embedding", "pool_output_size", "max_pool_blocks",
           "blocks_divide", "batch_norm_normalize", "batch_norm_eval", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "mse_loss"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_im2col(g, x, *, kernel, dilation, pads, stride):
    """A grouped Conv whose one-hot kernels copy each window offset to its own channel (c-major, then offset)."""
    c, k = int(g.shape(x)[1]), math.prod(kernel)
    onehot = [float(i % k == j) for i in range(c * k) for j in range(k)]
    w = g.op("Reshape", g.const(onehot, g.dtype(x)), g.const([c * k, 1, *kernel], "int64"))
    cols = g.op("Conv", x, w, strides=list(stride), pads=[lo for lo, _ in pads] + [hi for _, hi in pads],
                dilations=list(dilation), group=c)
    return g.op("Reshape", cols, g.const([0, 0, -1], "int64"))


def _onnx_col2im(g, cols, *, size, kernel, dilation, pads, stride):
    if g.opset < 18:
        raise NotImplementedError("col2im (nn.Fold) is ONNX Col2Im from opset 18 (export with opset_version=18)")
    return g.op("Col2Im", cols, g.const(list(size), "int64"), g.const(list(kernel), "int64"),
                dilations=list(dilation), pads=[lo for lo, _ in pads] + [hi for _, hi in pads], strides=list(stride))


def _onnx_conv(g, x, w, *b, stride, pads, dilation, groups):
    return g.op("Conv", x, w, *b, strides=list(stride), pads=[lo for lo, _ in pads] + [hi for _, hi in pads],
                dilations=list(dilation), group=groups)


def _onnx_conv_transpose(g, y, w, *b, stride, pads, dilation, groups, in_size):
    k = [int(s) for s in g.shape(w)[2:]]
    size = [int(s) for s in g.shape(y)[2:]]
    extra = [int(n) - ((m - 1) * s - lo - hi + d * (kk - 1) + 1)
             for n, m, s, (lo, hi), d, kk in zip(in_size, size, stride, pads, dilation, k)]
    return g.op("ConvTranspose", y, w, *b, strides=list(stride), pads=[lo for lo, _ in pads] + [hi for _, hi in pads],
                dilations=list(dilation), group=groups, output_padding=extra)


def _onnx_max_pool_indices(g, x, *, kernel, stride, padding, dilation, out_size):
    """MaxPool's Indices (flat over the whole tensor) made flat per (n, c) plane, as tapelab keeps them."""
    floor = [pool_output_size(int(n), k, s, p, d, False)
             for n, k, s, p, d in zip(g.shape(x)[2:], kernel, stride, padding, dilation)]
    _, idx = g.op("MaxPool", x, outputs=2, kernel_shape=list(kernel), strides=list(stride), pads=list(padding) * 2,
                  dilations=list(dilation), ceil_mode=int(list(out_size) != floor))
    plane = g.reduce("ReduceProd", g.ints(g.shape(x)[2:]), [0], True)     # H*W, dynamic sizes too
    return g.op("Mod", idx, plane)


def _onnx_pool_take(g, x, idx):
    flat = g.const([0, 0, -1], "int64")
    out = g.op("GatherElements", g.op("Reshape", x, flat), g.op("Reshape", idx, flat), axis=2)
    return g.op("Reshape", out, g.op("Shape", idx))


def _onnx_avg_pool(g, x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor, out_size):
    if divisor:
        raise NotImplementedError("avg_pool with divisor_override has no ONNX AveragePool form")
    return g.op("AveragePool", x, kernel_shape=list(kernel), strides=list(stride), pads=list(padding) * 2,
                ceil_mode=int(ceil_mode), count_include_pad=int(count_include_pad))


def _onnx_bn(g, x, *affine, dims, eps, has_weight=False):
    """The normalized value and the batch statistics (flat, as the forward returns them)."""
    mean = g.reduce("ReduceMean", x, dims, True)
    c = g.op("Sub", x, mean)
    var = g.reduce("ReduceMean", g.op("Mul", c, c), dims, True)
    out = g.op("Div", c, g.op("Sqrt", g.op("Add", var, eps)))
    chan = g.const([-1] + [1] * (len(g.shape(x)) - 2), "int64")
    for t, name in zip(affine, ("Mul", "Add") if has_weight else ("Add",)):
        out = g.op(name, out, g.op("Reshape", t, chan))
    flat = g.const([-1], "int64")
    sizes = [g.shape(x)[d] for d in dims]
    unbiased = var                                  # dynamic sizes: the biased one (not an ONNX output)
    if all(isinstance(n, int) for n in sizes):
        count = math.prod(sizes)
        unbiased = g.op("Mul", var, g.const(count / max(count - 1, 1), g.dtype(x)))
    return out, g.op("Reshape", mean, flat), g.op("Reshape", var, flat), g.op("Reshape", unbiased, flat)


# ---------------------------------------------------------------- shared array helpers
def _pad(xp, x, pads, value=0):
    """A filled buffer and one slice assignment: a third of ``xp.pad``'s time on the conv shapes."""
    if not any(lo or hi for lo, hi in pads):
        return x
    res = xp.full(x.shape[:2] + _padded_size(x.shape[2:], pads), value, x.dtype)
    _crop(res, pads, x.shape[2:])[...] = x
    return res


def _windows(xp, x, kernel, stride, dilation, out=None):
    """A strided view of the padded input: ``(N, C, *out, *kernel)``, no copy."""
    nd = len(kernel)
    eff = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    v = xp.lib.stride_tricks.sliding_window_view(x, eff, axis=tuple(range(2, 2 + nd)))
    ends = out or (None,) * nd
    return v[(slice(None), slice(None)) + tuple(slice(None, e * s if e else None, s) for s, e in zip(stride, ends))
             + tuple(slice(None, None, d) for d in dilation)]


def _scatter_windows(xp, shape, pieces, out, stride, dilation, dtype):
    """col2im: add each kernel offset's ``(N, C, *out)`` piece at its strided window positions."""
    res = xp.zeros(shape, dtype)
    for kk, piece in pieces:
        sl = tuple(slice(k * d, k * d + s * (o - 1) + 1, s) for k, d, s, o in zip(kk, dilation, stride, out))
        res[(slice(None), slice(None)) + sl] += piece
    return res


def _crop(x, pads, size):
    return x[(slice(None), slice(None)) + tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, size))]


def _padded_size(size, pads):
    return tuple(n + lo + hi for n, (lo, hi) in zip(size, pads))


# ---------------------------------------------------------------- convolution
# With groups == 1 and C >= _LAST_MIN_C input channels, one 2-D GEMM per pass (measured on the
# CNN/ResNet 3x3 shapes, 1 thread, loaded machine: the forward 0-10% faster than the batched
# layout below, the weight gradient the same). im2col is a matrix
# ``cols (N*L, K*C)``: a row per output position, columns kernel-offset major, channel minor, copied
# from a channels-last padded input (the pad does the transpose; runs of C floats: 2x faster to
# gather than the NCHW layout's rows of the output's width). Then
#   forward      y (N*L, O)    = cols @ wm,        wm = w as (K*C, O)
#   weight grad  gw (K*C, O)   = cols.T @ gy,      gy as (N*L, O)
#   input grad   stride 1 and C >= O: the convolution of gy (padded by d(k-1) - p) with the
#                flipped kernel, the forward above again (1.3x faster at C = O = 32; at C = 16,
#                O = 32 ``_scatter_flat`` is 5% faster); strided: col2im (``_conv_t_grouped``)
# The result's and gy's (N, O, L) <-> (N*L, O) transposes are the only extra copies (~3% of the
# GEMM). Fewer channels (the stem's 1 or 3; its GEMM would be 1-3 wide) or groups > 1: one GEMM
# per group and sample, ``w (g, O/g, C/g*K)`` against ``cols (N, g, C/g*K, L)``, whose result is
# already ``(N, O, L)``, and ``(g, C/g*K, N*L)`` for both gradients. 3x3 stride-1 kernels with
# enough channels take Winograd F(4x4, 3x3) or F(2x2, 3x3) instead (``_winograd.py``: 4x or 2.25x
# fewer multiply-adds; on the ResNet block's 32 -> 32 shape the forward 1.5x and the weight
# gradient 2.2x faster than the im2col GEMM above).
_LAST_MIN_C = 4
# From this many weight-gradient numbers the channels-last route's GEMM writes them out-channel major
# ((O, *K, C), MKL's same floats): the (*K, C, O) product's copy into (O, C, *K) strides a whole row of O
# per number and falls out of cache (3x3 512->512: 10.5 ms of copy, 16.5 ms in all against 8.2; at
# 256 channels both ways cost the same; one thread, session 33 h8).
_WEIGHT_ROWS_MIN = 1 << 20


def _channels_last(c, kernel, stride, pads) -> bool:
    """Whether the 2-D GEMM path runs: enough channels, and not a pointwise (1x1, stride 1,
    unpadded) kernel, whose batched GEMM reads x in place (the channels-last copies made it
    1.3-1.8x slower)."""
    return c >= _LAST_MIN_C and not (all(k == 1 for k in kernel) and all(s == 1 for s in stride)
                                     and not any(lo or hi for lo, hi in pads))


def _wm(xp, w):
    """``w (O, C, *kernel)`` as the ``(K*C, O)`` matrix of the cols' column order."""
    nd = w.ndim - 2
    return w.transpose(tuple(range(2, 2 + nd)) + (1, 0)).reshape(-1, w.shape[0])


def _cols_rows(xp, x, kernel, stride, pads, dilation, out=None):
    """im2col as ``(N*L, K*C)`` from a channels-last copy of the padded input, and the output size
    (``out`` caps it: a transposed convolution's output padding adds rows no window uses)."""
    size = _out_size(x.shape[2:], kernel, stride, pads, dilation)
    if out is None and _im2col_loop(xp, x, kernel, stride, dilation, pads):
        cols = xp.empty((x.shape[0] * math.prod(size), math.prod(kernel) * x.shape[1]), x.dtype)
        _im2col_into_rows(x, kernel, pads, size, cols)
        return cols, size
    v, out = _cols_view(xp, x, kernel, stride, pads, dilation, out)
    return v.reshape(x.shape[0] * math.prod(out), -1), out


def _im2col_loop(xp, x, kernel, stride, dilation, pads) -> bool:
    """Whether ``kernels/conv.py``'s ``im2col_stride1`` builds the columns: a 2-D, stride-1,
    undilated, unshrunk window over a float32 C-contiguous input (the same floats as the view's copy)."""
    return (len(kernel) == 2 and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and all(lo >= 0 and hi >= 0 for lo, hi in pads) and kernels.use(xp, x))


def _im2col_into_rows(x, kernel, pads, size, cols) -> None:
    """``im2col_stride1`` of images ``x`` into ``cols`` rows, for an output of ``size``."""
    (pt, _), (pl, _) = pads
    kernels.loops("conv").im2col_stride1(x, pt, pl, kernel[0], kernel[1], size[0], size[1], cols)


def _cols_view(xp, x, kernel, stride, pads, dilation, out=None):
    """``_cols_rows`` before its copy: the windows ``(N, *out, *kernel, C)`` of a channels-last
    copy of the padded input, and the output size."""
    nd = len(kernel)
    last = (0,) + tuple(range(2, 2 + nd)) + (1,)
    p = _pad_last(xp, x.transpose(last), pads)                              # (N, *padded, C)
    eff = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    v = xp.lib.stride_tricks.sliding_window_view(p, eff, axis=tuple(range(1, 1 + nd)))
    ends = out or (None,) * nd
    v = v[(slice(None),) + tuple(slice(None, e * s if e else None, s) for s, e in zip(stride, ends))
          + (slice(None),) + tuple(slice(None, None, d) for d in dilation)]   # (N, *out, C, *kernel)
    out = v.shape[1:1 + nd]
    return v.transpose((0,) + tuple(range(1, 1 + nd)) + tuple(range(2 + nd, 2 + 2 * nd)) + (1 + nd,)), out


def _pad_last(xp, xt, pads):
    """Channels-last ``xt (N, *sp, C)`` zero-padded into a new contiguous buffer (one copy)."""
    if not any(lo or hi for lo, hi in pads):
        return xp.ascontiguousarray(xt)
    res = xp.zeros((xt.shape[0],) + _padded_size(xt.shape[1:-1], pads) + (xt.shape[-1],), xt.dtype)
    res[(slice(None),) + tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, xt.shape[1:-1]))] = xt
    return res


def _unrows(xp, y, n, out):
    """``(N * L, O)`` -> ``(N, O, *out)`` contiguous, as PyTorch's convolution returns."""
    o = y.shape[1]
    return xp.ascontiguousarray(y.reshape(n, -1, o).transpose(0, 2, 1)).reshape((n, o) + tuple(out))


def _cols_nkl(xp, x, kernel, stride, pads, dilation):
    """im2col ``(N, C * prod(kernel), L)`` (channel-major, then kernel offset) and the output size."""
    nd = len(kernel)
    win = _windows(xp, _pad(xp, x, pads), kernel, stride, dilation)       # (N, C, *out, *kernel)
    out = win.shape[2:2 + nd]
    cols = win.transpose((0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd)))
    return cols.reshape(x.shape[0], x.shape[1] * math.prod(kernel), -1), out


def _cols_knl(xp, x, kernel, stride, pads, dilation):
    """im2col ``(C * prod(kernel), N * L)`` and the output size."""
    nd = len(kernel)
    win = _windows(xp, _pad(xp, x, pads), kernel, stride, dilation)
    out = win.shape[2:2 + nd]
    cols = win.transpose((1,) + tuple(range(2 + nd, 2 + 2 * nd)) + (0,) + tuple(range(2, 2 + nd)))
    return cols.reshape(x.shape[1] * math.prod(kernel), -1), out


def _channels_major(xp, a, groups):
    """``(N, O, *sp)`` -> ``(groups, O/groups, N * prod(sp))`` (one copy)."""
    perm = (1, 0) + tuple(range(2, a.ndim))
    return a.transpose(perm).reshape(groups, a.shape[1] // groups, -1)


def _winograd_fits(pass_, xp, x, kernel, stride, pads, dilation, groups, o) -> bool:
    """Whether this pass runs as Winograd (``_winograd.py``): numpy, float32/64, 2-D, 3x3, stride 1."""
    if not (is_numpy(xp) and x.ndim == 4 and x.dtype.kind == "f" and x.dtype.itemsize >= 4):
        return False
    return _winograd.fits(pass_, kernel, stride, dilation, groups, x.shape[1], o, _winograd.out_size(x.shape[2:], pads))


def _out_size(size, kernel, stride, pads, dilation) -> tuple:
    """A convolution's output size per spatial dim."""
    return tuple((i + p[0] + p[1] - d * (k - 1) - 1) // s + 1
                 for i, k, s, p, d in zip(size, kernel, stride, pads, dilation))


def _check_conv_dtypes(x, w, b, transposed: bool) -> None:
    """ATen's refusals of operands in different dtypes (after autocast's casts): the weight's, then
    the bias's (a transposed convolution converts its bias)."""
    dt = lambda a: from_np(a.dtype.newbyteorder("="))   # a loaded array's byte order may be spelled out
    if w.dtype != x.dtype:
        raise RuntimeError(f"expected scalar type {dt(x).scalar_type} but found {dt(w).scalar_type}")
    if b and b[0].dtype != x.dtype and not transposed:
        raise RuntimeError(f"Input type ({dt(x).cpp_name}) and bias type ({dt(b[0]).cpp_name}) should be the same")


def _plus_bias(fwd, xp, x, w, b, *, half_once: bool = True, **params):
    """``fwd(x, w)`` plus the per-channel bias ``b``. ATen adds the bias to a bfloat16 convolution's
    float32 accumulator (one rounding), and to a half one's too, but for a transposed convolution,
    whose half kernel adds it to the rounded result (``half_once=False``) unless the CPU runs half
    convolutions in oneDNN (``fastmath.onednn_fp16``)."""
    low = x.dtype is BFLOAT16_NP or (half_once and x.dtype == np.float16)
    dt = x.dtype
    if low:
        x, w = x.astype(np.float32), w.astype(np.float32)
    y = fwd(xp, x, w, **params)
    y += b.astype(y.dtype, copy=False).reshape((-1,) + (1,) * (y.ndim - 2))
    return y.astype(dt) if low else y


def _conv_fwd(xp, x, w, *b, stride, pads, dilation, groups):
    if w.dtype is not x.dtype or (b and b[0].dtype is not x.dtype):
        _check_conv_dtypes(x, w, b, False)
    # with the loops (float32) each image block adds the bias while its output is in cache, on its thread
    bias = b[0] if b and kernels.use(xp, x) else None
    if b and bias is None:
        return _plus_bias(_conv_fwd, xp, x, w, b[0], stride=stride, pads=pads, dilation=dilation, groups=groups)
    if x.dtype is BFLOAT16_NP:
        return in_float32(_conv_fwd, xp, x, w, stride=stride, pads=pads, dilation=dilation, groups=groups)
    n, o = x.shape[0], w.shape[0]
    if n == 0:   # an empty batch (no RoIs in a detection head): an empty result of the output's shape
        return xp.zeros((0, o) + _out_size(x.shape[2:], w.shape[2:], stride, pads, dilation), x.dtype)
    if _depthwise(xp, x, w, groups):
        y = xp.empty((n, o) + _out_size(x.shape[2:], w.shape[2:], stride, pads, dilation), x.dtype)
        _depthwise_planes("forward", x, w, stride, pads, dilation, y)
        return _winograd.add_bias(y, bias)
    if _group_by_group("forward", xp, x, w.shape[2:], stride, pads, dilation, groups, o):
        return _winograd.add_bias(_per_group(_conv_fwd, xp, x, w, 0, 1, groups, stride=stride, pads=pads,
                                             dilation=dilation), bias)
    if _grouped.fits(xp, x, w, stride, pads, dilation, groups, o // groups):
        return _winograd.add_bias(_grouped.forward(x, w, stride, pads, dilation, groups), bias)
    if _winograd_fits("forward", xp, x, w.shape[2:], stride, pads, dilation, groups, o):
        return _winograd.conv3x3(xp, x, w, pads, bias)
    if _few_channels_direct(xp, x, w, stride, pads, dilation, groups):
        (pt, _), (pl, _) = pads
        y = xp.empty((n, o) + _out_size(x.shape[2:], w.shape[2:], stride, pads, dilation), x.dtype)
        kernels.parallel_ranges(kernels.loops("conv").forward_stride1, n, x.size * w.size,
                                lambda first, lo, hi: (x, w, pt, pl, y, lo, hi), shared=True)
        return _winograd.add_bias(y, bias)
    if groups == 1 and _channels_last(x.shape[1], w.shape[2:], stride, pads):
        wm = xp.ascontiguousarray(_wm(xp, w))
        if _winograd.narrow_loop(xp, x.dtype, wm):
            # each output row the same floats however the rows are cut: the images split over the
            # threads, each block's im2col copy, product and NCHW copy on its thread
            y = xp.empty((n, o) + _out_size(x.shape[2:], w.shape[2:], stride, pads, dilation), x.dtype)
            kernels.parallel_ranges(_im2col_into, n, x.size + y.size, lambda first, lo, hi: (
                xp, x, wm, y, w.shape[2:], stride, pads, dilation, bias, lo, hi))
            return y
        cols, out = _cols_rows(xp, x, w.shape[2:], stride, pads, dilation)
        return _winograd.add_bias(_unrows(xp, _winograd.narrow_gemm(xp, cols, wm), n, out), bias)
    y = xp.empty((n, o) + _out_size(x.shape[2:], w.shape[2:], stride, pads, dilation), x.dtype)
    args = lambda first, lo, hi: (xp, x, w, y, stride, pads, dilation, groups, bias, lo, hi)
    if kernels.use(xp, x):
        # each image's product is its own GEMM either way: the column copies split with them
        kernels.parallel_ranges(_grouped_into, n, x.size * math.prod(w.shape[2:]) + y.size, args)
    else:
        _grouped_into(*args(True, 0, n))
    return y


# a stem (1-3 input channels) by kernel offsets, ``kernels/conv.py`` ``forward_stride1``, against im2col's
# GEMM (us, one / two threads, torch in brackets; issue 17 session 29): the ResNet stem's 3 -> 32 at 16x16
# 142 / 239 -> 73 / 50 (94 / 79), the CNN's 1 -> 16 at 28x28 148 / 92 -> 133 / 75 (217 / 111), 3 -> 64 at
# 224x224 4973 / 2753 -> 3872 / 1792 (3904 / 2105); eight output channels' accumulators in registers


def _depthwise(xp, x, w, groups) -> bool:
    """Whether a convolution (or its input gradient: ``x`` then the output gradient) runs the depthwise
    loops (``kernels/depthwise.py``): 2-D, one channel a group in and out, more than one group (a
    one-channel convolution keeps its stem loops), float32, ``w`` C-contiguous (``x`` is made so: a
    ``sum()``'s output gradient is a broadcast)."""
    return (x.ndim == 4 and 1 < groups == x.shape[1] == w.shape[0] and w.shape[1] == 1
            and kernels.use(xp, w) and type(x) is np.ndarray and x.dtype == w.dtype)


def _depthwise_planes(name, src, w, stride, pads, dilation, out) -> None:
    """``kernels.loops("depthwise").<name>`` over ``out``'s (image, channel) planes, split over the threads."""
    n, c = out.shape[:2]
    flat = lambda a: np.ascontiguousarray(a).reshape((n * c,) + a.shape[2:])
    args = (flat(src), w.reshape(c, *w.shape[2:]), *stride, pads[0][0], pads[1][0], *dilation, flat(out))
    kernels.parallel_ranges(getattr(kernels.loops("depthwise"), name), n * c,
                            src.size * math.prod(w.shape[2:]) + out.size,
                            lambda first, lo, hi: args + (lo, hi), shared=True)


def _group_by_group(pass_, xp, a, kernel, stride, pads, dilation, groups, o) -> bool:
    """Whether a grouped (not depthwise) convolution's pass runs group by group as dense convolutions:
    where each group's is Winograd's (3x3, stride 1, enough channels a group: ResNeXt's, PiT's). ``a``:
    the pass's input (the output gradient for the input gradient), ``o`` its output's channels. Against
    the per-group GEMMs (1 thread, ms, torch in brackets; issue 17 session 33): 8x64x28x28 3x3 2 groups
    forward 4.67 -> 1.92 (2.17), input gradient 6.89 -> 1.91 (2.35), weight gradient 5.82 -> 1.64 (2.35);
    8x256x14x14 4 groups 7.78 -> 3.19 (4.25), 11.1 -> 3.49 (4.08), 10.4 -> 3.58 (4.77)."""
    return (1 < groups < a.shape[1] and kernels.use(xp, a)
            and _winograd_fits(pass_, xp, a[:, :a.shape[1] // groups], kernel, stride, pads, dilation, 1, o // groups))


def _per_group(fn, xp, a, b, b_dim, join, groups, **params):
    """``fn(xp, a_g, b_g, groups=1, **params)`` for each group's channels of ``a`` (dim 1) and ``b`` (dim
    ``b_dim``), the results joined along ``join``."""
    part = lambda t, dim, i: xp.ascontiguousarray(
        t[(slice(None),) * dim + (slice(i * (t.shape[dim] // groups), (i + 1) * (t.shape[dim] // groups)),)])
    return xp.concatenate([fn(xp, part(a, 1, i), part(b, b_dim, i), groups=1, **params) for i in range(groups)], join)


def _few_channels_direct(xp, x, w, stride, pads, dilation, groups) -> bool:
    """Whether a forward runs ``forward_stride1``: under ``_LAST_MIN_C`` input channels, 2-D, one group,
    stride 1, undilated, padding not negative, float32 with the loops."""
    return (x.ndim == 4 and x.shape[1] < _LAST_MIN_C and groups == 1
            and tuple(stride) == tuple(dilation) == (1, 1) and min(p for pair in pads for p in pair) >= 0
            and kernels.use(xp, x, w))


def _grouped_into(xp, x, w, y, stride, pads, dilation, groups, bias, lo, hi) -> None:
    """Images ``lo:hi`` of the im2col forward in channel-major columns (few channels, or groups):
    ``(g, O/g, C/g * K) @ (N, g, C/g * K, L)`` into ``y``, plus ``bias`` (or None)."""
    cols, _ = _cols_nkl(xp, x[lo:hi], w.shape[2:], stride, pads, dilation)
    cols = cols.reshape(hi - lo, groups, cols.shape[1] // groups, cols.shape[2])
    o = w.shape[0]
    gemm(xp, w.reshape(groups, o // groups, -1), cols, out=y[lo:hi].reshape(hi - lo, groups, o // groups, -1))
    _winograd.add_bias(y[lo:hi], bias)


def _im2col_into(xp, x, wm, y, kernel, stride, pads, dilation, bias, lo, hi) -> None:
    """Images ``lo:hi`` of the im2col forward into ``y`` (``wm``: the weight as ``(K*C, O)``), plus
    ``bias`` (or None)."""
    cols, _ = _cols_rows(xp, x[lo:hi], kernel, stride, pads, dilation)
    n, o = hi - lo, y.shape[1]
    y[lo:hi].reshape(n, o, -1)[...] = _winograd.narrow_gemm(xp, cols, wm).reshape(n, -1, o).transpose(0, 2, 1)
    _winograd.add_bias(y[lo:hi], bias)


def _conv_t_fwd(xp, y, w, *b, stride, pads, dilation, groups, in_size):
    """The adjoint of convolution in its input (a transposed convolution), plus a per-channel bias."""
    if w.dtype is not y.dtype:
        _check_conv_dtypes(y, w, b, True)
    if b:
        once = y.dtype != np.float16 or kernels.loops("fastmath").onednn_fp16()
        return _plus_bias(_conv_t_fwd, xp, y, w, b[0], half_once=once, stride=stride, pads=pads, dilation=dilation,
                          groups=groups, in_size=in_size)
    if y.dtype is BFLOAT16_NP:
        return in_float32(_conv_t_fwd, xp, y, w, stride=stride, pads=pads, dilation=dilation, groups=groups,
                          in_size=in_size)
    nd = y.ndim - 2
    kernel = w.shape[2:]
    if y.shape[0] == 0:
        return xp.zeros((0, w.shape[1] * groups) + tuple(in_size), y.dtype)
    if _depthwise(xp, y, w, groups):
        gx = xp.empty(y.shape[:2] + tuple(in_size), y.dtype)
        _depthwise_planes("input_grad", y, w, stride, pads, dilation, gx)
        return gx
    if _group_by_group("forward", xp, y, kernel, stride, pads, dilation, groups, w.shape[1] * groups):
        return _per_group(_conv_t_fwd, xp, y, w, 0, 1, groups, stride=stride, pads=pads, dilation=dilation,
                          in_size=in_size)
    if _grouped.fits(xp, y, w, stride, pads, dilation, groups, w.shape[1]):
        gx = _grouped.input_grad(y, w, stride, pads, dilation, groups, tuple(in_size))
        if gx is not None:
            return gx
    reach = tuple(d * (k - 1) for d, k in zip(dilation, kernel))
    if groups == 1 and all(s == 1 for s in stride):
        flipped_pads = _flipped_pads(xp, y, w, pads, dilation, in_size)
        if flipped_pads is not None:
            # the convolution of y, padded by reach - pad, with the flipped kernel (C, O, *k)
            # (CNN's 16 -> 32 input gradient: as Winograd 1.18x faster than the flat scatter)
            return _conv_fwd(xp, y, _flipped(w), stride=stride, dilation=dilation, groups=1, pads=flipped_pads)
        full = _padded_size(in_size, pads)
        if all(e + r <= f for e, r, f in zip(y.shape[2:], reach, full)):
            # C < O: that GEMM's C columns run slower than one over the O-channel grid plus k shifts
            full = _scatter_flat(xp, y, w, dilation, full)
            return xp.ascontiguousarray(_crop(full, pads, in_size).transpose((1, 0) + tuple(range(2, 2 + nd))))
    return _conv_t_grouped(xp, y, w, stride, pads, dilation, groups, in_size)


def _flipped_pads(xp, y, w, pads, dilation, in_size):
    """The pads under which a stride-1, one-group transposed convolution of ``y`` is the forward
    convolution of ``y`` with the flipped kernel (``_flipped``), or None where it runs another way."""
    kernel = w.shape[2:]
    reach = tuple(d * (k - 1) for d, k in zip(dilation, kernel))
    fits = all(0 <= lo <= r and 0 <= hi <= r and e + lo + hi - r == i
               for (lo, hi), r, e, i in zip(pads, reach, y.shape[2:], in_size))
    flipped_pads = tuple((r - lo, r - hi) for (lo, hi), r in zip(pads, reach))
    if fits and (w.shape[1] >= max(_LAST_MIN_C, w.shape[0]) or _winograd_fits(
            "forward", xp, y, kernel, (1,) * len(kernel), flipped_pads, dilation, 1, w.shape[1])):
        return flipped_pads
    return None


def _flipped(w):
    """``w (O, C, *k)`` as the kernel ``(C, O, *k)`` flipped in every spatial dim (a view)."""
    return w[(slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)].swapaxes(0, 1)


def _scatter_flat(xp, y, w, dilation, full):
    """Stride-1 col2im without short strided rows: ``y`` sits at the origin of a zero grid of the
    padded input's size, so one GEMM gives every kernel offset's piece in the padded input's flat
    layout and each offset is one contiguous shifted add (``_scatter_windows`` adds rows of the
    output's width, whose per-row cost dominated the CNN's input gradient). ``(C, N, *full)``."""
    n, o = y.shape[:2]
    m = n * math.prod(full)
    grid = xp.zeros((o, n) + full, y.dtype)
    grid[(slice(None), slice(None)) + tuple(slice(0, e) for e in y.shape[2:])] = y.transpose(
        (1, 0) + tuple(range(2, y.ndim)))
    cols = gemm(xp, w.reshape(o, -1).T, grid.reshape(o, m))               # (C * K, N * prod(full))
    cols = cols.reshape(w.shape[1], -1, m)
    steps = [math.prod(full[i + 1:]) for i in range(len(full))]
    res = xp.zeros((w.shape[1], m), y.dtype)
    for t, kk in enumerate(itertools.product(*map(range, w.shape[2:]))):
        shift = sum(k * d * st for k, d, st in zip(kk, dilation, steps))
        res[:, shift:] += cols[:, t, :m - shift]
    return res.reshape((w.shape[1], n) + full)


def _conv_t_grouped(xp, y, w, stride, pads, dilation, groups, in_size):
    """Strided (or grouped) transposed convolution: one GEMM per group, then col2im."""
    nd = y.ndim - 2
    n, o = y.shape[:2]
    out, kernel = y.shape[2:], w.shape[2:]
    c = w.shape[1] * groups
    wm = w.reshape(groups, o // groups, -1).transpose(0, 2, 1)            # (g, C/g * K, O/g)
    cols = gemm(xp, wm, _channels_major(xp, y, groups))                  # (g, C/g * K, N*L)
    cols = cols.reshape((c,) + tuple(kernel) + (n,) + tuple(out))
    pieces = ((kk, cols[(slice(None),) + kk]) for kk in itertools.product(*map(range, kernel)))
    full = _scatter_windows(xp, (c, n) + _padded_size(in_size, pads), pieces, out, stride, dilation, y.dtype)
    full = _crop(full, pads, in_size)                                      # (C, N, *in_size)
    return xp.ascontiguousarray(full.transpose((1, 0) + tuple(range(2, 2 + nd))))


def _conv_w_fwd(xp, x, gy, *, stride, pads, dilation, groups, kernel):
    """The adjoint of convolution in its weight: correlates input windows with output gradients."""
    if x.dtype is BFLOAT16_NP:
        return in_float32(_conv_w_fwd, xp, x, gy, stride=stride, pads=pads, dilation=dilation, groups=groups,
                          kernel=kernel)
    o = gy.shape[1]
    if x.shape[0] == 0:
        return xp.zeros((o, x.shape[1] // groups) + tuple(kernel), x.dtype)
    if _winograd_fits("weight", xp, x, kernel, stride, pads, dilation, groups, o) and \
            tuple(gy.shape[2:]) == _winograd.out_size(x.shape[2:], pads):
        return _winograd.weight3x3(xp, x, gy, pads)
    if x.ndim == 4 and 1 < groups == x.shape[1] == o and kernels.use(xp, x) and type(gy) is np.ndarray \
            and gy.dtype == x.dtype:   # depthwise (``_depthwise``)
        gw, gy = xp.empty((o,) + tuple(kernel), xp.float64), xp.ascontiguousarray(gy)
        kernels.parallel_ranges(kernels.loops("depthwise").weight_grad, o, x.size * math.prod(kernel),
                                lambda first, lo, hi: (x, gy, *stride, pads[0][0], pads[1][0], *dilation, gw, lo, hi),
                                shared=True)
        return gw.astype(x.dtype).reshape((o, 1) + tuple(kernel))
    if _group_by_group("weight", xp, x, kernel, stride, pads, dilation, groups, o):
        return _per_group(_conv_w_fwd, xp, x, gy, 1, 0, groups, stride=stride, pads=pads, dilation=dilation,
                          kernel=kernel)
    if _grouped.fits(xp, x, gy, stride, pads, dilation, groups, o // groups) and type(gy) is np.ndarray \
            and tuple(gy.shape[2:]) == _out_size(x.shape[2:], kernel, stride, pads, dilation):
        gw = _grouped.weight_grad(x, np.ascontiguousarray(gy), tuple(kernel), stride, pads, dilation, groups)
        if gw is not None:
            return gw
    if _by_taps(xp, x, gy, kernel, stride, pads, dilation, groups):
        return _weight_by_taps(xp, x, gy, kernel, pads)
    if groups == 1 and _channels_last(x.shape[1], kernel, stride, pads):
        nd = len(kernel)
        # the copies into im2col's and gy's row layouts by images over the threads; the GEMM splits itself
        n, length = x.shape[0], math.prod(gy.shape[2:])
        cols = xp.empty((n * length, math.prod(kernel) * x.shape[1]), x.dtype)
        rows = xp.empty((n * length, o), gy.dtype)
        kernels.parallel_ranges(_weight_rows_into, n, cols.size,
                                lambda first, lo, hi: (xp, x, gy, kernel, stride, pads, dilation, cols, rows, lo, hi))
        if o * cols.shape[1] >= _WEIGHT_ROWS_MIN:
            gw = gemm(xp, rows.T, cols).reshape((o,) + tuple(kernel) + (x.shape[1],))    # (O, *K, C)
            return xp.ascontiguousarray(gw.transpose((0, nd + 1) + tuple(range(1, nd + 1))))
        gw = gemm(xp, cols.T, rows)                                        # (K*C, O)
        gw = gw.reshape(tuple(kernel) + (x.shape[1], o))
        return xp.ascontiguousarray(gw.transpose((nd + 1, nd) + tuple(range(nd))))
    if groups == 1 and x.ndim == 4 and x.shape[1] < _LAST_MIN_C and tuple(stride) == tuple(dilation) == (1, 1) \
            and tuple(gy.shape[2:]) == _winograd.out_size(x.shape[2:], pads, kernel) and kernels.use(xp, x, gy):
        return _few_channels_weight(xp, x, gy, pads, kernel)
    cols, _ = _cols_knl(xp, x, kernel, stride, pads, dilation)            # (C*K, N*L)
    cols = cols.reshape(groups, cols.shape[0] // groups, cols.shape[1])
    gm = _channels_major(xp, gy, groups)                                   # (g, O/g, N*L)
    if cols.shape[1] > gm.shape[1]:
        # OpenBLAS runs (C/g*K, N*L) @ (N*L, O/g) faster than its transpose when C/g*K > O/g
        # (measured 1.1-1.7x on the CNN/ResNet shapes); the transpose back is O*C*K elements
        gw = xp.ascontiguousarray(gemm(xp, cols, gm.transpose(0, 2, 1)).transpose(0, 2, 1))
    else:
        gw = gemm(xp, gm, cols.transpose(0, 2, 1))                         # (g, O/g, C/g * K)
    return gw.reshape((o, x.shape[1] // groups) + tuple(kernel))


# ``winograd.weight_taps`` against im2col's copies and one long GEMM (1 thread, us, issue 17 session 27):
# (32, 16, 14, 14) -> 32 3x3 754 -> 458 (torch 474), 28x28 2832 -> 1743, (8, 8, 32, 32) -> 32 5x5 1254 ->
# 781, (16, 4, 32, 32) -> 64 1556 -> 1369; but 16 output channels ((16, 24, 16, 16): 558 -> 1004, the
# kernel's 16-row tiles) and an 8x8 output (245 -> 337, each image's set-up) lost
_TAPS_OUTPUTS, _TAPS_MIN_OW = (32, 48, 64), 12


def _by_taps(xp, x, gy, kernel, stride, pads, dilation, groups) -> bool:
    """Whether a weight gradient runs as ``winograd.weight_taps``: float32 2-D, stride 1, undilated,
    one group, at least ``_LAST_MIN_C`` input channels, ``_TAPS_OUTPUTS`` output channels, an output at
    least ``_TAPS_MIN_OW`` wide."""
    return (x.ndim == 4 and groups == 1 and tuple(stride) == tuple(dilation) == (1, 1) and x.shape[1] >= _LAST_MIN_C
            and gy.shape[1] in _TAPS_OUTPUTS and gy.shape[3] >= _TAPS_MIN_OW and min(p for pair in pads for p in pair) >= 0
            and tuple(gy.shape[2:]) == _winograd.out_size(x.shape[2:], pads, kernel) and kernels.use(xp, x, gy))


def _weight_by_taps(xp, x, gy, kernel, pads):
    """The weight gradient an image at a time, one ``tap_gemm`` product per kernel offset
    (``winograd.weight_taps``), the offsets cut over the threads (as one region where the regions run):
    each offset's sums run over the images in order whatever the cut, so the floats are one thread's."""
    kh, kw = kernel
    c, o = x.shape[1], gy.shape[1]
    out = xp.zeros((kh * kw, c, o), x.dtype)
    kernels.parallel_ranges(kernels.loops("winograd").weight_taps, kh * kw, x.size + gy.size,
                            lambda first, lo, hi: (x, gy, pads[0][0], pads[1][0], kh, kw, out, lo, hi), shared=True)
    return xp.ascontiguousarray(out.reshape(kh, kw, c, o).transpose(3, 2, 0, 1))


def _weight_rows_into(xp, x, gy, kernel, stride, pads, dilation, cols, rows, lo, hi) -> None:
    """Images ``lo:hi``'s rows of the weight gradient's operands: im2col ``cols (N*L, K*C)`` and
    ``rows (N*L, O)``, gy channels last."""
    length = rows.shape[0] // x.shape[0]
    size = tuple(gy.shape[2:])
    if size == _out_size(x.shape[2:], kernel, stride, pads, dilation) and _im2col_loop(xp, x, kernel, stride,
                                                                                       dilation, pads):
        _im2col_into_rows(x[lo:hi], kernel, pads, size, cols[lo * length:hi * length])
    else:
        v, _ = _cols_view(xp, x[lo:hi], kernel, stride, pads, dilation, size)
        cols[lo * length:hi * length].reshape(v.shape)[...] = v
    rows[lo * length:hi * length].reshape(hi - lo, length, -1)[...] = \
        gy[lo:hi].reshape(hi - lo, gy.shape[1], -1).transpose(0, 2, 1)


def _few_channels_weight(xp, x, gy, pads, kernel):
    """A stride-1 weight gradient with under ``_LAST_MIN_C`` input channels (a stem's): one long
    dot product per kernel offset over a flat padded image (``kernels/conv.py``), the output
    channels split over the intra-op threads (one region where the regions run), each range its own scratch."""
    (pt, _), (pl, _) = pads
    kh, kw = kernel
    gw = xp.empty((gy.shape[1], x.shape[1], kh, kw), xp.float64)
    kernels.parallel_ranges(kernels.loops("conv").weight_stride1, gy.shape[1], x.size * gy.shape[1],
                            lambda first, lo, hi: (x, gy, pt, pl, kh, kw, gw, lo, hi), shared=True)
    return gw.astype(x.dtype)


def _bias_grad(g, b: tuple) -> tuple:
    """The bias's gradient (a sum over all dims but the channels'), when there is a bias."""
    if not b:
        return ()
    return (g.sum((0,) + tuple(range(2, g.ndim))) if b[0].requires_grad else None,)


def _conv_vjp(g, out, x, w, *b, **p):
    needs = (x.requires_grad, w.requires_grad)
    if not is_grad_enabled() and g.dtype == x.dtype == w.dtype and all(needs):
        # one op for both (as ATen's convolution_backward), so they may run side by side
        gx, gw = apply(_conv_bwd, g, x, w, **p)
        return (gx, gw) + _bias_grad(g, b)
    gx = apply(_conv_t, g, w, in_size=tuple(x.shape[2:]), **p) if needs[0] else None
    gw = apply(_conv_w, x, g, kernel=tuple(w.shape[2:]), **p) if needs[1] else None
    return (gx, gw) + _bias_grad(g, b)


def _conv_bwd_fwd(xp, g, x, w, *, stride, pads, dilation, groups):
    """A convolution's input and weight gradients, as ``convolution_transpose`` and ``convolution_weight``
    compute them: at once on two threads where both are Winograd's one-image-at-a-time loops
    (``_winograd.grads_at_once``; the regions on), else one after the other. The same floats either way."""
    p = dict(stride=stride, pads=pads, dilation=dilation, groups=groups)
    in_size, kernel = tuple(x.shape[2:]), tuple(w.shape[2:])
    if kernels.threads() > 1 and kernels.native() and x.shape[0] and x.dtype == np.float32:
        flipped_pads = _flipped_pads(xp, g, w, pads, dilation, in_size) if groups == 1 and set(stride) == {1} else None
        if (flipped_pads is not None and _winograd_fits("forward", xp, g, kernel, stride, flipped_pads, dilation, 1, w.shape[1])
                and _winograd_fits("weight", xp, x, kernel, stride, pads, dilation, groups, w.shape[0])
                and tuple(g.shape[2:]) == _winograd.out_size(in_size, pads)):
            both = _winograd.grads_at_once(xp, g, x, _flipped(w), flipped_pads, pads)
            if both is not None:
                return both
    return _conv_t_fwd(xp, g, w, in_size=in_size, **p), _conv_w_fwd(xp, x, g, kernel=kernel, **p)


def _conv_t_vjp(g, out, y, w, *b, in_size, **p):
    gy = _fit(apply(_conv, g, w, **p), y) if y.requires_grad else None
    gw = apply(_conv_w, g, y, kernel=tuple(w.shape[2:]), **p) if w.requires_grad else None
    return (gy, gw) + _bias_grad(g, b)


def _fit(t, like):
    """A convolution over a transposed convolution's output: with output padding (stride 1 with
    dilation) the windows starting in the extra rows belong to no input position."""
    if t.shape == like.shape:
        return t
    return t[(slice(None), slice(None)) + tuple(slice(0, n) for n in like.shape[2:])]


def _conv_w_vjp(g, out, x, gy, *, kernel, **p):
    gx = apply(_conv_t, gy, g, in_size=tuple(x.shape[2:]), **p) if x.requires_grad else None
    ggy = _fit(apply(_conv, x, g, **p), gy) if gy.requires_grad else None
    return gx, ggy


# FLOPs as PyTorch counts them: 2 per multiply-add
def _conv_cost(shapes, out) -> int:
    """x (N, C, *), w (O, C/groups, *kernel): every output element is a C/g*K dot product."""
    return 2 * math.prod(out) * math.prod(shapes[1][1:])


def _conv_t_cost(shapes, out) -> int:
    """The adjoint of a conv in its input: the multiply-adds of the conv producing ``shapes[0]``."""
    return 2 * math.prod(shapes[0]) * math.prod(shapes[1][1:])


def _conv_w_cost(shapes, out) -> int:
    """The adjoint in the weight: each output-gradient element meets one C/g*K window."""
    return 2 * math.prod(shapes[1]) * math.prod(out[1:])


def _conv_bwd_cost(shapes, out) -> int:
    """Both adjoints (``g, x, w``): each output-gradient element meets one C/g*K window, twice."""
    return 4 * math.prod(shapes[0]) * math.prod(shapes[2][1:])


def _conv_aten(shapes, params) -> str:
    """PyTorch's calls for a convolution, ``conv2d`` by the weight's rank (its FLOPs on ``aten::conv2d``)."""
    return f"conv{len(shapes[1]) - 2}d*(convolution(_convolution(mkldnn_convolution)))"


def _conv_t_aten(shapes, params) -> str:
    return f"conv_transpose{len(shapes[1]) - 2}d*(convolution(_convolution))"


def _by_rank(form: str):
    """The ``aten`` of a pooling op: ``form`` with ``{n}`` the spatial rank of its (batched) input."""
    return lambda shapes, params: form.format(n=max(len(shapes[0]) - 2, 1))


def _max_pool_node(default: str):
    """The ``backward_name`` of a max pooling op: PyTorch's ``MaxPool2DWithIndicesBackward0`` for a batch of
    images (or volumes: 3D), ``default`` for other ranks."""
    def name(ndims, params) -> str:
        n = ndims[0] if ndims else None
        return {None: "MaxPool2DWithIndicesBackward0", 4: "MaxPool2DWithIndicesBackward0",
                5: "MaxPool3DWithIndicesBackward0"}.get(n, default)
    return name


_BN = "batch_norm(_batch_norm_impl_index(native_batch_norm))"   # PyTorch's calls for F.batch_norm


# aliases: the ``torch.<name>`` front ends (tapelab/_nn_toplevel.py) of these ops
# (the forwards check their operands' dtypes themselves, as ATen refuses mixed ones)
_conv = Op("convolution", _conv_fwd, _conv_vjp, saves=OTHERS, cost=_conv_cost,
           aliases=("conv1d", "conv2d"), onnx=_onnx_conv, aten=_conv_aten)
_conv_t = Op("convolution_transpose", _conv_t_fwd, _conv_t_vjp, saves=OTHERS, cost=_conv_t_cost,
             backward_name="ConvolutionBackward0",
             aliases=("conv_transpose2d",), onnx=_onnx_conv_transpose, aten=_conv_t_aten)
_conv_w = Op("convolution_weight", _conv_w_fwd, _conv_w_vjp, promote="common", saves=OTHERS, cost=_conv_w_cost,
             aten="convolution_backward")
# a plain backward's two gradients (the weight's an extra output); under create_graph the vjp keeps the two
# differentiable ops above
_conv_bwd = Op("convolution_backward", _conv_bwd_fwd, None, n_extra=1, cost=_conv_bwd_cost, aten="convolution_backward")


def convolution(x: Tensor, w: Tensor, stride: tuple, pads: tuple, dilation: tuple, groups: int,
                bias: Tensor | None = None) -> Tensor:
    """Cross-correlation of ``x (N, C, *sp)`` with ``w (O, C/groups, *kernel)``, plus ``bias (O,)``."""
    return apply(_conv, x, w, *((bias,) if bias is not None else ()), stride=stride, pads=pads,
                 dilation=dilation, groups=groups)


def convolution_transpose(y: Tensor, w: Tensor, stride: tuple, pads: tuple, dilation: tuple, groups: int,
                          in_size: tuple, bias: Tensor | None = None) -> Tensor:
    """Transposed convolution of ``y (N, O, *sp)`` with ``w (O, C/groups, *kernel)`` to ``in_size``,
    plus ``bias (C,)``."""
    return apply(_conv_t, y, w, *((bias,) if bias is not None else ()), stride=stride, pads=pads,
                 dilation=dilation, groups=groups, in_size=in_size)


def convolution_weight(x: Tensor, gy: Tensor, stride: tuple, pads: tuple, dilation: tuple, groups: int,
                       kernel: tuple) -> Tensor:
    return apply(_conv_w, x, gy, stride=stride, pads=pads, dilation=dilation, groups=groups, kernel=kernel)


# ---------------------------------------------------------------- pooling
def pool_output_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length (in ceil mode the last window must start inside the input)."""
    eff = d * (k - 1) + 1
    num = size + 2 * p - eff
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_pads(size, kernel, stride, padding, dilation, out):
    """Symmetric padding plus whatever extra the last (ceil-mode) window reaches on the right."""
    return tuple((p, max(p, (o - 1) * s + d * (k - 1) + 1 - n - p))
                 for n, k, s, p, d, o in zip(size, kernel, stride, padding, dilation, out))


def _max_pool_idx_fwd(xp, x, *, kernel, stride, padding, dilation, out_size):
    out = out_size
    nd = len(kernel)
    size = x.shape[2:]
    low = -xp.inf if x.dtype.kind in FLOATING_KINDS else xp.iinfo(x.dtype).min
    pads = _pool_pads(size, kernel, stride, padding, dilation, out)
    win = _windows(xp, _pad(xp, x, pads, low), kernel, stride, dilation, out)
    k = win.reshape(win.shape[:2 + nd] + (-1,)).argmax(-1)        # offset inside each window
    flat = 0
    for i, ki in enumerate(xp.unravel_index(k, kernel)):
        o = xp.arange(out[i]).reshape((-1,) + (1,) * (nd - 1 - i))
        flat = flat * size[i] + (o * stride[i] - padding[i] + ki * dilation[i])
    return flat.astype(xp.int64)


def _take_fwd(xp, x, idx):
    n, c = x.shape[:2]
    return xp.take_along_axis(x.reshape(n, c, -1), idx.reshape(n, c, -1), 2).reshape(idx.shape)


def _put_fwd(xp, g, idx, *, size):
    """Scatter-add ``g`` into a zero ``(N, C, *size)`` array at flat spatial positions ``idx``."""
    n, c = g.shape[:2]
    m = math.prod(size)
    flat = (idx.reshape(n * c, -1) + xp.arange(n * c).reshape(-1, 1) * m).ravel()
    res = xp.bincount(flat, weights=g.ravel(), minlength=n * c * m)
    return res.astype(g.dtype, copy=False).reshape((n, c) + tuple(size))


_max_pool_idx = Op("max_pool_indices", _max_pool_idx_fwd, onnx=_onnx_max_pool_indices,
                   aten=_by_rank("max_pool{n}d_with_indices"))
_take = Op("max_pool", _take_fwd, lambda g, out, x, idx: (apply(_put, g, idx, size=tuple(x.shape[2:])), None),
           saves=NONE, aliases=("max_pool1d", "max_pool2d"), onnx=_onnx_pool_take,
           backward_name=_max_pool_node("MaxPoolBackward0"), aten=_by_rank("max_pool{n}d"))
_put = Op("max_pool_backward", _put_fwd, lambda g, out, gy, idx, *, size: (apply(_take, g, idx), None),
          saves=NONE, aten=_by_rank("max_pool{n}d_with_indices_backward"))


def max_pool(x: Tensor, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
             ceil_mode: bool) -> tuple[Tensor, Tensor]:
    """Max over windows of ``x (N, C, *sp)``; returns values and flat spatial argmax indices."""
    out = tuple(pool_output_size(n, k, s, p, d, ceil_mode)
                for n, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation))
    idx = apply(_max_pool_idx, x, kernel=kernel, stride=stride, padding=padding, dilation=dilation, out_size=out)
    return apply(_take, x, idx), idx


# Non-overlapping windows (kernel == stride, no padding or dilation, sizes divisible: the common 2x2
# pool) need no window view and no indices: ``x`` reshapes to blocks ``(N, C, o1, k1, o2, k2, ...)``
# and every op loops over the prod(kernel) offsets with elementwise ops on ``(N, C, *out)`` slices
# (numpy's multi-axis reductions over such strided blocks measured ~25x slower). The gradient goes
# to the first maximum of each window in row-major order (the first NaN if there is one), exactly
# where the index path's argmax puts it, so ties (all-zero windows after a ReLU) match PyTorch.
def blocks_divide(size, kernel, stride, padding, dilation=None) -> bool:
    """Whether pooling with these arguments is a non-overlapping block reduction."""
    return (tuple(kernel) == tuple(stride) and not any(padding) and all(d == 1 for d in dilation or ())
            and all(n % k == 0 and n > 0 for n, k in zip(size, kernel)))


def _block_view(x, kernel):
    return x.reshape(tuple(x.shape[:2]) + sum(((n // k, k) for n, k in zip(x.shape[2:], kernel)), ()))


def _block_offsets(kernel):
    """Index tuples into a block view, one per kernel offset, in row-major window order."""
    return [(slice(None), slice(None)) + sum(((slice(None), k) for k in kk), ())
            for kk in itertools.product(*map(range, kernel))]


def _first_max_masks(xp, xb, y, kernel):
    """``(offset index, bool mask over (N, C, *out))``: where each window's first maximum sits.
    A mask is "equal to the maximum, and no earlier offset was" as one ``>`` of booleans; without
    NaN the last offset is not compared (the maximum is there wherever no earlier offset holds it).
    The block slices are strided, so each saved pass counts (2.5x faster than masking each offset
    with a copy, an invert and two ands). A mask is valid until the next one is drawn."""
    # a window holding NaN has a NaN maximum, so the per-offset NaN test runs only if y has one
    # (asking is a host read: only on host memory; a device always tests, and stays capturable)
    floating = y.dtype.kind in FLOATING_KINDS
    nan = floating and (bool(xp.isnan(y).any()) if is_numpy(xp) else True)
    offs = _block_offsets(kernel)
    taken = None
    for i, off in enumerate(offs):
        if i == len(offs) - 1 and not nan:
            yield off, (~taken if taken is not None else xp.ones(y.shape, bool))
            return
        e = xb[off] == y
        if nan:
            e |= xp.isnan(xb[off])
        if taken is None:
            taken = e
            yield off, e
        else:
            yield off, e > taken
            taken |= e


def _max_blocks_fwd(xp, x, *, kernel):
    # 2x2 on float32: one loop (kernels/pool.py max2x2, 3x numpy's four strided maximum passes on
    # the CNN's shapes, the same values); else numpy's passes. On the host the images split over
    # the intra-op threads (the loop and numpy's passes release the GIL)
    y = xp.empty(tuple(x.shape[:2]) + tuple(n // k for n, k in zip(x.shape[2:], kernel)), x.dtype)
    if tuple(kernel) == (2, 2) and kernels.use(xp, x):
        kernels.parallel(kernels.loops("pool").max2x2, 2, y, x, False)
    elif is_numpy(xp):
        kernels.parallel(_max_blocks_into, 2, y, x, xp, kernel)
    else:
        _max_blocks_into(y, x, xp, kernel)
    return y


def _max_blocks_into(y, x, xp, kernel) -> None:
    """``y``, each block's maximum of ``x`` (a thread's images, or all)."""
    xb = _block_view(x, kernel)
    offs = _block_offsets(kernel)
    y[...] = xb[offs[0]]
    for off in offs[1:]:
        xp.maximum(y, xb[off], out=y)


def _max_blocks_put_fwd(xp, g, x, y, *, kernel):
    """``g`` (shape of ``y``) placed at each window's first maximum of ``x``, zeros elsewhere."""
    if tuple(kernel) == (2, 2) and kernels.use(xp, x, g, y):
        res = xp.empty(x.shape, g.dtype)
        kernels.parallel(kernels.loops("pool").max2x2_put, 4, x, y, res, g, False)
        return res
    if len(kernel) == 2 and kernels.use(xp, x, g):
        res = xp.zeros(x.shape, g.dtype)
        kernels.parallel(kernels.loops("pool").max_blocks_put, 3, x, res, g, *kernel)
        return res
    xb = _block_view(x, kernel)
    res = xp.empty(xb.shape, g.dtype)       # every offset written once: no zero fill
    # ``g * mask`` straight into the strided slots is one pass per offset (``where`` is two, 1.7x
    # slower); the products' -0.0 (negative g) become 0.0 in one contiguous add, and a non-finite
    # g, whose products with False would be NaN, takes ``where``. Asking is a host read: only on
    # host memory (a device takes ``where``, so a cuda step stays capturable as one graph)
    finite = not has_data(xp) or (is_numpy(xp) and bool(xp.isfinite(g).all()))
    for off, m in _first_max_masks(xp, xb, y, kernel):
        if finite:
            xp.multiply(g, m, out=res[off])
        else:
            res[off] = xp.where(m, g, g.dtype.type(0))
    if finite:
        res += g.dtype.type(0)
    return res.reshape(x.shape)


def _max_blocks_take_fwd(xp, g, x, y, *, kernel):
    """The adjoint of ``_max_blocks_put`` in ``g``: reads ``g`` (shape of ``x``) at the maxima."""
    gb = _block_view(g, kernel)
    res = xp.zeros(y.shape, g.dtype)
    for off, m in _first_max_masks(xp, _block_view(x, kernel), y, kernel):
        xp.copyto(res, gb[off], where=m)
    return res


_max_blocks = Op("max_pool_blocks", _max_blocks_fwd,
                 lambda g, out, x, *, kernel: (apply(_max_blocks_put, g, x.detach(), out.detach(), kernel=kernel),),
                 save_output=True, recomputes_output=True,
                 onnx=lambda g, x, *, kernel: g.op("MaxPool", x, kernel_shape=list(kernel), strides=list(kernel)),
                 backward_name=_max_pool_node("MaxPoolBlocksBackward0"),
                 aten=_by_rank("max_pool{n}d(max_pool{n}d_with_indices)"))
_max_blocks_put = Op("max_pool_blocks_backward", _max_blocks_put_fwd,
                     lambda g, out, gy, x, y, *, kernel: (apply(_max_blocks_take, g, x, y, kernel=kernel), None, None),
                     saves=OTHERS, aten=_by_rank("max_pool{n}d_with_indices_backward"))
_max_blocks_take = Op("max_pool_blocks_take", _max_blocks_take_fwd,
                      lambda g, out, gx, x, y, *, kernel: (apply(_max_blocks_put, g, x, y, kernel=kernel), None, None),
                      saves=OTHERS)


def max_pool_blocks(x: Tensor, kernel: tuple) -> Tensor:
    """Max over non-overlapping ``kernel`` blocks of ``x (N, C, *sp)`` (see ``blocks_divide``)."""
    return apply(_max_blocks, x, kernel=tuple(kernel))


def _avg_divisor(xp, size, kernel, stride, padding, out, count_include_pad, dtype):
    """How many elements each window averages over, as PyTorch counts them (shape ``out``)."""
    div = 1
    for i, (n, k, s, p, o) in enumerate(zip(size, kernel, stride, padding, out)):
        counts = []
        for j in range(o):
            start = j * s - p
            end = min(start + k, n + p)
            counts.append(end - start if count_include_pad else min(end, n) - max(start, 0))
        div = div * xp.asarray(counts, dtype).reshape((-1,) + (1,) * (len(size) - 1 - i))
    return div


def _avg_loop(name, src, out_shape, size, kernel, stride, padding, count_include_pad, divisor):
    """ATen's ``cpu_avg_pool``/``cpu_avg_pool3d`` (and their backwards) through ``kernels/resample.py``:
    each window's in-bounds values summed in row-major order (added in output order backward) and
    divided once by the integer divisor; ``src`` (N, C, *sp) float32/float64, 1-d and 2-d as 3-d."""
    pad = 3 - len(kernel)
    planes = np.ascontiguousarray(src).reshape((-1,) + (1,) * pad + tuple(src.shape[2:]))
    res = (np.empty if name == "avg_pool3d" else np.zeros)((planes.shape[0],) + (1,) * pad + tuple(size), src.dtype)
    k, s, p = ((1,) * pad + tuple(kernel), (1,) * pad + tuple(stride), (0,) * pad + tuple(padding))
    kernels.parallel(getattr(kernels.loops("resample"), name), 2, planes, res, *k, *s, *p, bool(count_include_pad),
                     int(divisor or 0), np.zeros(1, src.dtype))
    return res.reshape(tuple(src.shape[:2]) + tuple(out_shape if name == "avg_pool3d" else size))


def _avg_loops(xp, a) -> bool:
    return kernels.enabled() and xp is np and a.dtype in (np.float32, np.float64) and len(a.shape) <= 5


def _avg_fwd(xp, x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor, out_size):
    if x.dtype in REDUCED_NP and len(kernel) <= 2:   # ATen sums each window in float32, rounds the mean once
        return in_opmath(_avg_fwd, xp, x, kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad, divisor=divisor, out_size=out_size)
    out = out_size
    nd = len(kernel)
    if _avg_loops(xp, x) and not blocks_divide(x.shape[2:], kernel, stride, padding):
        return _avg_loop("avg_pool3d", x, out, out, kernel, stride, padding, count_include_pad, divisor)
    if blocks_divide(x.shape[2:], kernel, stride, padding):
        xb = _block_view(x, kernel)
        offs = _block_offsets(kernel)
        total = xp.array(xb[offs[0]], copy=True)
        for off in offs[1:]:
            total += xb[off]
    else:
        pads = _pool_pads(x.shape[2:], kernel, stride, padding, (1,) * nd, out)
        win = _windows(xp, _pad(xp, x, pads), kernel, stride, (1,) * nd, out)
        total = win.sum(axis=tuple(range(-nd, 0)))
    if divisor is None:
        return total / _avg_divisor(xp, x.shape[2:], kernel, stride, padding, out, count_include_pad, x.dtype)
    return total / x.dtype.type(divisor)


def _avg_bwd_reduced(xp, delta, size, kernel, stride, padding):
    """ATen's backward in bfloat16/half where windows overlap: each window's ``delta`` (``g / divisor``,
    rounded) added to its in-bounds inputs window by window in row-major output order, each add rounded."""
    res = xp.zeros(delta.shape[:2] + tuple(size), delta.dtype)
    for pos in itertools.product(*map(range, delta.shape[2:])):
        win = tuple(slice(max(o * s - p, 0), min(o * s - p + k, n)) for o, s, p, k, n in zip(pos, stride, padding,
                                                                                        kernel, size))
        res[(slice(None), slice(None)) + win] += delta[(slice(None), slice(None)) + pos + (None,) * len(pos)]
    return res


def _avg_bwd_fwd(xp, g, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor, out_size, size):
    out = out_size
    nd = len(kernel)
    if _avg_loops(xp, g) and not blocks_divide(size, kernel, stride, padding):
        return _avg_loop("avg_pool3d_backward", g, out, size, kernel, stride, padding, count_include_pad, divisor)
    if divisor is None:
        g = g / _avg_divisor(xp, size, kernel, stride, padding, out, count_include_pad, np.int64).astype(g.dtype)
    else:
        g = g / g.dtype.type(divisor)
    if g.dtype in REDUCED_NP and not blocks_divide(size, kernel, stride, padding):
        return _avg_bwd_reduced(xp, g, size, kernel, stride, padding)
    if blocks_divide(size, kernel, stride, padding):
        res = xp.empty(g.shape[:2] + sum(((o, k) for o, k in zip(out, kernel)), ()), g.dtype)
        for off in _block_offsets(kernel):
            res[off] = g
        return res.reshape(g.shape[:2] + tuple(size))
    pads = _pool_pads(size, kernel, stride, padding, (1,) * nd, out)
    pieces = ((kk, g) for kk in itertools.product(*map(range, kernel)))
    full = _scatter_windows(xp, g.shape[:2] + _padded_size(size, pads), pieces, out, stride, (1,) * nd, g.dtype)
    return _crop(full, pads, size)


_avg = Op("avg_pool", _avg_fwd,
          lambda g, out, x, **p: (apply(_avg_bwd, g, size=tuple(x.shape[2:]), **p),), saves=NONE,
          aliases=("avg_pool1d",), onnx=_onnx_avg_pool, aten=_by_rank("avg_pool{n}d"))
_avg_bwd = Op("avg_pool_backward", _avg_bwd_fwd,
              lambda g, out, gy, *, size, **p: (apply(_avg, g, **p),), saves=NONE,
              aten=_by_rank("avg_pool{n}d_backward"))


def avg_pool(x: Tensor, kernel: tuple, stride: tuple, padding: tuple, ceil_mode: bool,
             count_include_pad: bool, divisor_override: int | None) -> Tensor:
    out = tuple(pool_output_size(n, k, s, p, 1, ceil_mode)
                for n, k, s, p in zip(x.shape[2:], kernel, stride, padding))
    return apply(_avg, x, kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                 count_include_pad=count_include_pad, divisor=divisor_override, out_size=out)


# ---------------------------------------------------------------- unfold / fold
def _im2col_fwd(xp, x, *, kernel, dilation, pads, stride):
    nd = len(kernel)
    win = _windows(xp, _pad(xp, x, pads), kernel, stride, dilation)
    cols = win.transpose((0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd)))
    return cols.reshape(x.shape[0], x.shape[1] * math.prod(kernel), -1)


def _col2im_fwd(xp, cols, *, size, kernel, dilation, pads, stride):
    out = tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                for n, (lo, hi), k, d, s in zip(size, pads, kernel, dilation, stride))
    n, ck = cols.shape[:2]
    c = ck // math.prod(kernel)
    blocks = cols.reshape((n, c) + tuple(kernel) + out)
    pieces = ((kk, blocks[(slice(None), slice(None)) + kk]) for kk in itertools.product(*map(range, kernel)))
    full = _scatter_windows(xp, (n, c) + _padded_size(size, pads), pieces, out, stride, dilation, cols.dtype)
    return _crop(full, pads, size)


_im2col = Op("im2col", _im2col_fwd,
             lambda g, out, x, **p: (apply(_col2im, g, size=tuple(x.shape[2:]), **p),), saves=NONE, onnx=_onnx_im2col)
_col2im = Op("col2im", _col2im_fwd,
             lambda g, out, cols, *, size, **p: (apply(_im2col, g, **p),), saves=NONE, onnx=_onnx_col2im)


def im2col(x: Tensor, kernel: tuple, dilation: tuple, pads: tuple, stride: tuple) -> Tensor:
    """``(N, C, *sp)`` -> ``(N, C * prod(kernel), L)``: every sliding block as a column."""
    return apply(_im2col, x, kernel=kernel, dilation=dilation, pads=pads, stride=stride)


def col2im(cols: Tensor, size: tuple, kernel: tuple, dilation: tuple, pads: tuple, stride: tuple) -> Tensor:
    """The adjoint of ``im2col``: sums overlapping blocks back into ``(N, C, *size)``."""
    return apply(_col2im, cols, size=size, kernel=kernel, dilation=dilation, pads=pads, stride=stride)


# ---------------------------------------------------------------- batch normalisation
# ``(x - mean) / sqrt(biased var + eps)`` per channel, then the optional per-channel scale and
# shift, as one primitive (the composite took ~20 full passes and ~25 dispatches forward+backward;
# the separate affine mul and add 2 more passes and 4 dispatches). Its vjp, while no graph is built
# for it, is ``batch_norm_grads``: the input, weight and bias gradients share the sums
# ``sum(g)`` and ``sum(g * xhat)`` (12 passes over x-sized arrays where the affine ops' vjps and
# ``batch_norm_backward`` took 16). Under ``create_graph`` the vjp is ``batch_norm_backward`` and
# Tensor ops, whose own vjp is the closed form below, so every order of derivative stays exact.
# float32 numpy arrays take the loops of engine/kernels/batchnorm.py, which follow ATen's cpu order
# of operations bit for bit (train and eval, (N, C) and (N, C, *)); the numpy formulas (other dtypes,
# other array namespaces, TAPELAB_EAGER_KERNELS=0) follow the same formulas (``x * alpha + beta``,
# the same gradient expressions) with numpy's sums, so they agree within float32 rounding.
def _bn_stats(xp, x, dims, eps):
    mean = x.mean(axis=dims, keepdims=True)
    c = x - mean
    var_sum = xp.sum(c * c, axis=dims, keepdims=True)
    m = math.prod(x.shape[d] for d in dims)
    var = (var_sum / m).astype(x.dtype, copy=False)
    return mean, var, c, (1 / xp.sqrt(var + x.dtype.type(eps))).astype(x.dtype, copy=False), var_sum


def _bn_loops(xp, x, dims, affine) -> bool:
    """Whether the batch-norm loops (engine/kernels/batchnorm.py) take this call: numpy float32,
    contiguous, channels at dim 1 with any spatial dims after them, every dim but 1 reduced."""
    return x.ndim >= 2 and tuple(dims) == (0,) + tuple(range(2, x.ndim)) and kernels.use(xp, x, *affine)


def _bn_affine(xp, x, affine, has_weight):
    """The per-channel weight and bias arrays the loops take (ones and zeros where absent)."""
    c = x.shape[1]
    w = affine[0] if has_weight else xp.ones(c, x.dtype)
    b = affine[-1] if len(affine) > has_weight else xp.zeros(c, x.dtype)
    return w, b


def _ncl(x):
    """``x`` as ``(N, C, L)``: the loops' layout (``L`` 1 for ``(N, C)`` input)."""
    return x.reshape(x.shape[0], x.shape[1], -1)


def _bn_fwd_saving(xp, x, *affine, dims, eps, has_weight=False):
    """The output, the batch mean, biased variance and unbiased variance (the running estimate's),
    then the flat mean and ``1 / sqrt(var + eps)`` (ATen's ``save_mean``/``save_invstd``) for the
    backward to reuse: the loops compute them in float64 sequential passes over x, which a
    recomputation would repeat."""
    if _bn_loops(xp, x, dims, affine):
        c = x.shape[1]
        out, mean, var, unbiased = xp.empty_like(x), xp.empty(c, x.dtype), xp.empty(c, x.dtype), xp.empty(c, x.dtype)
        invstd = xp.empty(c, x.dtype)
        kernels.loops("batchnorm").forward(_ncl(x), *_bn_affine(xp, x, affine, has_weight), eps, _ncl(out), mean,
                                           var, unbiased, invstd)
        return out, mean, var, unbiased, mean, invstd
    mean, var, _, s, var_sum = _bn_stats(xp, x, dims, eps)
    m = math.prod(x.shape[d] for d in dims)
    alpha = s * affine[0].reshape(s.shape) if has_weight else s
    beta = -mean * alpha
    if len(affine) > has_weight:
        beta += affine[-1].reshape(s.shape)
    out = x * alpha
    out += beta
    unbiased = (var_sum / max(m - 1, 1)).astype(x.dtype, copy=False)
    return out, mean.reshape(-1), var.reshape(-1), unbiased.reshape(-1), mean.reshape(-1), s.reshape(-1)


def _bn_fwd(xp, x, *affine, dims, eps, has_weight=False):
    """The output, the batch mean, biased variance and unbiased variance (the running estimate's)."""
    return _bn_fwd_saving(xp, x, *affine, dims=dims, eps=eps, has_weight=has_weight)[:4]


def _bn_vjp(g, out, x, *affine, dims, eps, has_weight=False):
    w = affine[0] if has_weight else None
    b = affine[-1] if len(affine) > has_weight else None
    if affine and not is_grad_enabled():
        gx, gw, gb = apply(_bn_grads, g, x, *affine, dims=dims, eps=eps, has_weight=has_weight)
        grads = [gx if x.requires_grad else None]
        grads += [gw if w.requires_grad else None] if w is not None else []
        return tuple(grads + ([gb if b.requires_grad else None] if b is not None else []))
    chan = (-1,) + (1,) * (x.ndim - 2)
    grads = [apply(_bn_bwd, g if w is None else g * w.reshape(chan), x, dims=dims, eps=eps)
             if x.requires_grad else None]
    if w is not None:
        grads.append((g * apply(_bn, x, dims=dims, eps=eps)[0]).sum(dims) if w.requires_grad else None)
    if b is not None:
        grads.append(g.sum(dims) if b.requires_grad else None)
    return tuple(grads)


def _bn_grads_fwd(xp, g, x, *affine, dims, eps, has_weight, saved=False):
    """``gx = s w (g - mean(g) - xhat mean(g xhat))``, ``gw = sum(g xhat)``, ``gb = sum(g)``; with
    ``saved``, ``affine`` ends with the forward's flat mean and ``s`` (the loops read them, not
    recomputed; numpy's formula recomputes, as it always rounded so)."""
    stats = (None, None)
    if saved:
        affine, stats = affine[:-2], affine[-2:]
    if _bn_loops(xp, x, dims, (g,) + affine):
        return _bn_grads_loop(xp, g, x, affine[0] if has_weight else xp.ones(x.shape[1], x.dtype), eps, *stats)
    mean, _, c, s, _ = _bn_stats(xp, x, dims, eps)
    m = math.prod(x.shape[d] for d in dims)
    acc = "float32" if x.dtype.itemsize < 4 else x.dtype       # float16 sums overflow past 65504
    gb = g.sum(axis=dims, keepdims=True, dtype=acc)
    dotp = (g * c).sum(axis=dims, keepdims=True, dtype=acc)          # sum(g (x - mean)), ATen's dotp
    k = (dotp.astype(x.dtype) * s * s / x.dtype.type(m)).astype(x.dtype, copy=False)
    res = g - (gb / m).astype(x.dtype)
    c *= k
    res -= c
    res *= s
    if has_weight:
        res *= affine[0].reshape(s.shape)
    return res, (dotp * s).reshape(-1).astype(x.dtype), gb.reshape(-1).astype(x.dtype)


def _bn_grads_loop(xp, g, x, w, eps, mean=None, invstd=None):
    """The loops' gradients; they recompute the statistics where the forward's are not given."""
    c = x.shape[1]
    gx, gw, gb = xp.empty_like(x), xp.empty(c, x.dtype), xp.empty(c, x.dtype)
    kernels.loops("batchnorm").backward(_ncl(g), _ncl(x), w, eps, _ncl(gx), gw, gb, mean, invstd)
    return gx, gw, gb


def _bn_bwd_fwd(xp, g, x, *, dims, eps):
    """``s * (g - mean(g) - xhat * mean(g * xhat))``: the normalisation's vjp."""
    if _bn_loops(xp, x, dims, (g,)):
        return _bn_grads_loop(xp, g, x, xp.ones(x.shape[1], x.dtype), eps)[0]
    return _bn_grads_fwd(xp, g, x, dims=dims, eps=eps, has_weight=False)[0]


def _bn_bwd_vjp(v, out, g, x, *, dims, eps):
    """H(g, x) = s (g - gbar) - s^3 m c with c = x - mean, m = mean(g c): H is self-adjoint in g;
    in x, d<v, H>/dx = -s^3 c (P - 3 s^2 m Q) / M - s^3 Q (g - gbar) / M - s^3 m (v - vbar)
    with P = sum(v (g - gbar)), Q = sum(v c) (ds/dx = -s^3 c / M, dm/dx = (g - gbar) / M)."""
    gg = apply(_bn_bwd, v, x, dims=dims, eps=eps) if g.requires_grad else None
    gx = None
    if x.requires_grad:
        n = math.prod(x.shape[d] for d in dims)
        c = x - x.mean(dims, keepdim=True)
        s = ((c * c).mean(dims, keepdim=True) + eps).rsqrt()
        s3 = s * s * s
        gc = g - g.mean(dims, keepdim=True)
        m = (g * c).mean(dims, keepdim=True)
        p = (v * gc).sum(dims, keepdim=True)
        q = (v * c).sum(dims, keepdim=True)
        gx = s3 * (c * ((3 * s * s * m * q - p) / n) - gc * (q / n) - m * (v - v.mean(dims, keepdim=True)))
    return gg, gx


def _bn_passthrough(xp, x, *rest, dims, eps, has_weight=False):
    """The differentiable op's forward: the output ``batch_norm_normalize_forward`` made."""
    return rest[-3]


def _bn_saved_vjp(g, out, x, *rest, dims, eps, has_weight=False):
    """The vjp of the pass-through op: ``rest`` ends with the raw output and the forward's flat mean
    and ``1 / sqrt(var + eps)``, which the loops' backward reads instead of recomputing."""
    *affine, _, mean, invstd = rest
    if is_grad_enabled():                                   # create_graph: the differentiable formulas
        return _bn_vjp(g, out, x, *affine, dims=dims, eps=eps, has_weight=has_weight) + (None,) * 3
    gx, gw, gb = apply(_bn_grads, g, x, *affine, mean, invstd, dims=dims, eps=eps, has_weight=has_weight,
                       saved=True)
    grads = [gx if x.requires_grad else None] + [
        grad if t.requires_grad else None for t, grad in zip(affine, (gw, gb) if has_weight else (gb,))]
    return tuple(grads) + (None,) * 3


_bn = Op("batch_norm_normalize", _bn_fwd, _bn_vjp, promote="float", n_extra=3, onnx=_onnx_bn,
         backward_name="NativeBatchNormBackward0", aten=_BN)
_bn_bwd = Op("batch_norm_backward", _bn_bwd_fwd, _bn_bwd_vjp, promote="float", aten="native_batch_norm_backward")
_bn_grads = Op("batch_norm_grads", _bn_grads_fwd, promote="float", n_extra=2,   # runs with grad off only
               aten="native_batch_norm_backward")
_bn_saving = Op("batch_norm_normalize_forward", _bn_fwd_saving, None, promote="float", n_extra=5, aten=_BN)
_bn_saved = Op("batch_norm_normalize_saved_stats", _bn_passthrough, _bn_saved_vjp, promote="float", n_kept=3,
               backward_name="NativeBatchNormBackward0")


def batch_norm_normalize(x: Tensor, dims: tuple, eps: float, weight: Tensor | None = None,
                         bias: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(x - mean) / sqrt(var + eps)`` over ``dims``, times ``weight`` plus ``bias`` (per channel,
    dim 1) when given, and the flat (non-differentiable) mean, biased variance and unbiased
    variance (``var_sum / (M - 1)``, rounded as ATen rounds it for the running estimate)."""
    affine = tuple(t for t in (weight, bias) if t is not None)
    params = dict(dims=tuple(dims), eps=float(eps), has_weight=weight is not None)
    if keeps_forward_state(x, *affine):
        out, mean, var, unbiased, save_mean, invstd = apply(_bn_saving, x, *affine, **params)
        return apply(_bn_saved, x, *affine, out, save_mean, invstd, **params), mean, var, unbiased
    return apply(_bn, x, *affine, **params)


# Eval mode: the stored statistics, ``out = x * alpha + beta`` with ``alpha = invstd * w`` and
# ``beta = b - mean * alpha`` per channel (ATen's ``batch_norm_cpu_collect_linear_and_constant_terms``),
# one primitive whose gradients are ATen's: ``gx = (g * invstd) * w``, ``gw = sum((x - mean) g) * invstd``,
# ``gb = sum(g)``, invstd there from the float64 ``1 / sqrt(var + eps)`` (ATen's backward computes it so).
def _onnx_bn_eval(g, x, rm, rv, *affine, eps, has_weight=False):
    """ONNX's inference BatchNormalization (which onnxruntime folds into a preceding Conv)."""
    c, dt = g.shape(x)[1], g.dtype(x)
    w = affine[0] if has_weight else g.const(np.ones(c, dt))
    b = affine[-1] if len(affine) > has_weight else g.const(np.zeros(c, dt))
    return g.op("BatchNormalization", x, w, b, rm, rv, epsilon=float(eps))


def _bn_eval_arrays(xp, x, rm, rv, affine, has_weight):
    dims = (0,) + tuple(range(2, x.ndim))
    return dims, _bn_loops(xp, x, dims, (rm, rv) + tuple(affine))


def _bn_eval_reduced(xp, x, rm, rv, affine, eps, has_weight):
    """Eval batch norm of a bfloat16/half ``x``: ``alpha = w / sqrt(rv + eps)``, ``beta = b - rm alpha``
    per channel in float32, then ``fma(x, alpha, beta)`` in float32, rounded to the dtype."""
    f32 = xp.float32
    inv = f32(1) / xp.sqrt(rv.astype(f32) + f32(eps))
    alpha = inv * affine[0].astype(f32) if has_weight else inv
    beta = -(rm.astype(f32) * alpha)
    if len(affine) > has_weight:
        beta = affine[-1].astype(f32) - rm.astype(f32) * alpha
    shape = (1, -1) + (1,) * (x.ndim - 2)   # fused: float64's exact product, then the sum rounded
    out = x.astype(xp.float64) * alpha.reshape(shape).astype(xp.float64) + beta.reshape(shape).astype(xp.float64)
    return out.astype(f32).astype(x.dtype)


def _bn_eval_fwd(xp, x, rm, rv, *affine, eps, has_weight=False):
    if x.dtype in REDUCED_NP:   # ATen's float32 scale and shift, x * alpha + beta rounded once
        return _bn_eval_reduced(xp, x, rm, rv, affine, eps, has_weight)
    dims, loops = _bn_eval_arrays(xp, x, rm, rv, affine, has_weight)
    if loops:
        out = xp.empty_like(x)
        w, b = _bn_affine(xp, x, affine, has_weight)
        kernels.loops("batchnorm").eval_forward(_ncl(x), rm, rv, w, b, eps, _ncl(out))
        return out
    chan = (-1,) + (1,) * (x.ndim - 2)
    t = x.dtype.type
    alpha = (t(1) / xp.sqrt(rv + t(eps))).astype(x.dtype, copy=False)
    if has_weight:
        alpha = alpha * affine[0]
    beta = -rm * alpha
    if len(affine) > has_weight:
        beta = beta + affine[-1]
    out = x * alpha.reshape(chan)
    out += beta.reshape(chan)
    return out


def _bn_eval_vjp(g, out, x, rm, rv, *affine, eps, has_weight=False):
    w = affine[0] if has_weight else None
    b = affine[-1] if len(affine) > has_weight else None
    if not is_grad_enabled():
        gx, gw, gb = apply(_bn_eval_grads, g, x, rm, rv, *affine, eps=eps, has_weight=has_weight,
                           want_x=x.requires_grad)
    else:                                                   # create_graph: Tensor ops, differentiable again
        chan = (-1,) + (1,) * (x.ndim - 2)
        dims = (0,) + tuple(range(2, x.ndim))
        s = (rv.double() + eps).rsqrt().to(x.dtype)
        scale = s if w is None else s * w
        gx = g * scale.reshape(chan) if x.requires_grad else None
        gw = (g * (x - rm.reshape(chan))).sum(dims) * s if w is not None else None
        gb = g.sum(dims) if b is not None else None
    grads = [gx if x.requires_grad else None, None, None]
    grads += [gw if w.requires_grad else None] if w is not None else []
    return tuple(grads + ([gb if b.requires_grad else None] if b is not None else []))


def _bn_eval_grads_fwd(xp, g, x, rm, rv, *affine, eps, has_weight, want_x=True):
    dims, loops = _bn_eval_arrays(xp, x, rm, rv, (g,) + tuple(affine), has_weight)
    c = x.shape[1]
    w = affine[0] if has_weight else xp.ones(c, x.dtype)
    if loops:
        gx = xp.empty_like(x) if want_x else None
        gw, gb = xp.empty(c, x.dtype), xp.empty(c, x.dtype)
        kernels.loops("batchnorm").eval_backward(_ncl(g), _ncl(x), rm, rv, w, eps, None if gx is None else _ncl(gx),
                                                 gw, gb)
        return (gx if gx is not None else xp.zeros_like(x)), gw, gb
    chan = (-1,) + (1,) * (x.ndim - 2)
    s = (1 / xp.sqrt(rv.astype("float64") + eps)).astype(x.dtype)
    acc = "float32" if x.dtype.itemsize < 4 else x.dtype
    gx = g * s.reshape(chan)
    gx *= w.reshape(chan)
    dotp = (g * (x - rm.reshape(chan))).sum(axis=dims, dtype=acc)
    return gx, (dotp * s).astype(x.dtype), g.sum(axis=dims, dtype=acc).astype(x.dtype)


_bn_eval = Op("batch_norm_eval", _bn_eval_fwd, _bn_eval_vjp, promote="float", onnx=_onnx_bn_eval,
              backward_name="NativeBatchNormBackward0", aten=_BN)
_bn_eval_grads = Op("batch_norm_eval_grads", _bn_eval_grads_fwd, promote="float", n_extra=2,
                    aten="native_batch_norm_backward")   # grad off only


def batch_norm_eval(x: Tensor, running_mean: Tensor, running_var: Tensor, eps: float, weight: Tensor | None = None,
                    bias: Tensor | None = None) -> Tensor:
    """Eval-mode batch norm by the stored statistics (per channel, dim 1)."""
    affine = tuple(t for t in (weight, bias) if t is not None)
    return apply(_bn_eval, x, running_mean, running_var, *affine, eps=float(eps), has_weight=weight is not None)


# ---------------------------------------------------------------- embedding
def _inverse_counts(xp, flat, num: int, dtype):
    """``1 / (occurrences of flat[i] in flat)`` per entry: ``scale_grad_by_freq``'s factor."""
    return (1 / xp.bincount(flat, minlength=num)[flat]).astype(dtype, copy=False)


def _embedding_bwd_fwd(xp, g, idx, *, num, padding_idx, scale_grad_by_freq=False):
    d = g.shape[-1]
    res = xp.zeros((num, d), g.dtype)
    flat, g2 = idx.ravel(), g.reshape(-1, d)
    if scale_grad_by_freq:
        g2 = g2 * _inverse_counts(xp, flat, num, g.dtype)[:, None]
    add_at(xp, res, (flat,), g2)
    if padding_idx is not None:
        res[padding_idx] = 0
    return res


def _embedding_bwd_vjp(g, out, gy, idx, *, num, padding_idx, scale_grad_by_freq=False):
    taken = apply(_embedding, g, idx, padding_idx=padding_idx)
    if padding_idx is not None:
        taken = taken * (idx != padding_idx).unsqueeze(-1)
    if scale_grad_by_freq:
        taken = taken / idx.reshape(-1).bincount(minlength=num)[idx].unsqueeze(-1).to(taken.dtype)
    return taken, None


def _embedding_vjp(g, out, w, idx, *, padding_idx, scale_grad_by_freq=False, sparse=False):
    if sparse:
        return _sparse_rows(g, idx, w.shape[0], padding_idx, scale_grad_by_freq), None
    extra = {"scale_grad_by_freq": True} if scale_grad_by_freq else {}
    return apply(_embedding_bwd, g, idx, num=w.shape[0], padding_idx=padding_idx, **extra), None


def _sparse_rows(g: Tensor, idx: Tensor, num: int, padding_idx, scale_grad_by_freq: bool) -> Tensor:
    """``sparse=True``'s gradient, as PyTorch's: a COO tensor (not coalesced) holding each looked-up
    row's gradient at its index, the ``padding_idx`` lookups left out."""
    if scale_grad_by_freq:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
    flat, rows = idx.reshape(-1), g.reshape(-1, g.shape[-1])
    if padding_idx is not None:
        keep = flat != padding_idx
        flat, rows = flat[keep], rows[keep]
    # built inside backward, as ATen's kernel does: PyTorch's invariant-check warning is for user constructors
    return sparse_coo_tensor(flat.unsqueeze(0), rows, (num, g.shape[-1]), check_invariants=False)


def _embedding_fwd(xp, w, idx, *, padding_idx, scale_grad_by_freq=False, sparse=False):
    return xp.take(w, idx, axis=0)


_embedding = Op("embedding", _embedding_fwd, _embedding_vjp, saves=NONE,
                onnx=lambda g, w, idx, **params: g.op("Gather", w, idx, axis=0), aten="embedding(index_select)")
_embedding_bwd = Op("embedding_backward", _embedding_bwd_fwd, _embedding_bwd_vjp, saves=NONE,
                    aten="embedding_backward(embedding_dense_backward)")


def embedding(weight: Tensor, idx: Tensor, padding_idx: int | None, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at integer ``idx``; the ``padding_idx`` row gets no gradient, with
    ``scale_grad_by_freq`` each row's gradient is divided by how often its index occurs in ``idx``,
    and with ``sparse`` the weight's gradient is a sparse COO tensor of the looked-up rows."""
    extra = {k: True for k, on in (("scale_grad_by_freq", scale_grad_by_freq), ("sparse", sparse)) if on}
    _index_select_bounds(weight, 0, idx)   # PyTorch's IndexError: a negative index does not wrap
    return apply(_embedding, weight, idx, padding_idx=padding_idx, **extra)


# ---------------------------------------------------------------- embedding bags
# One op, as PyTorch's ``_embedding_bag`` (its node is ``EmbeddingBagBackward0``): ``idx`` holds every
# looked-up row, ``bag`` the bag of each (offset2bag), and the third input is the per-sample weights
# (sum) or, in max mode, the row that holds each bag's maximum per column (-1 for an empty bag), found
# first by the non-differentiable ``embedding_bag_max_indices``. ``padding_idx`` entries count nowhere.
def _bag_kept(idx, bag, extra, padding_idx):
    if padding_idx is None:
        return idx, bag, extra
    keep = idx != padding_idx
    return idx[keep], bag[keep], extra[keep] if extra is not None else None


def _bag_max_indices_fwd(xp, w, idx, bag, *, n_bags, padding_idx):
    """ATen's loop: a bag's first row, then each later row that is strictly greater, per column."""
    idx, bag, _ = _bag_kept(idx, bag, None, padding_idx)
    d = w.shape[1]
    best = xp.full((n_bags, d), -1, idx.dtype)
    if idx.shape[0]:
        rows = xp.take(w, idx, axis=0)
        order = xp.argsort(bag, kind="stable")
        bag, idx, rows = bag[order], idx[order], rows[order]
        first = xp.ones(bag.shape[0], bool)
        first[1:] = bag[1:] != bag[:-1]
        seg = xp.cumsum(first) - 1                       # each entry's segment (a non-empty bag)
        starts = xp.flatnonzero(first)
        top = xp.full((starts.shape[0], d), -xp.inf, rows.dtype)
        xp.fmax.at(top, seg, rows)                       # the segment's maximum per column, NaNs aside
        hit = rows == top[seg]                           # the first row reaching it is the one kept
        hit_at = xp.where(hit, xp.arange(bag.shape[0])[:, None], bag.shape[0])
        pos = xp.minimum.reduceat(hit_at, starts, axis=0)
        pos = xp.where(xp.isnan(rows[starts]), starts[:, None], pos)   # a NaN first row stays: nothing exceeds it
        best[bag[starts]] = idx[pos]
    return best


def _bag_scale(g, idx, bag, extra, *, mode, n_bags):
    """The sparse gradient's rows (ATen's ``_embedding_bag_sparse_backward``): ``g[bag]`` over the bag's
    size, or times the entry's weight."""
    rows = g.index_select(0, bag)
    if mode == "mean":
        sizes = bag.bincount(minlength=n_bags).clamp(min=1).to(g.dtype)
        rows = rows / sizes.index_select(0, bag).unsqueeze(1)
    elif extra is not None:
        rows = rows * extra.unsqueeze(1)
    return rows


def _bag_dense_scale(g, idx, bag, kept_bag, psw, *, mode, n_bags, num, scale_grad_by_freq):
    """Each entry's factor in ATen's ``_embedding_bag_dense_backward_cpu_sum_mean``: made in double (the
    entry's weight, over the index's count, over the bag's size) and rounded to the gradient's dtype;
    None for a plain sum (PyTorch's mean multiplies by the rounded ``1 / size``, not a division)."""
    if not scale_grad_by_freq and mode == "sum":
        return psw   # the weight itself: exact in double and back
    scale = psw.double() if psw is not None else g.new_ones(idx.shape, dtype=float64)
    if scale_grad_by_freq:   # the index's own count, as documented (tests/test_embedding_backward.py)
        scale = scale / idx.bincount(minlength=num).index_select(0, idx)
    if mode == "mean":
        scale = scale / kept_bag.bincount(minlength=n_bags).clamp(min=1).index_select(0, bag)
    return scale.to(g.dtype)


def _fma_into(xp, out, target, scale, rows):
    """``out[target[j]] += scale[j] * rows[j]`` for each j in order, each step one fused multiply-add
    rounded to float32 (ATen's fbgemm sums and MKL's ``axpy``; a product rounded before its add differs
    in the last bit). The k-th entries of all targets go in one step; the float64 product of two floats
    is exact, so a step rounds once to float32 (twice only where the float64 sum itself rounds)."""
    if not target.shape[0]:
        return out
    order = xp.argsort(target, kind="stable")
    t = target[order]
    prod = rows[order].astype(xp.float64) * scale[order].astype(xp.float64)[:, None]
    first = xp.flatnonzero(xp.concatenate([[True], t[1:] != t[:-1]]))
    rank = xp.arange(t.shape[0]) - xp.repeat(first, xp.diff(xp.append(first, t.shape[0])))
    for k in range(int(rank.max()) + 1):
        at = rank == k
        tgt = t[at]
        out[tgt] = (out[tgt].astype(xp.float64) + prod[at]).astype(out.dtype)
    return out


def _fused_bag_sums(xp, n_bags, bag, psw, rows):
    """Each bag's ``sum psw[i] * rows[i]`` in float32 as ATen's fbgemm kernel makes it (no ``padding_idx``;
    ATen's own loop, taken with one, rounds the product first): ``_fma_into`` in the bag's order."""
    return _fma_into(xp, xp.zeros((n_bags, rows.shape[1]), rows.dtype), bag, psw, rows)


def _aten_index_order(xp, idx):
    """The order ATen's dense embedding-bag backward visits the entries: ``indices.sort()``, libstdc++'s
    unstable ``std::sort`` (radix-sorted, so stable, from 32768 entries)."""
    if is_numpy(xp) and kernels.enabled() and 1 < idx.shape[0] < 32768:
        return kernels.loops("heapselect").sort_rows(idx.astype(xp.float64)[None], False)[0]
    return xp.argsort(idx, kind="stable")


def _bag_dense_bwd_fwd(xp, g, idx, bag, *scale, num, padding_idx):
    out = xp.zeros((num, g.shape[1]), g.dtype)
    if not idx.shape[0]:
        return out
    order = _aten_index_order(xp, idx)
    if padding_idx is not None:
        order = order[idx[order] != padding_idx]
    i, rows = idx[order], xp.take(g, bag[order], axis=0)
    if not scale:
        add_at(xp, out, (i,), rows)
    elif is_numpy(xp) and g.dtype == np.float32:
        _fma_into(xp, out, i, scale[0][order], rows)
    else:
        add_at(xp, out, (i,), rows * scale[0][order][:, None])
    return out


def _bag_dense_bwd_vjp(gy, out, g, idx, bag, *scale, num, padding_idx):
    taken = gy.index_select(0, idx)
    if padding_idx is not None:
        taken = taken * (idx != padding_idx).unsqueeze(1).to(taken.dtype)
    gg = None
    if g.requires_grad:
        gg = g.new_zeros(g.shape).index_add(0, bag, taken * scale[0].unsqueeze(1) if scale else taken)
    gs = (taken * g.index_select(0, bag)).sum(1) if scale and scale[0].requires_grad else None
    return (gg, None, None) + ((gs,) if scale else ())


# the dense gradient of ``embedding_bag`` (PyTorch's ``_embedding_bag_dense_backward``): ``g[bag]`` times each
# entry's factor, summed into the rows ``idx`` in the order ATen's loop adds them
_embedding_bag_dense_bwd = Op("embedding_bag_dense_backward", _bag_dense_bwd_fwd, _bag_dense_bwd_vjp, saves=ALL)


def _embedding_bag_fwd(xp, w, idx, bag, *extra, mode, n_bags, padding_idx, sparse=False, scale_grad_by_freq=False):
    d = w.shape[1]
    if mode == "max":
        best = extra[0]
        out = w[xp.maximum(best, 0), xp.arange(d)[None, :]] if w.shape[0] else xp.zeros(best.shape, w.dtype)
        return xp.where(best < 0, xp.zeros((), w.dtype), out)
    idx, bag, psw = _bag_kept(idx, bag, extra[0] if extra else None, padding_idx)
    rows = xp.take(w, idx, axis=0)
    if psw is not None and padding_idx is None and is_numpy(xp) and w.dtype == np.float32:   # fbgemm's path
        out = _fused_bag_sums(xp, n_bags, bag, psw, rows)
    else:
        if psw is not None:
            rows = rows * psw[:, None]
        out = xp.zeros((n_bags, d), w.dtype)
        add_at(xp, out, (bag,), rows)
    if mode == "mean":
        out /= xp.maximum(xp.bincount(bag, minlength=n_bags), 1).astype(w.dtype)[:, None]
    return out


def _embedding_bag_vjp(g, out, w, idx, bag, *extra, mode, n_bags, padding_idx, sparse=False,
                       scale_grad_by_freq=False):
    num = w.shape[0]
    if mode == "max":
        best = extra[0]
        full = best >= 0
        gw = None
        if w.requires_grad:
            gw = g.new_zeros(w.shape).scatter_add(0, best.clamp(min=0), g * full)
        return gw, None, None, None
    kept_idx, kept_bag, psw = _bag_kept(idx, bag, extra[0] if extra else None, padding_idx)
    gw = gp = None
    if w.requires_grad:
        if sparse:
            rows = _bag_scale(g, kept_idx, kept_bag, psw, mode=mode, n_bags=n_bags)
            gw = _sparse_rows(rows, kept_idx, num, None, scale_grad_by_freq)
        else:
            scale = _bag_dense_scale(g, idx, bag, kept_bag, extra[0] if extra else None, mode=mode, n_bags=n_bags,
                                     num=num, scale_grad_by_freq=scale_grad_by_freq)
            gw = apply(_embedding_bag_dense_bwd, g, idx, bag, *(() if scale is None else (scale,)), num=num,
                       padding_idx=padding_idx)
    if extra and extra[0].requires_grad:   # d/dpsw_i: <g[bag_i], w[idx_i]>, 0 at a padding entry
        gp = (g.index_select(0, bag) * w.index_select(0, idx)).sum(1)
        if padding_idx is not None:
            gp = gp * (idx != padding_idx)
    return (gw, None, None) + ((gp,) if extra else ())


_embedding_bag = Op("embedding_bag", _embedding_bag_fwd, _embedding_bag_vjp, saves=ALL,
                    backward_name="EmbeddingBagBackward0")
_embedding_bag_max_indices = Op("embedding_bag_max_indices", _bag_max_indices_fwd, saves=NONE)


def embedding_bag(weight: Tensor, idx: Tensor, bag: Tensor, n_bags: int, mode: str, padding_idx: int | None,
                  per_sample_weights: Tensor | None = None, scale_grad_by_freq: bool = False,
                  sparse: bool = False) -> Tensor:
    """The sum, mean or max of each bag's rows of ``weight`` (``bag[i]`` is the bag of ``idx[i]``), as
    PyTorch's one ``_embedding_bag`` op: its gradient (dense or a sparse COO tensor) and its node."""
    more = {k: True for k, on in (("scale_grad_by_freq", scale_grad_by_freq), ("sparse", sparse)) if on}
    if mode == "max":
        best = apply(_embedding_bag_max_indices, weight.detach(), idx, bag, n_bags=n_bags, padding_idx=padding_idx)
        return apply(_embedding_bag, weight, idx, bag, best, mode=mode, n_bags=n_bags, padding_idx=padding_idx, **more)
    extra = () if per_sample_weights is None else (per_sample_weights,)
    return apply(_embedding_bag, weight, idx, bag, *extra, mode=mode, n_bags=n_bags, padding_idx=padding_idx, **more)


# ---------------------------------------------------------------- binary cross entropy
# Both losses are one op each with the reduction and the (non-differentiable) weights inside, as
# PyTorch's: the loss node is PyTorch's (BinaryCrossEntropyBackward0, ...WithLogitsBackward0) and the
# backward is its formula, weighted and divided by the element count in its order.
def _reduced(xp, loss, reduction):
    """A loss's mean or sum rounded as the ``mean``/``sum`` ops round it (as PyTorch's reduction)."""
    if reduction == "none":
        return loss
    return array_mean(xp, loss, None) if reduction == "mean" else array_sum(xp, loss, None)


def _scaled(grad, g, weight, reduction, n):
    """A loss's elementwise gradient times the incoming ``g`` (None: already in), the weight, and 1/n for a mean."""
    if g is not None:
        grad = grad * g
    if weight is not None:
        grad = grad * weight
    return grad / n if reduction == "mean" and n else grad


def _bce_fwd(xp, x, t, *w, reduction):
    # PyTorch's kernel: each log clamped at -100, so probabilities of exactly 0 and 1 stay finite;
    # on the cpu it refuses inputs outside [0, 1] (NaN included), as PyTorch's does
    if is_numpy(xp) and x.size and not ((x >= 0) & (x <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = (t - 1) * xp.maximum(xp.log1p(-x), -100) - t * xp.maximum(xp.log(x), -100)
    return _reduced(xp, loss * w[0] if w else loss, reduction)


def _bce_vjp(g, out, x, t, *w, reduction):
    # PyTorch's formulas, not the clamped loss's derivative: the input's denominator is held at
    # 1e-12, so a saturated sigmoid (x exactly 0 or 1) gets a large finite gradient, not 0 * inf = nan
    weight, n, gx = (w[0] if w else None), x.numel(), None
    if x.requires_grad:   # in PyTorch's order: g (x - t) / d, then the weight, then 1/n
        gx = g * (x - t) / ((1 - x) * x).clamp_min(1e-12)
        gx = unbroadcast(_scaled(gx, None, weight, reduction, n), x)
    gt = (_scaled((-x).log1p() - x.log(), g, weight, reduction, n)
          if isinstance(t, Tensor) and t.requires_grad else None)
    return (gx, gt) + (None,) * len(w)


_bce = Op("binary_cross_entropy", _bce_fwd, _bce_vjp, promote="common", saves=ALL)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None, reduction: str) -> Tensor:
    """``-w (t log x + (1 - t) log(1 - x))``, reduced: PyTorch's clamped kernel and gradient."""
    return apply(_bce, input, target, *(() if weight is None else (weight,)), reduction=reduction)


def _bce_logits_fwd(xp, x, t, *extra, reduction, weighted):
    # PyTorch's formula: (1 - t) x - l log_sigmoid(x), l = (pos_weight - 1) t + 1, finite for any x
    weight, pos = (extra[0] if weighted else None), (extra[-1] if len(extra) > weighted else None)
    log_sigmoid = xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))
    if pos is not None:
        log_sigmoid = log_sigmoid * ((pos - 1) * t + 1)
    loss = (1 - t) * x - log_sigmoid
    return _reduced(xp, loss if weight is None else loss * weight, reduction)


def _bce_logits_vjp(g, out, x, t, *extra, reduction, weighted):
    weight, pos = (extra[0] if weighted else None), (extra[-1] if len(extra) > weighted else None)
    n, gx, gt = x.numel(), None, None
    if x.requires_grad:
        if pos is None:
            dx = x.sigmoid() - t
        else:
            pt = pos * t
            dx = (pt + 1 - t) * x.sigmoid() - pt
        gx = unbroadcast(_scaled(dx, g, weight, reduction, n), x)
    if isinstance(t, Tensor) and t.requires_grad:   # d/dt: log_sigmoid(-x) - pos_weight log_sigmoid(x)
        if pos is None:
            dt = -x
        else:
            soft = (-x.abs()).exp().log1p()   # both log-sigmoids' shared term
            dt = (-x).clamp(max=0) - soft - (x.clamp(max=0) - soft) * pos
        gt = unbroadcast(_scaled(dt, g, weight, reduction, n), t)
    return (gx, gt) + (None,) * len(extra)


_bce_logits = Op("binary_cross_entropy_with_logits", _bce_logits_fwd, _bce_logits_vjp, promote="common", saves=ALL)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None,
                                     pos_weight: Tensor | None, reduction: str) -> Tensor:
    """``-w [l t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))]``, l the positive class's weight, reduced."""
    extra = tuple(a for a in (weight, pos_weight) if a is not None)
    return apply(_bce_logits, input, target, *extra, reduction=reduction, weighted=weight is not None)


# ---------------------------------------------------------------- mean squared error
def _mse_fwd(xp, x, t, *, reduction):
    d = x - t
    return _reduced(xp, d * d, reduction)


def _mse_vjp(g, out, x, t, *, reduction):
    # PyTorch's mse_loss_backward: (x - t) times 2 (over the element count for a mean), times g
    d = x - t
    gx = d * (2.0 / max(d.numel(), 1) if reduction == "mean" else 2.0) * g
    return (unbroadcast(gx, x) if x.requires_grad else None,
            unbroadcast(-gx, t) if isinstance(t, Tensor) and t.requires_grad else None)


def _onnx_mse(g, x, t, *, reduction):
    d = g.op("Sub", x, t)
    sq = g.op("Mul", d, d)
    return sq if reduction == "none" else g.reduce("ReduceMean" if reduction == "mean" else "ReduceSum", sq, None,
                                                   False)


_mse = Op("mse_loss", _mse_fwd, _mse_vjp, promote="common", saves=ALL, onnx=_onnx_mse,
          cost=lambda s, out: 3 * max(math.prod(s[0]), math.prod(s[1])))


def mse_loss(input: Tensor, target: Tensor, reduction: str) -> Tensor:
    """``(input - target)**2``, reduced, as one op: the loss node PyTorch names ``MseLossBackward0``,
    with its backward formula."""
    return apply(_mse, input, target, reduction=reduction)
