"""``interpolate``'s bicubic mode, its antialiased bilinear and bicubic modes, and adaptive average
pooling, as one op each way in ATen's cpu arithmetic (the loops: ``kernels/resample.py``).

Taps and weights per dim, in the op's dtype, as ATen computes them:

- bicubic: the source position ``scale * (i + 0.5) - 0.5`` (not clamped; ``scale * i`` with
  ``align_corners``), ``floor`` of it as a float (``floorf``) capped at ``n - 1``, ``t`` its distance
  clamped to [0, 1], Keys' cubic (A = -0.75) at ``t + 1``, ``t``, ``1 - t``, ``2 - t``, taps clamped
  into the input. The forward's weights come from ``cpu/UpSampleKernel.cpp`` (built with FMA: the
  position one fused multiply-add; of the cubic polynomials every step fused but the last), the
  backward's from ``UpSampleBicubic2d.cpp`` (no FMA anywhere).
- antialias (``_compute_indices_min_size_weights_aa``): support ``2`` (bilinear) or ``4`` (bicubic,
  Keys' A = -0.5) half-widths, widened by the scale when downsampling; the window from ``center -
  support + 0.5`` truncated; each weight the filter at ``(j + xmin - center + 0.5) / scale`` (in
  double, rounded), then divided by their sum.
- adaptive average pool: window ``[floor(o n / m), ceil((o + 1) n / m))``.

Without numba (or on another array namespace) the forwards keep the same per-output formulas in
numpy and the backwards scatter with ``add.at`` (equal within rounding).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import kernels
from ..base.meta import has_data
from ..base.dtype import REDUCED_NP, in_opmath
from ..core.cpu_stream import fma
from ..core.dispatch import apply
from ..core.registry import NONE, Op
from ..core.tensor import Tensor

__all__ = ["bicubic", "antialias", "adaptive_avg_pool", "cubic_applies", "aa_applies", "adaptive_applies"]

_EXACT = (np.dtype(np.float32), np.dtype(np.float64))


_MANY = 16   # from this many planes the loops run on blocks of planes with the planes innermost


def _many(a, b, least: int = _MANY) -> bool:
    """Whether the planes-innermost loops take these planes: at least ``least`` of them, a block of up
    to 64 (input and output) within 8 MB."""
    block = min(64, a.shape[0])
    return a.shape[0] >= least and (math.prod(a.shape[1:]) + math.prod(b.shape[1:])) * block * a.itemsize <= 1 << 23


def _flat(a):
    """(planes, D, H, W) as (planes, D, H * W), the planes-innermost loops' layout."""
    return a.reshape(a.shape[0], a.shape[1], -1)


def _loops(xp, a) -> bool:
    return kernels.enabled() and xp is np and a.dtype in _EXACT


def _scale(n_in: int, n_out: int, align: bool, scale, t):
    """``area_pixel_compute_scale`` in the dtype ``t``."""
    if align:
        return t(t(n_in - 1) / t(n_out - 1)) if n_out > 1 else t(0)
    return t(1.0 / scale) if scale is not None and scale > 0 else t(t(n_in) / t(n_out))


def _fused(a, b, c, t):
    return t(fma(np.asarray(a, t), np.asarray(b, t), np.asarray(c, t))[()])


def _keys(x, a, t, fused: int):
    """Keys' cubic convolution kernel at ``|x|`` in [0, 2) (``cubic_convolution1``/``2``), its steps
    fused as GCC contracts them in the FMA build: ``fused`` 0 none (``UpSampleBicubic2d.cpp``), 1 every
    step but the last (the bicubic weights, inlined in their loop), 2 every step (the antialias filter,
    called through a pointer)."""
    x = t(abs(x))
    if x < 1:
        p = _fused(a + t(2), x, -(a + t(3)), t) if fused else t(t(t(a + t(2)) * x) - t(a + t(3)))
        return _fused(t(p * x), x, t(1), t) if fused == 2 else t(t(t(p * x) * x) + t(1))
    if x < 2:
        p = _fused(a, x, -(t(5) * a), t) if fused else t(t(a * x) - t(5) * a)
        p = _fused(p, x, t(8) * a, t) if fused else t(t(p * x) + t(8) * a)
        return _fused(p, x, -(t(4) * a), t) if fused == 2 else t(t(p * x) - t(4) * a)
    return t(0)


@functools.lru_cache(maxsize=256)
def cubic_taps(n_in: int, n_out: int, align: bool, scale, dtype: np.dtype, fused: bool) -> tuple:
    """``(idx, w)``, each ``(4, n_out)``: the clamped taps and Keys' weights of each output position."""
    t = dtype.type
    ratio = _scale(n_in, n_out, align, scale, t)
    a = t(-0.75)
    idx, w = np.empty((4, n_out), np.int64), np.empty((4, n_out), dtype)
    for i in range(n_out):
        if align:
            src = t(ratio * t(i))
        elif fused:
            src = _fused(ratio, t(i) + t(0.5), t(-0.5), t)
        else:
            src = t(t(ratio * t(t(i) + t(0.5))) - t(0.5))
        lower = min(int(math.floor(np.float32(src))), n_in - 1)
        lam = t(min(max(t(src - t(lower)), t(0)), t(1)))
        one_minus = t(t(1) - lam)
        for j, x in enumerate((t(lam + t(1)), lam, one_minus, t(one_minus + t(1)))):
            idx[j, i] = min(max(lower - 1 + j, 0), n_in - 1)
            w[j, i] = _keys(x, a, t, int(fused))
    return idx, w


# ---------------------------------------------------------------- bicubic
def _cubic_fwd(xp, x, *, sizes, scales, align):
    if not has_data(xp):
        return xp.empty(x.shape[:2] + tuple(sizes), x.dtype)
    (H, W), (OH, OW) = x.shape[2:], sizes
    hi, hw = cubic_taps(H, OH, align, scales[0], np.dtype(x.dtype), True)
    wi, ww = cubic_taps(W, OW, align, scales[1], np.dtype(x.dtype), True)
    planes = xp.ascontiguousarray(x.reshape(-1, H, W))
    if _loops(xp, planes):
        out = np.empty((planes.shape[0], OH, OW), x.dtype)
        kernels.parallel(kernels.loops("resample").cubic2d_separable, 2, planes, out, hi, hw, wi, ww)
        return out.reshape(x.shape[:2] + (OH, OW))
    rows = []
    for a in range(4):
        r = xp.take(planes, xp.asarray(hi[a]), axis=1)
        acc = xp.take(r, xp.asarray(wi[1]), axis=2) * xp.asarray(ww[1])
        for b in (0, 2, 3):   # only the second tap's product is rounded alone
            acc = _mul_add(xp, xp.take(r, xp.asarray(wi[b]), axis=2), xp.asarray(ww[b]), acc)
        rows.append(acc)
    acc = rows[1] * xp.asarray(hw[1])[:, None]
    for a in (0, 2, 3):
        acc = _mul_add(xp, rows[a], xp.asarray(hw[a])[:, None], acc)
    return acc.astype(x.dtype).reshape(x.shape[:2] + (OH, OW))


def _mul_add(xp, a, b, c):
    if xp is np:
        return fma(a, np.broadcast_to(b, a.shape), c).astype(a.dtype)
    return a * b + c


def _cubic_bwd_fwd(xp, g, *, in_size, sizes, scales, align):
    if not has_data(xp):
        return xp.empty(g.shape[:2] + tuple(in_size), g.dtype)
    (H, W), (OH, OW) = in_size, sizes
    hi, hw = cubic_taps(H, OH, align, scales[0], np.dtype(g.dtype), False)
    wi, ww = cubic_taps(W, OW, align, scales[1], np.dtype(g.dtype), False)
    planes = xp.ascontiguousarray(g.reshape(-1, OH, OW))
    out = xp.zeros((planes.shape[0], H, W), g.dtype)
    if _loops(xp, planes):
        loop = kernels.loops("resample")
        if _many(planes, out, 4):
            kernels.parallel(loop.cubic2d_backward_planes, 2, planes, out, hi, hw, wi, ww, align=_MANY)
        else:
            kernels.parallel(loop.cubic2d_backward, 2, planes, out, hi, hw, wi, ww)
    else:
        for ii in range(4):
            for jj in range(4):
                w = (xp.asarray(hw[jj])[:, None] * xp.asarray(ww[ii])[None, :]).astype(g.dtype)
                rows, cols = xp.asarray(hi[jj])[:, None], xp.asarray(wi[ii])[None, :]
                for p in range(planes.shape[0]):
                    xp.add.at(out[p], (rows, cols), planes[p] * w)
    return out.reshape(g.shape[:2] + tuple(in_size))


def _onnx_cubic(g, x, *, sizes, scales, align):
    """ONNX ``Resize`` in cubic mode with PyTorch's coefficient (-0.75) and positions."""
    mode = "align_corners" if align else "pytorch_half_pixel"
    if all(s is not None for s in scales):
        factors = g.const(np.array([1.0, 1.0, *scales], np.float32))
        return g.op("Resize", x, None, factors, mode="cubic", cubic_coeff_a=-0.75,
                    coordinate_transformation_mode=mode)
    full = g.ints(list(g.shape(x)[:2]) + list(sizes))
    return g.op("Resize", x, None, None, full, mode="cubic", cubic_coeff_a=-0.75, coordinate_transformation_mode=mode)


_cubic = Op("upsample_bicubic", _cubic_fwd,
            lambda g, out, x, **p: (apply(_cubic_bwd, g, in_size=tuple(x.shape[2:]), **p),), saves=NONE,
            cost=lambda s, out: 16 * math.prod(out), onnx=_onnx_cubic,
            backward_name="UpsampleBicubic2DBackward0", aten="upsample_bicubic2d")
_cubic_bwd = Op("upsample_bicubic_backward", _cubic_bwd_fwd,
                lambda v, out, g, *, in_size, **p: (apply(_cubic, v, **p),), saves=NONE,
                cost=lambda s, out: 16 * math.prod(s[0]), aten="upsample_bicubic2d_backward")


def cubic_applies(input: Tensor, antialias: bool) -> bool:
    return not antialias and input.ndim == 4 and input._data.dtype in _EXACT


def bicubic(input: Tensor, sizes: tuple, scales: tuple, align: bool) -> Tensor:
    return apply(_cubic, input, sizes=tuple(int(s) for s in sizes), scales=tuple(scales), align=bool(align))


# ---------------------------------------------------------------- antialias
def _aa_filter(x, cubic: bool, t):
    if cubic:
        return _keys(x, t(-0.5), t, 2)
    x = abs(x)
    return t(1.0 - x) if x < 1.0 else t(0)


@functools.lru_cache(maxsize=256)
def aa_taps(n_in: int, n_out: int, align: bool, scale, dtype: np.dtype, cubic: bool) -> tuple:
    """``(lo, size, w)``: each output's first tap, tap count and weights ``(n_out, max taps)``."""
    t = dtype.type
    sc = _scale(n_in, n_out, align, scale, t)
    interp = 4 if cubic else 2
    support = t(interp * 0.5 * float(sc)) if sc >= 1.0 else t(interp * 0.5)
    taps = int(math.ceil(support)) * 2 + 1
    invscale = t(1.0 / float(sc)) if sc >= 1.0 else t(1.0)
    lo, size, w = np.empty(n_out, np.int64), np.empty(n_out, np.int64), np.zeros((n_out, taps), dtype)
    for i in range(n_out):
        center = t(float(sc) * (i + 0.5))
        xmin = max(int(float(t(center - support)) + 0.5), 0)
        xsize = min(max(min(int(float(t(center + support)) + 0.5), n_in) - xmin, 0), taps)
        total = t(0)
        for j in range(xsize):
            v = _aa_filter(t((float(t(t(j + xmin) - center)) + 0.5) * float(invscale)), cubic, t)
            w[i, j] = v
            total = t(total + v)
        if total != 0:
            w[i, :xsize] = (w[i, :xsize] / total).astype(dtype)
        lo[i], size[i] = xmin, xsize
    return lo, size, w


def _aa_plans(in_size, sizes, scales, align, dtype, cubic):
    return [aa_taps(n, o, align, s, np.dtype(dtype), cubic) for n, o, s in zip(in_size, sizes, scales)]


def _aa_fwd(xp, x, *, sizes, scales, align, cubic):
    if not has_data(xp):
        return xp.empty(x.shape[:2] + tuple(sizes), x.dtype)
    (H, W), (OH, OW) = x.shape[2:], sizes
    if (OH, OW) == (H, W):
        return xp.array(x, copy=True)
    (hlo, hsz, hw), (wlo, wsz, ww) = _aa_plans((H, W), sizes, scales, align, x.dtype, cubic)
    cur = xp.ascontiguousarray(x.reshape(-1, H, W))
    n = cur.shape[0]
    loop = kernels.loops("resample") if _loops(xp, cur) else None
    if OW != W:   # the width first, then the height, each only where its size changes
        rows = cur.reshape(n * H, W)
        out = xp.empty((n * H, OW), x.dtype)
        if loop is not None:
            kernels.parallel(loop.aa_rows, 2, rows, out, wlo, wsz, ww, _vec(x))
        else:
            out[...] = _aa_numpy(xp, rows, wlo, wsz, ww, 1)
        cur = out.reshape(n, H, OW)
    if OH != H:
        out = xp.empty((n, OH, cur.shape[2]), x.dtype)
        if loop is not None:
            kernels.parallel(loop.aa_cols, 2, cur, out, hlo, hsz, hw, _vec(x))
        else:
            out[...] = _aa_numpy(xp, cur, hlo, hsz, hw, 1 if cur.ndim == 2 else -2)
        cur = out
    return cur.reshape(x.shape[:2] + (OH, OW))


def _vec(x) -> int:
    """How many taps GCC's vectorised antialias loop adds unfused at a time (16-byte vectors)."""
    return 16 // x.dtype.itemsize


def _aa_numpy(xp, a, lo, size, w, axis):
    axis = axis % a.ndim
    acc = None
    for j in range(w.shape[1]):
        idx = xp.asarray(np.minimum(lo + j, a.shape[axis] - 1))
        shape = [1] * a.ndim
        shape[axis] = -1
        wj = xp.asarray(np.where(j < size, w[:, j], 0).astype(a.dtype)).reshape(shape)
        term = xp.take(a, idx, axis=axis)
        acc = term * wj if acc is None else _mul_add(xp, term, wj, acc)
    return acc


def _aa_bwd_fwd(xp, g, *, in_size, sizes, scales, align, cubic):
    if not has_data(xp):
        return xp.empty(g.shape[:2] + tuple(in_size), g.dtype)
    (H, W), (OH, OW) = in_size, sizes
    (hlo, hsz, hw), (wlo, wsz, ww) = _aa_plans((H, W), sizes, scales, align, g.dtype, cubic)
    planes = xp.ascontiguousarray(g.reshape(-1, OH, OW))
    out = xp.zeros((planes.shape[0], H, W), g.dtype)
    if _loops(xp, planes):
        loop = kernels.loops("resample")
        if _many(planes, out, 4):
            kernels.parallel(loop.aa2d_backward_planes, 2, planes, out, hlo, hsz, hw, wlo, wsz, ww, align=_MANY)
        else:
            kernels.parallel(loop.aa2d_backward, 2, planes, out, hlo, hsz, hw, wlo, wsz, ww)
    else:
        mh, mw = np.zeros((OH, H), g.dtype), np.zeros((OW, W), g.dtype)
        for m, lo, sz, w in ((mh, hlo, hsz, hw), (mw, wlo, wsz, ww)):
            for o in range(m.shape[0]):
                m[o, lo[o]:lo[o] + sz[o]] = w[o, :sz[o]]
        out[...] = xp.asarray(mh.T) @ planes @ xp.asarray(mw)
    return out.reshape(g.shape[:2] + tuple(in_size))


def _onnx_matmuls(g, x, mats):
    """``x`` (N, C, ..., H, W) times one constant (out, in) matrix per trailing dim (None leaves a dim)."""
    for k, m in enumerate(mats):
        if m is None:
            continue
        last = k == len(mats) - 1
        x = g.op("MatMul", x, g.const(np.ascontiguousarray(m.T))) if last else g.op("MatMul", g.const(m), x)
    return x


def _onnx_aa(g, x, *, sizes, scales, align, cubic):
    """The antialias weights as one ``MatMul`` per resized dim (ONNX ``Resize`` antialiases differently)."""
    in_size = list(g.shape(x)[2:])
    mats = []
    for (lo, size, w), n, o in zip(_aa_plans(in_size, sizes, scales, align, np.float32, cubic), in_size, sizes):
        m = np.zeros((o, n), np.float32)
        for i in range(o):
            m[i, lo[i]:lo[i] + size[i]] = w[i, :size[i]]
        mats.append(None if n == o else m)
    return _onnx_matmuls(g, x, mats)


_AA_NAMES = {False: "_upsample_bilinear2d_aa", True: "_upsample_bicubic2d_aa"}
_aa = Op("upsample_aa", _aa_fwd,
         lambda g, out, x, **p: (apply(_aa_bwd, g, in_size=tuple(x.shape[2:]), **p),), saves=NONE,
         cost=lambda s, out: 8 * math.prod(out), onnx=_onnx_aa,
         backward_name=lambda ndims, p: "UpsampleBicubic2DAaBackward0" if p["cubic"] else "UpsampleBilinear2DAaBackward0",
         aten=lambda shapes, p: _AA_NAMES[p["cubic"]])
_aa_bwd = Op("upsample_aa_backward", _aa_bwd_fwd,
             lambda v, out, g, *, in_size, **p: (apply(_aa, v, **p),), saves=NONE,
             cost=lambda s, out: 8 * math.prod(s[0]), aten=lambda shapes, p: _AA_NAMES[p["cubic"]] + "_backward")


def aa_applies(input: Tensor, antialias: bool) -> bool:
    return antialias and input.ndim == 4 and input._data.dtype in _EXACT


def antialias(input: Tensor, sizes: tuple, scales: tuple, align: bool, cubic: bool) -> Tensor:
    return apply(_aa, input, sizes=tuple(int(s) for s in sizes), scales=tuple(scales), align=bool(align),
                 cubic=bool(cubic))


# ---------------------------------------------------------------- adaptive average pool
@functools.lru_cache(maxsize=256)
def adaptive_windows(n_in: int, n_out: int) -> tuple:
    o = np.arange(n_out, dtype=np.int64)
    return (o * n_in) // n_out, -(-((o + 1) * n_in) // n_out)


def _as3d(shape, size) -> tuple:
    """``(planes, D, H, W)``: the spatial dims padded in front with ones."""
    size = tuple(size)
    return (math.prod(shape[:2]),) + (1,) * (3 - len(size)) + size


def _windows3(in_size, sizes) -> list:
    pad = 3 - len(sizes)
    return [a for n, o in zip((1,) * pad + tuple(in_size), (1,) * pad + tuple(sizes))
            for a in adaptive_windows(n, o)]


def _adaptive_fwd(xp, x, *, sizes):
    if not has_data(xp):
        return xp.empty(x.shape[:2] + tuple(sizes), x.dtype)
    if x.dtype in REDUCED_NP:   # ATen's 1-d and 2-d kernels sum in float32 and round the mean once
        return in_opmath(_adaptive_fwd, xp, x, sizes=sizes)
    planes = xp.ascontiguousarray(x.reshape(_as3d(x.shape, x.shape[2:])))
    if _loops(xp, planes):
        out = np.empty(_as3d(x.shape, sizes), x.dtype)
        loop, win = kernels.loops("resample"), _windows3(x.shape[2:], sizes)
        if _many(planes, out):
            kernels.parallel(loop.adaptive_avg_planes, 2, _flat(planes), _flat(out), *win, np.zeros(1, x.dtype),
                             planes.shape[2], planes.shape[3], align=_MANY)
        else:
            kernels.parallel(loop.adaptive_avg3d, 2, planes, out, *win, np.zeros(1, x.dtype))
        return out.reshape(x.shape[:2] + tuple(sizes))
    res = planes
    for k, (n, o) in enumerate(zip(planes.shape[1:], _as3d(x.shape, sizes)[1:])):
        lo, hi = adaptive_windows(n, o)
        c = xp.concatenate([xp.zeros_like(xp.take(res, xp.asarray([0]), axis=k + 1)), xp.cumsum(res, axis=k + 1)],
                           axis=k + 1)
        res = (xp.take(c, xp.asarray(hi), axis=k + 1) - xp.take(c, xp.asarray(lo), axis=k + 1))
        shape = [1] * 4
        shape[k + 1] = -1
        res = res / xp.asarray((hi - lo).astype(x.dtype)).reshape(shape)
    return res.astype(x.dtype).reshape(x.shape[:2] + tuple(sizes))


def _adaptive_bwd_reduced(xp, planes, out):
    """ATen's 2-d backward in bfloat16/half: each window's ``g / kh / kw`` rounded after each division,
    added to the input gradient window by window in row-major output order, each add rounded (overlapping
    windows' sums depend on that order)."""
    (_, _, H, W), (_, _, oh, ow) = out.shape, planes.shape
    (h0, h1), (w0, w1) = adaptive_windows(H, oh), adaptive_windows(W, ow)
    t = planes.dtype.type
    for i in range(oh):
        for j in range(ow):
            delta = planes[:, :, i, j] / t(h1[i] - h0[i]) / t(w1[j] - w0[j])
            out[:, :, h0[i]:h1[i], w0[j]:w1[j]] += delta[:, :, None, None]


def _adaptive_bwd_fwd(xp, g, *, in_size, sizes):
    if not has_data(xp):
        return xp.empty(g.shape[:2] + tuple(in_size), g.dtype)
    planes = xp.ascontiguousarray(g.reshape(_as3d(g.shape, sizes)))
    out = xp.zeros(_as3d(g.shape, in_size), g.dtype)
    if g.dtype in REDUCED_NP:
        _adaptive_bwd_reduced(xp, planes, out)
    elif _loops(xp, planes):
        loop, win = kernels.loops("resample"), _windows3(in_size, sizes)
        if _many(planes, out):
            kernels.parallel(loop.adaptive_avg_planes_backward, 2, _flat(planes), _flat(out), *win,
                             np.zeros(1, g.dtype), out.shape[2], out.shape[3], align=_MANY)
        else:
            kernels.parallel(loop.adaptive_avg3d_backward, 2, planes, out, *win, np.zeros(1, g.dtype))
    else:
        res = planes
        for k, (n, o) in enumerate(zip(out.shape[1:], planes.shape[1:])):
            lo, hi = adaptive_windows(n, o)
            m = np.zeros((n, o), g.dtype)
            for i in range(o):
                m[lo[i]:hi[i], i] = 1.0 / (hi[i] - lo[i])
            res = xp.moveaxis(xp.moveaxis(res, k + 1, -1) @ xp.asarray(m.T), -1, k + 1)
        out[...] = res
    return out.reshape(g.shape[:2] + tuple(in_size))


def _onnx_adaptive(g, x, *, sizes):
    """``AveragePool`` where the windows tile the input, else one averaging ``MatMul`` per changed dim."""
    in_size = list(g.shape(x)[2:])
    if all(n % o == 0 for n, o in zip(in_size, sizes)):
        k = [n // o for n, o in zip(in_size, sizes)]
        return g.op("AveragePool", x, kernel_shape=k, strides=k, pads=[0] * (2 * len(k)))
    if len(sizes) > 2:
        raise NotImplementedError("adaptive_avg_pool3d with windows that do not tile the input has no ONNX form here")
    mats = []
    for n, o in zip(in_size, sizes):
        lo, hi = adaptive_windows(n, o)
        m = np.zeros((o, n), np.float32)
        for i in range(o):
            m[i, lo[i]:hi[i]] = 1.0 / (hi[i] - lo[i])
        mats.append(None if n == o else m)
    return _onnx_matmuls(g, x, mats)


_adaptive = Op("adaptive_avg_pool", _adaptive_fwd,
               lambda g, out, x, **p: (apply(_adaptive_bwd, g, in_size=tuple(x.shape[2:]), **p),), saves=NONE,
               cost=lambda s, out: math.prod(s[0]), onnx=_onnx_adaptive,
               backward_name=lambda ndims, p: f"AdaptiveAvgPool{max(len(p['sizes']), 2)}DBackward0",
               aten=lambda shapes, p: f"_adaptive_avg_pool{max(len(p['sizes']), 2)}d")
_adaptive_bwd = Op("adaptive_avg_pool_backward", _adaptive_bwd_fwd,
                   lambda v, out, g, *, in_size, **p: (apply(_adaptive, v, **p),), saves=NONE,
                   cost=lambda s, out: math.prod(out),
                   aten=lambda shapes, p: f"_adaptive_avg_pool{max(len(p['sizes']), 2)}d_backward")


def adaptive_applies(x: Tensor, sizes: tuple) -> bool:
    """Whether the op takes this call: float32/float64 (and bfloat16/half in 1-d and 2-d, computed in
    float32) whose windows ``avg_pool`` cannot match (that divides once by ``kh kw``, ATen's adaptive
    kernel by each extent in turn: equal only while at most one extent is not a power of two)."""
    if x._data.dtype not in _EXACT + REDUCED_NP or not 1 <= len(sizes) <= 3:
        return False
    if x._data.dtype in REDUCED_NP and len(sizes) == 3:   # ATen's 3-d kernel rounds each step in the dtype
        return False
    if all(n % o == 0 for n, o in zip(x.shape[2:], sizes)):
        ks = [n // o for n, o in zip(x.shape[2:], sizes)]
        return sum(k & (k - 1) != 0 for k in ks) > 1
    return True


def adaptive_avg_pool(x: Tensor, sizes: tuple) -> Tensor:
    return apply(_adaptive, x, sizes=tuple(int(s) for s in sizes))
