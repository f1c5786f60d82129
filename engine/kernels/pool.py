"""Non-overlapping 2-D max-pool's backward as a numba loop (``nn/_ops.py`` loads it through
``kernels.loops("pool")`` once ``kernels.use`` says yes).

numpy's block path makes a mask per kernel offset, then a masked write per offset (~10 strided
passes for 2x2); here each window is read once. The 2x2 forward (``max2x2``) is numpy's four
maximum passes in one pass. The 2x2 loops run a row's outputs as LLVM vectors (``_row_pairs``: the
row pair's even and odd lanes split by shuffles; 2.3-4.7x the scalar loop backward, 1.3x forward).
The window's first maximum in row-major order wins, the first NaN if it holds one (as the numpy
masks and PyTorch's argmax), so both paths give the same values and gradients.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .lanes import _arrays, _loop

__all__ = ["max_blocks_put", "max2x2_put", "max2x2"]

_JIT = dict(cache=True, error_model="numpy", nogil=True)
F = np.float32


@njit(**_JIT, inline="always")
def _first_max(x, n, c, i0, j0, kh, kw):
    """The (row, column) of the window's first maximum (first NaN if any) and its value."""
    best = x[n, c, i0, j0]
    bi, bj = i0, j0
    if math.isnan(best):
        return bi, bj, best
    for di in range(kh):
        for dj in range(kw):
            v = x[n, c, i0 + di, j0 + dj]
            if v > best or math.isnan(v):
                best, bi, bj = v, i0 + di, j0 + dj
                if math.isnan(v):
                    return bi, bj, best
    return bi, bj, best


@njit(**_JIT)
def max_blocks_put(x, res, g, kh, kw):
    """``res`` (zeros, shape of ``x``) gets ``g[n, c, i, j]`` at each block's first maximum."""
    for n in range(g.shape[0]):
        for c in range(g.shape[1]):
            for i in range(g.shape[2]):
                for j in range(g.shape[3]):
                    bi, bj, _ = _first_max(x, n, c, i * kh, j * kw, kh, kw)
                    res[n, c, bi, bj] = g[n, c, i, j]


@njit(**_JIT, inline="always")
def _np_max(a, b):
    """``np.maximum(a, b)`` exactly: ``a`` when it is larger or NaN, else ``b`` (so -0.0 vs 0.0
    gives the second, as numpy's)."""
    return a if (a > b) | (a != a) else b


_I32 = ir.IntType(32)


def _shuffle(builder, a, b, order):
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, len(order)), order))


def _row_pairs(width: int, backward: bool):
    """An intrinsic over flat float32 arrays, ``width`` outputs ``yo + j`` a step (``j < count``, a
    multiple of ``width``) of the row pair at ``xo`` and ``xo + w``: each pair of rows loaded as ``2 width``
    floats and split into its even and odd lanes (numba made every output a scalar chain of strided
    loads and stores). Forward ``max(x, y, xo, yo, w, count, relu)``: ``max2x2``'s maxima into ``y``.
    Backward ``put(x, y, g, res, xo, yo, w, count, relu)``: ``max2x2_put``'s selects, the four gradients
    interleaved back into ``res``. ``relu`` (a runtime flag, one select a vector): the compiled fused
    ReLU then pool (``compiler/pool.py``), the maxima through ``relu`` (a NaN kept) and the
    gradient only where the output is positive or NaN."""
    vf, vf2 = ir.VectorType(ir.FloatType(), width), ir.VectorType(ir.FloatType(), 2 * width)
    even, odd = list(range(0, 2 * width, 2)), list(range(1, 2 * width, 2))
    zipped = [i // 2 + (width if i % 2 else 0) for i in range(2 * width)]
    arrays = 4 if backward else 2

    def codegen(context, builder, signature, values):
        ptrs = _arrays(context, builder, signature, values, arrays)
        px, py = ptrs[:2]
        intp = context.get_value_type(types.intp)
        xo, yo, w, count = (context.cast(builder, v, t, types.intp)
                            for v, t in zip(values[arrays:-1], signature.args[arrays:-1]))
        relu = context.cast(builder, values[-1], signature.args[-1], types.boolean)
        every = ir.Constant(ir.VectorType(ir.IntType(1), width), [1] * width)
        zero = ir.Constant(vf, [0.0] * width)

        def at(p, d, ty):
            return builder.bitcast(builder.gep(p, [d]), ty.as_pointer())

        def uno(v):
            return builder.fcmp_unordered("uno", v, v)

        def passes(m, v):
            """``v`` where ``relu`` is off or ``m`` is positive or NaN, else zeros."""
            return builder.select(relu, builder.select(builder.or_(builder.fcmp_ordered(">", m, zero), uno(m)),
                                                       v, zero), v)

        def block(accs, j):
            top = builder.add(xo, builder.shl(j, ir.Constant(intp, 1)))
            bottom = builder.add(top, w)
            row0, row1 = builder.load(at(px, top, vf2), align=4), builder.load(at(px, bottom, vf2), align=4)
            quad = (_shuffle(builder, row0, row0, even), _shuffle(builder, row0, row0, odd),
                    _shuffle(builder, row1, row1, even), _shuffle(builder, row1, row1, odd))
            if not backward:       # numpy's maximum: the first when larger or NaN
                m = quad[0]
                for v in quad[1:]:
                    m = builder.select(builder.or_(builder.fcmp_ordered(">", m, v), uno(m)), m, v)
                # relu then pool: where the maximum is not positive the outputs are the relu'd window's zeros,
                # whose last (numpy's maximum keeps the second of equals) carries the sign: x11's
                last = quad[3]
                zeros = builder.select(builder.fcmp_ordered("<", last, zero), zero, last)
                kept = builder.select(builder.or_(builder.fcmp_ordered(">", m, zero), uno(m)), m, zeros)
                builder.store(builder.select(relu, kept, m), at(py, builder.add(yo, j), vf), align=4)
                return []
            pg, pr = ptrs[2:]
            m = builder.load(at(py, builder.add(yo, j), vf), align=4)
            gv = passes(m, builder.load(at(pg, builder.add(yo, j), vf), align=4))
            nan = uno(m)

            def hit(v):
                return builder.or_(builder.fcmp_ordered("==", v, m), builder.and_(nan, uno(v)))
            ha = hit(quad[0])
            hb = builder.and_(hit(quad[1]), builder.xor(ha, every))
            seen = builder.or_(ha, hb)
            hc = builder.and_(hit(quad[2]), builder.xor(seen, every))
            hd = builder.xor(builder.or_(seen, hc), every)
            ra, rb, rc, rd = (builder.select(h, gv, zero) for h in (ha, hb, hc, hd))
            builder.store(_shuffle(builder, ra, rb, zipped), at(pr, top, vf2), align=4)
            builder.store(_shuffle(builder, rc, rd, zipped), at(pr, bottom, vf2), align=4)
            return []

        _loop(builder, "pairs", ir.Constant(intp, 0), count, ir.Constant(intp, width), [], block)
        return context.get_dummy_value()

    def typer(typingctx, *args):
        return types.void(*args), codegen
    if backward:
        return intrinsic(lambda typingctx, x, y, g, res, xo, yo, w, count, relu:
                         typer(typingctx, x, y, g, res, xo, yo, w, count, relu))
    return intrinsic(lambda typingctx, x, y, xo, yo, w, count, relu:
                     typer(typingctx, x, y, xo, yo, w, count, relu))


_max8, _max4, _put8, _put4 = (_row_pairs(width, backward) for backward in (False, True) for width in (8, 4))


@njit(**_JIT, inline="always")
def _relu(m, last, relu):
    """With ``relu``, the maximum of a window's ReLUs (``x < 0 ? 0 : x``, a NaN and -0.0 kept) from its plain
    maximum ``m`` and its last element ``last``: ``m`` where positive or NaN, else the zeros' last, ``last``'s
    ReLU (numpy's maximum keeps the second of equals); ``m`` without ``relu``."""
    if relu and not (m > F(0.0) or m != m):
        return F(0.0) if last < F(0.0) else last
    return m


@njit(**_JIT)
def max2x2(y, x, relu):
    """2x2 max-pool of ``x (N, C, 2 OH, 2 OW)`` into ``y (N, C, OH, OW)``: numpy's four maximum
    passes over the strided block views (``y = x00``, then ``maximum(y, x01)``, ``x10``, ``x11``) in
    one pass over the input, the same values (NaN and signed zeros included). A row's outputs go 8
    (or 4) at a time as vectors (``_row_pairs``), the last block ending at the row's end (it writes
    some outputs again, the same values); rows under 4 outputs as scalars. ``relu``: the maxima
    through ReLU (the compiled fused ReLU then pool: the maximum of the ``relu``s, signed zeros as eager's
    relu then pool give them)."""
    ow, w = y.shape[3], x.shape[3]
    xf, yf = x.reshape(-1), y.reshape(-1)
    for row in range(y.shape[0] * y.shape[1] * y.shape[2]):
        xo = (row // y.shape[2]) * x.shape[2] * w + (row % y.shape[2]) * 2 * w
        yo = row * ow
        if ow >= 8:
            _max8(xf, yf, xo, yo, w, ow - ow % 8, relu)
            if ow % 8:
                _max8(xf, yf, xo + 2 * (ow - 8), yo + ow - 8, w, 8, relu)
        elif ow >= 4:
            _max4(xf, yf, xo, yo, w, 4, relu)
            if ow > 4:
                _max4(xf, yf, xo + 2 * (ow - 4), yo + ow - 4, w, 4, relu)
        else:
            for j in range(ow):
                k = xo + 2 * j
                last = xf[k + w + 1]
                yf[yo + j] = _relu(_np_max(_np_max(_np_max(xf[k], xf[k + 1]), xf[k + w]), last), last, relu)


@njit(**_JIT)
def max2x2_put(x, y, res, g, relu):
    """``max_blocks_put`` for 2x2 blocks given the forward's maxima ``y``, writing all of ``res``
    (no zero fill): the window's first element equal to its maximum (its first NaN when the maximum
    is NaN) is its first maximum, found with selects. A row's outputs go 8 (or 4) at a time as vectors
    (``_row_pairs``), the last block ending at the row's end (it writes some outputs again, the same
    values); rows under 4 outputs as scalars, the same selects. ``relu``: ``y`` is ``max2x2``'s with
    ``relu``, a window passing its gradient only where its output is positive or NaN."""
    ow, w = g.shape[3], x.shape[3]
    xf, yf, gf, rf = x.reshape(-1), y.reshape(-1), g.reshape(-1), res.reshape(-1)
    for row in range(g.shape[0] * g.shape[1] * g.shape[2]):
        xo = (row // g.shape[2]) * x.shape[2] * w + (row % g.shape[2]) * 2 * w
        yo = row * ow
        if ow >= 8:
            _put8(xf, yf, gf, rf, xo, yo, w, ow - ow % 8, relu)
            if ow % 8:
                _put8(xf, yf, gf, rf, xo + 2 * (ow - 8), yo + ow - 8, w, 8, relu)
            continue
        if ow >= 4:
            _put4(xf, yf, gf, rf, xo, yo, w, 4, relu)
            if ow > 4:
                _put4(xf, yf, gf, rf, xo + 2 * (ow - 4), yo + ow - 4, w, 4, relu)
            continue
        for j in range(ow):
            m = yf[yo + j]
            gv = gf[yo + j] if not relu or m > F(0.0) or m != m else F(0.0)
            nan = m != m
            k = xo + 2 * j
            a, b, cc = xf[k], xf[k + 1], xf[k + w]
            ha = (a == m) | (nan & (a != a))
            hb = ((b == m) | (nan & (b != b))) & (ha ^ True)
            seen = ha | hb
            hc = ((cc == m) | (nan & (cc != cc))) & (seen ^ True)
            hd = (seen | hc) ^ True
            rf[k] = gv if ha else F(0.0)
            rf[k + 1] = gv if hb else F(0.0)
            rf[k + w] = gv if hc else F(0.0)
            rf[k + w + 1] = gv if hd else F(0.0)
