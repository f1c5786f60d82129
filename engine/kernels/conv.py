"""A few-channel convolution's forward and weight gradient, and stride-1 im2col (``im2col_stride1``), as numba
loops (``nn/_ops.py`` loads them through ``kernels.loops("conv")`` once ``kernels.use`` says yes).

A stem's 1-3 input channels make im2col's GEMM 9-27 columns wide, and copying the columns and the
channel-major output gradient costs more than the products (the CNN's 1 -> 16 conv at 28x28: 0.35-
0.65 ms, PyTorch 0.14-0.26). Stride 1 lets each kernel offset be one long dot product instead:
every output-gradient row sits in a zero-filled grid as wide as the padded input, so the input
value under offset (ki, kj) of grid position f is the padded image's element f + ki * width + kj,
and ``gw[o, c, ki, kj]`` is the sum over images of ``dot(grid, padded[off:off + len(grid)])``, a
contiguous loop that vectorises. Each (o, c, offset) is computed alone, so splitting the output
channels over threads gives the same floats.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .lanes import _fma, _loop, _splat

__all__ = ["weight_stride1", "forward_stride1", "im2col_stride1"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _rows_into(src, dst, first, width):
    """Rows of ``src (rows, cols)`` into flat ``dst`` at ``first``, ``first + width``, ... (slices,
    so the copies vectorise: an offset inside an index would not)."""
    cols = src.shape[1]
    for i in range(src.shape[0]):
        at = first + i * width
        out = dst[at:at + cols]
        row = src[i]
        for j in range(cols):
            out[j] = row[j]


@njit(**_JIT, fastmath={"reassoc", "contract", "nsz", "arcp"})
def _dot(a, b):
    """``sum(a * b)`` (reassociated: the loop vectorises; an offset inside the index would not)."""
    s = np.float32(0.0)
    for f in range(a.shape[0]):
        s += a[f] * b[f]
    return s


@njit(**_JIT)
def weight_stride1(x, gy, pt, pl, kh, kw, gw, o0, o1):
    """Output channels ``o0:o1`` of ``gw (O, C, kh, kw)`` (float64 sums, written whole), the weight
    gradient of a stride-1, undilated, one-group convolution of ``x (N, C, H, W)`` padded by ``pt``
    rows and ``pl`` columns on top and left, for ``gy (N, O, OH, OW)``. Its scratch is its own (a
    flat output-gradient grid and the padded image, ``width`` the padded input's, OW + kw - 1), so
    ranges may run at once as one region."""
    n, c = x.shape[0], x.shape[1]
    oh, ow = gy.shape[2], gy.shape[3]
    width = ow + kw - 1
    size = oh * width
    grid = np.zeros(size, x.dtype)
    buf = np.empty((c, (oh + kh - 1) * width + kw), x.dtype)
    gw[o0:o1] = 0.0
    for b in range(n):
        buf[:] = 0.0
        for ch in range(c):
            _rows_into(x[b, ch], buf[ch], pt * width + pl, width)
        for o in range(o0, o1):
            _rows_into(gy[b, o], grid, 0, width)
            for ch in range(c):
                pad = buf[ch]
                for ki in range(kh):
                    for kj in range(kw):
                        off = ki * width + kj
                        gw[o, ch, ki, kj] += _dot(grid, pad[off:off + size])


_LANES, _STRIPS, _GROUP = 16, 2, 8   # a strip is one 16-float vector; two strips of eight channels a pass


@intrinsic
def _strips(typingctx, acc, pad, offs, wt, f0):
    """Outputs ``f0 : f0 + 32`` of eight output channels' grids ``acc (8, size)``: for each tap ``t`` in
    order (``offs[t]`` its run's start in the flat ``pad``, ``wt[8 t : 8 t + 8]`` the eight channels'
    weights) ``acc = fma(w, pad[offs[t] + f], acc)`` from zero, the 16 accumulators (two 16-float
    vectors a channel) in registers through all taps: one load of a run serves eight channels. As a
    numba loop the accumulators went through memory each tap (stores bound it: 120 us for the ResNet
    stem at one thread, torch 98)."""
    def codegen(context, builder, signature, values):
        acc_a, pad_a, offs_a, wt_a = (context.make_array(t)(context, builder, v)
                                      for t, v in zip(signature.args[:4], values[:4]))
        intp = context.get_value_type(types.intp)
        f0 = context.cast(builder, values[4], signature.args[4], types.intp)
        vf = ir.VectorType(ir.FloatType(), _LANES)
        fma = _fma(builder, vf)
        zero = ir.Constant(vf, [0.0] * _LANES)
        taps = builder.extract_value(offs_a.shape, 0)
        size = builder.extract_value(acc_a.shape, 1)

        def vec(base, at):
            return builder.bitcast(builder.gep(base, [at]), vf.as_pointer())

        def step(accs, t):
            start = builder.add(builder.load(builder.gep(offs_a.data, [t])), f0)
            runs = [builder.load(vec(pad_a.data, builder.add(start, ir.Constant(intp, s * _LANES))), align=4)
                    for s in range(_STRIPS)]
            wbase = builder.mul(t, ir.Constant(intp, _GROUP))
            out = []
            for q in range(_GROUP):
                w = _splat(builder, builder.load(builder.gep(wt_a.data, [builder.add(wbase, ir.Constant(intp, q))])), _LANES)
                out += [builder.call(fma, [w, runs[s], accs[q * _STRIPS + s]]) for s in range(_STRIPS)]
            return out

        accs = _loop(builder, "taps", ir.Constant(intp, 0), taps, ir.Constant(intp, 1),
                     [zero] * (_GROUP * _STRIPS), step)
        for q in range(_GROUP):
            row = builder.add(builder.mul(ir.Constant(intp, q), size), f0)
            for s in range(_STRIPS):
                builder.store(accs[q * _STRIPS + s], vec(acc_a.data, builder.add(row, ir.Constant(intp, s * _LANES))), align=4)
        return context.get_dummy_value()
    return types.none(acc, pad, offs, wt, f0), codegen


@njit(**_JIT, fastmath={"contract"})
def forward_stride1(x, w, pt, pl, y, b0, b1):
    """Images ``b0:b1`` of ``y (N, O, OH, OW)``, the stride-1, undilated, one-group convolution of a
    few-channel ``x (N, C, H, W)`` padded by ``pt`` rows and ``pl`` columns on top and left with ``w (O,
    C, kh, kw)``: each image channel in a zero grid as wide as the padded input (``weight_stride1``'s
    layout), so tap (ki, kj, c) is the contiguous run from ``c * plane + ki * width + kj``, and eight
    output channels' grids are ``kh * kw * C`` multiply-adds of whole runs (``_strips``: accumulators in
    registers). im2col's GEMM copied the columns and the output (the ResNet stem's 3 -> 32 at 16x16:
    142 / 239 us at one / two threads, this loop 73 / 50, torch 94 / 79). Each output is ``fma(w, x,
    acc)`` from zero over the offsets in order, the channels innermost (oneDNN's order: torch's
    floats), whatever the images' split."""
    c, o, kh, kw = x.shape[1], w.shape[0], w.shape[2], w.shape[3]
    oh, ow = y.shape[2], y.shape[3]
    width = ow + kw - 1
    size = oh * width
    plane = (oh + kh - 1) * width + kw
    span = _LANES * _STRIPS
    full = size - size % span
    pad = np.zeros(c * plane, x.dtype)
    taps = kh * kw * c
    offs = np.empty(taps, np.int64)
    groups = -(-o // _GROUP)
    wt = np.zeros((groups, taps * _GROUP), x.dtype)
    t = 0
    for ki in range(kh):
        for kj in range(kw):
            for ch in range(c):
                offs[t] = ch * plane + ki * width + kj
                for q in range(o):
                    wt[q // _GROUP, t * _GROUP + q % _GROUP] = w[q, ch, ki, kj]
                t += 1
    acc = np.empty((_GROUP, size), x.dtype)
    for b in range(b0, b1):
        for ch in range(c):
            _rows_into(x[b, ch], pad[ch * plane:(ch + 1) * plane], pt * width + pl, width)
        for g in range(groups):
            wg = wt[g]
            for f0 in range(0, full, span):
                _strips(acc, pad, offs, wg, f0)
            for q in range(_GROUP):
                for f in range(full, size):
                    s = np.float32(0.0)
                    for t in range(taps):
                        s += wg[t * _GROUP + q] * pad[offs[t] + f]
                    acc[q, f] = s
            for q in range(min(_GROUP, o - g * _GROUP)):
                for r in range(oh):
                    row, a = y[b, g * _GROUP + q, r], acc[q, r * width:r * width + ow]
                    for col in range(ow):
                        row[col] = a[col]


@njit(**_JIT)
def im2col_stride1(x, pt, pl, kh, kw, oh, ow, cols):
    """im2col of ``x (N, C, H, W)`` zero-padded by ``pt`` rows and ``pl`` columns on top and left
    (and to an ``oh x ow`` output at the bottom and right), stride 1, undilated, into ``cols (N *
    OH * OW, kh * kw * C)`` (columns in (ki, kj, c) order,
    as ``nn/_ops.py``'s ``_cols_rows``). Each image goes channels last into a padded scratch
    first, so a window row is one contiguous run of ``kw * C`` floats: numpy's copy of the strided
    window view moved runs of C floats (0.42 ms of the CNN's 16 -> 32 forward at one thread)."""
    n, c, h, w = x.shape
    hp, wp = oh + kh - 1, ow + kw - 1
    run = kw * c
    p = np.zeros((hp, wp * c), x.dtype)
    for b in range(n):
        for ch in range(c):
            for r in range(min(h, hp - pt)):
                pr = p[r + pt]
                xr = x[b, ch, r]
                for q in range(min(w, wp - pl)):
                    pr[(q + pl) * c + ch] = xr[q]
        for i in range(oh):
            for j in range(ow):
                dst = cols[(b * oh + i) * ow + j]
                for a in range(kh):
                    src = p[i + a, j * c:j * c + run]
                    out = dst[a * run:(a + 1) * run]
                    for k in range(run):
                        out[k] = src[k]
