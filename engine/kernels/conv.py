"""A few-channel convolution's forward and weight gradient, and stride-1 im2col (``im2col_stride1``), as
numba loops (``nn/_ops.py`` loads them through ``kernels.loops("conv")`` once ``kernels.use`` says yes).

A stem's 1-3 input channels make im2col's GEMM 9-27 columns wide, and copying the columns and the
channel-major output gradient costs more than the products (the CNN's 1 -> 16 conv at 28x28: 0.35-
0.65 ms, PyTorch 0.14-0.26). Stride 1 lets each kernel offset be one contiguous run instead: every
image channel (and output-gradient row) sits in a zero-filled grid as wide as the padded input, so
the input value under tap (c, ki, kj) of grid position f is element f + ki * width + kj of channel
c's padded plane. The forward is then eight output channels' grids accumulated from the taps' runs
(``_strips``), and ``gw[o, c, ki, kj]`` the sum over images of ``dot(grid_o, run)`` (``_tap_dots``),
both LLVM vector loops whose accumulators stay in registers. Each output (forward) and each
(o, c, offset) sum (weight gradient) is computed alone, so splitting the images or the output
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


_LANES, _STRIPS, _GROUP = 16, 2, 8   # a strip is one 16-float vector; two strips of eight channels a pass


def _lane_sums(builder, vectors):
    """The lane sums of ``vectors`` (a power of two of them, 16 lanes each) as one vector, vector ``i``'s
    sum in lane ``i``: pairs of vectors halved into one (each half's lanes added to the other's), then
    the last vector halved in place, so every level adds as many lanes with two shuffles a vector (one
    vector at a time took eight shuffles each)."""
    i32 = ir.IntType(32)
    segs = [(v, 1, _LANES) for v in vectors]   # (vector, segments, segment length)

    def halves(count, length, second):
        """Shuffle indices of each segment's first (or second) half, over ``count`` segments."""
        h = length // 2
        return [i * length + j + (h if second else 0) for i in range(count) for j in range(h)]

    while len(segs) > 1:
        nxt = []
        for (u, k, n), (v, _, _) in zip(segs[::2], segs[1::2]):
            lo = halves(k, n, False) + [_LANES + i for i in halves(k, n, False)]
            hi = halves(k, n, True) + [_LANES + i for i in halves(k, n, True)]
            nxt.append((builder.fadd(builder.shuffle_vector(u, v, ir.Constant(ir.VectorType(i32, len(lo)), lo)),
                                     builder.shuffle_vector(u, v, ir.Constant(ir.VectorType(i32, len(hi)), hi))), 2 * k, n // 2))
        segs = nxt
    v, k, n = segs[0]
    while n > 1:
        lo, hi = halves(k, n, False), halves(k, n, True)
        v = builder.fadd(builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, len(lo)), lo)),
                         builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, len(hi)), hi)))
        n //= 2
    return v


def _tap_dots(taps: int):
    """An intrinsic ``(grid, g0, pad, offs, t0, steps, res)``: for the eight output-gradient grids ``grid[g0 :
    g0 + 8]`` and the ``taps`` runs of the flat ``pad`` starting at ``offs[t0 : t0 + taps]``, the dot products
    of each grid with each run over ``steps`` vectors of 16 floats, into ``res[8 t + q]`` (float32, the
    lanes added in halves, ``_lane_sums``). The ``8 * taps`` accumulators stay in registers through the
    steps: one load of a grid serves ``taps`` runs and one load of a run eight grids (as a numba loop each
    dot loaded both operands for one multiply-add: the ResNet stem's weight gradient 188 us at one
    thread, torch 104)."""
    def typer(typingctx, grid, g0, pad, offs, t0, steps, res):
        def codegen(context, builder, signature, values):
            grid_a, pad_a, offs_a, res_a = (context.make_array(signature.args[i])(context, builder, values[i])
                                            for i in (0, 2, 3, 6))
            intp = context.get_value_type(types.intp)
            g0_, t0_, steps_ = (context.cast(builder, values[i], signature.args[i], types.intp) for i in (1, 4, 5))
            vf = ir.VectorType(ir.FloatType(), _LANES)
            fma = _fma(builder, vf)
            row = builder.extract_value(grid_a.strides, 0)
            row = builder.sdiv(row, ir.Constant(intp, 4))
            const = lambda v: ir.Constant(intp, v)
            grids = [builder.mul(builder.add(g0_, const(q)), row) for q in range(_GROUP)]
            starts = [builder.load(builder.gep(offs_a.data, [builder.add(t0_, const(t))])) for t in range(taps)]

            def vec(base, at):
                return builder.load(builder.bitcast(builder.gep(base, [at]), vf.as_pointer()), align=4)

            def step(accs, d):
                f = builder.mul(d, const(_LANES))
                runs = [vec(pad_a.data, builder.add(st, f)) for st in starts]
                out = list(accs)
                for q in range(_GROUP):
                    gv = vec(grid_a.data, builder.add(grids[q], f))
                    for t in range(taps):
                        out[t * _GROUP + q] = builder.call(fma, [gv, runs[t], accs[t * _GROUP + q]])
                return out

            zero = ir.Constant(vf, [0.0] * _LANES)
            accs = _loop(builder, "steps", const(0), steps_, const(1), [zero] * (_GROUP * taps), step)
            for t in range(taps):
                sums = _lane_sums(builder, accs[t * _GROUP:(t + 1) * _GROUP])
                builder.store(sums, builder.bitcast(builder.gep(res_a.data, [const(t * _GROUP)]), sums.type.as_pointer()),
                              align=4)
            return context.get_dummy_value()
        return types.none(grid, g0, pad, offs, t0, steps, res), codegen
    return intrinsic(typer)


_dots3, _dots1 = _tap_dots(3), _tap_dots(1)


@njit(**_JIT)
def weight_stride1(x, gy, pt, pl, kh, kw, gw, o0, o1):
    """Output channels ``o0:o1`` of ``gw (O, C, kh, kw)`` (float64 sums over the images, written whole),
    the weight gradient of a stride-1, undilated, one-group convolution of ``x (N, C, H, W)`` padded by
    ``pt`` rows and ``pl`` columns on top and left, for ``gy (N, O, OH, OW)``. Per image, each output
    channel's gradient in a zero grid as wide as the padded input (``width``, OW + kw - 1) and each input
    channel padded: tap (c, ki, kj) is the run from ``c * plane + ki * width + kj``, and ``gw[o, c, ki, kj]``
    the dot of grid ``o`` with it (``_tap_dots``, eight channels and three taps at a time). A channel's dots
    do not depend on which channels share its block, so any split of the output channels gives the same
    floats. Its scratch is its own, so ranges may run at once as one region."""
    n, c = x.shape[0], x.shape[1]
    oh, ow = gy.shape[2], gy.shape[3]
    width = ow + kw - 1
    steps = -(-oh * width // _LANES)
    size = steps * _LANES                          # the grids' zero tails make whole vectors
    plane = (oh + kh - 1) * width + kw + _LANES    # and read a run's last vector past its plane: zeros
    taps = kh * kw * c
    offs = np.empty(taps, np.int64)
    t = 0
    for ch in range(c):
        for ki in range(kh):
            for kj in range(kw):
                offs[t] = ch * plane + ki * width + kj
                t += 1
    blocks = -(-(o1 - o0) // _GROUP)
    grid = np.zeros((blocks * _GROUP, size), x.dtype)
    pad = np.zeros(c * plane, x.dtype)
    res = np.empty(3 * _GROUP, x.dtype)
    sums = np.zeros((blocks * _GROUP, taps))
    for b in range(n):
        for ch in range(c):
            _rows_into(x[b, ch], pad[ch * plane:(ch + 1) * plane], pt * width + pl, width)
        for o in range(o0, o1):
            _rows_into(gy[b, o], grid[o - o0], 0, width)
        for g in range(blocks):
            t = 0
            while t < taps:
                k = 3 if t + 3 <= taps else 1
                if k == 3:
                    _dots3(grid, g * _GROUP, pad, offs, t, steps, res)
                else:
                    _dots1(grid, g * _GROUP, pad, offs, t, steps, res)
                for j in range(k):
                    for q in range(_GROUP):
                        sums[g * _GROUP + q, t + j] += res[j * _GROUP + q]
                t += k
    for o in range(o0, o1):
        t = 0
        for ch in range(c):
            for ki in range(kh):
                for kj in range(kw):
                    gw[o, ch, ki, kj] = sums[o - o0, t]
                    t += 1


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
