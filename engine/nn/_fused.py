"""Fused nn primitives: softmax, log_softmax, layer_norm, gelu, nll_loss and cross_entropy.

Each was a composite of 4-10 Tensor ops (and as many backward nodes); here each is one op
under the name users type, so a step dispatches less and the tape view's search finds it.
A vjp is a fused ``*_backward`` op whose own vjp is written in Tensor ops (or is its
adjoint pair, as ``nll_loss`` and ``nll_loss_backward`` are), so every order of derivative
stays exact. Forwards receive ``xp`` and never import numpy or cupy. On cpu float32, softmax,
log_softmax, (N, C) cross_entropy, layer_norm and gelu, forward and backward, run one fused
loop each (engine/kernels) instead of the numpy formula, when ``kernels.use`` says so.
"""
from __future__ import annotations

import math

from .. import kernels
from ..base import backend as _backend
from ..base.dtype import BFLOAT16_NP, REDUCED_NP, float32 as _float32, in_float32, in_opmath
from ..base.grad_mode import is_grad_enabled
from ..autograd.views import apply_
from ..base.meta import has_data
from ..core.dispatch import apply, keeps_forward_state
from ..core.registry import ALL, NONE, OTHERS, Op
from ..core.tensor import Tensor
from ..ops.reduce import array_sum
from ._ops import _bn_bwd

__all__ = ["softmax", "log_softmax", "layer_norm", "gelu", "silu", "hardswish", "hardsigmoid", "hardtanh", "softplus", "elu", "mish", "log_sigmoid",
           "nll_loss", "cross_entropy"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_layer_norm(g, x, *affine, dims, eps, has_weight, bf16_sums=False):
    shape = [g.shape(x)[d] for d in dims]       # onnxruntime 1.32 crashes on an omitted bias: give zeros
    w = affine[0] if has_weight else g.full(shape, 1.0, g.dtype(x))
    b = affine[-1] if len(affine) > has_weight else g.full(shape, 0.0, g.dtype(x))
    return g.op("LayerNormalization", x, w, b, axis=dims[0], epsilon=eps)


def _onnx_gelu(g, x, *, approximate):
    if g.opset >= 20:
        return g.op("Gelu", x, approximate=approximate)
    if approximate == "tanh":
        inner = g.op("Mul", g.op("Add", x, g.op("Mul", g.op("Mul", g.op("Mul", x, x), x), 0.044715)),
                     math.sqrt(2 / math.pi))
        return g.op("Mul", g.op("Mul", x, 0.5), g.op("Add", g.op("Tanh", inner), 1.0))
    return g.op("Mul", g.op("Mul", x, 0.5), g.op("Add", g.op("Erf", g.op("Div", x, math.sqrt(2))), 1.0))


def _numel(shapes, out) -> int:
    return math.prod(out)


def _loop(xp, name, dim, *arrays, lanes: bool = False):
    """Run the row loop ``name`` over the last dim into a new array, or None where it does not apply
    (``lanes``: the loop takes ATen's float32 lane count last, ``fastmath.aten_lanes``)."""
    x = arrays[-1]
    if not x.ndim or dim != x.ndim - 1 or not x.size or not kernels.use(xp, *arrays):
        return None
    out = xp.empty_like(x)
    rows = [a.reshape(-1, x.shape[-1]) for a in arrays + (out,)]
    extra = (kernels.loops("pointwise").aten_lanes(),) if lanes else ()
    kernels.parallel(getattr(kernels.loops("rowwise"), name), len(rows), *rows, *extra)
    return out


# ---------------------------------------------------------------- softmax / log_softmax
# The max shift keeps exp finite; a row holding +inf becomes nan as in PyTorch (inf - inf).
def _shifted(xp, x, dim):
    if x.ndim == 0:
        return x - x
    return x - x.max(axis=dim, keepdims=True) if x.size else x


def _row_major(xp, a):
    """``a`` C-contiguous (a copy only when it is not; a 0-d array as it is)."""
    return xp.ascontiguousarray(a) if a.ndim and not a.flags.c_contiguous else a


def _softmax_fwd(xp, x, *, dim):
    if x.dtype in REDUCED_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_opmath(_softmax_fwd, xp, x, dim=dim)
    x = _row_major(xp, x)   # ATen's kernel reads input.contiguous(): a row-major result
    fused = _loop(xp, "softmax", dim, x, lanes=True)
    if fused is not None:
        return fused
    e = xp.exp(_shifted(xp, x, dim))
    e /= e.sum(axis=dim, keepdims=True) if x.ndim else e
    return e


def _softmax_bwd_fwd(xp, g, y, *, dim):
    """``y (g - sum(g y))``: the softmax vjp from its output."""
    if g.dtype is BFLOAT16_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_float32(_softmax_bwd_fwd, xp, g, y, dim=dim)
    if y.ndim == 0:
        return g * 0
    fused = _loop(xp, "softmax_backward", dim, g, y, lanes=True)
    if fused is not None:
        return fused
    s = (g * y).sum(axis=dim, keepdims=True)
    return y * (g - s)


def _softmax_bwd_vjp(v, out, g, y, *, dim):
    """H(g, y) = y (g - sum(g y)) is self-adjoint in g; in y: v (g - sum(g y)) - g sum(v y)."""
    gg = apply(_softmax_bwd, v, y, dim=dim) if g.requires_grad else None
    gy = None
    if y.requires_grad:
        gy = v * (g - (g * y).sum(dim, keepdim=True)) - g * (v * y).sum(dim, keepdim=True)
    return gg, gy


def _inner_loop(xp, name, dim, *arrays):
    """Run ``name`` (``rowwise.log_softmax_inner`` or its backward) over a middle ``dim`` of row-major
    float32 arrays into a new array, or None where it does not apply."""
    x = arrays[-1]
    if not x.size or dim >= x.ndim - 1 or not kernels.use(xp, *arrays):
        return None
    out = xp.empty_like(x)
    shape = (math.prod(x.shape[:dim]), x.shape[dim], -1)
    getattr(kernels.loops("rowwise"), name)(*(a.reshape(shape) for a in arrays + (out,)),
                                            kernels.loops("pointwise").aten_lanes())
    return out


def _log_softmax_fwd(xp, x, *, dim):
    if x.dtype is BFLOAT16_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_float32(_log_softmax_fwd, xp, x, dim=dim)
    x = _row_major(xp, x)
    fused = _loop(xp, "log_softmax", dim, x, lanes=True)
    if fused is None:   # a middle dim (class scores of (N, C, H, W)): ATen's blocked loop
        fused = _inner_loop(xp, "log_softmax_inner", dim, x)
    if fused is not None:
        return fused
    s = _shifted(xp, x, dim)
    if x.ndim == 0:
        return s
    s -= xp.log(xp.exp(s).sum(axis=dim, keepdims=True))
    return s


def _log_softmax_bwd_fwd(xp, g, y, *, dim):
    """``g - exp(y) sum(g)``: the log_softmax vjp from its output."""
    if g.dtype is BFLOAT16_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_float32(_log_softmax_bwd_fwd, xp, g, y, dim=dim)
    if y.ndim == 0:
        return g * 0
    fused = _loop(xp, "log_softmax_backward", dim, g, y, lanes=True)
    if fused is None:
        fused = _inner_loop(xp, "log_softmax_backward_inner", dim, _row_major(xp, g), _row_major(xp, y))
    return g - xp.exp(y) * g.sum(axis=dim, keepdims=True) if fused is None else fused


def _log_softmax_bwd_vjp(v, out, g, y, *, dim):
    """H(g, y) = g - e^y sum(g): in g, v - sum(v e^y); in y, -v e^y sum(g)."""
    p = y.exp()
    gg = v - (v * p).sum(dim, keepdim=True) if g.requires_grad else None
    gy = -(v * p) * g.sum(dim, keepdim=True) if y.requires_grad else None
    return gg, gy


_softmax = Op("softmax", _softmax_fwd, lambda g, out, x, *, dim: (apply(_softmax_bwd, g, out, dim=dim),),
              saves=NONE, save_output=True, cost=_numel, onnx=lambda g, x, *, dim: g.op("Softmax", x, axis=dim),
              aten="softmax(_softmax)")
_softmax_bwd = Op("softmax_backward", _softmax_bwd_fwd, _softmax_bwd_vjp, cost=_numel, aten="_softmax_backward_data")
_log_softmax = Op("log_softmax", _log_softmax_fwd,
                  lambda g, out, x, *, dim: (apply(_log_softmax_bwd, g, out, dim=dim),),
                  saves=NONE, save_output=True, cost=_numel, onnx=lambda g, x, *, dim: g.op("LogSoftmax", x, axis=dim),
                  aten="log_softmax(_log_softmax)")
_log_softmax_bwd = Op("log_softmax_backward", _log_softmax_bwd_fwd, _log_softmax_bwd_vjp, cost=_numel,
                      aten="_log_softmax_backward_data")


def softmax(x: Tensor, dim: int) -> Tensor:
    """``exp(x - max) / sum`` along ``dim`` (already wrapped), a floating ``x``."""
    return apply(_softmax, x, dim=dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    return apply(_log_softmax, x, dim=dim)


# ---------------------------------------------------------------- layer norm
# The normalisation's vjp is batch_norm_backward over the trailing dims (the same closed form).
def _ln_fwd(xp, x, *affine, dims, eps, has_weight, bf16_sums=False):
    if x.dtype in REDUCED_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_opmath(_ln_fwd, xp, x, *affine, dims=dims, eps=eps, has_weight=has_weight)
    x = _row_major(xp, x)   # ATen normalizes input.contiguous(): a row-major result, the loop's numbers
    done = _ln_loop(xp, x, affine, dims, eps, has_weight)
    if done is not None:
        return done[0]
    mean = x.mean(axis=dims, keepdims=True)
    c = x - mean
    var = (c * c).mean(axis=dims, keepdims=True)
    c *= 1 / xp.sqrt(var + x.dtype.type(eps))
    if has_weight:
        c *= affine[0]
    if len(affine) > has_weight:
        c += affine[-1]
    return c


def _ln_loop(xp, x, affine, dims, eps, has_weight):
    """The forward loop's ``(out, mean, rstd)`` (the statistics flat, one per row) for a row-major ``x``,
    or None where the loop does not take the arrays."""
    if not (x.size and kernels.use(xp, x, *affine)):
        return None
    cols = math.prod(x.shape[x.ndim - len(dims):])
    w = affine[0].reshape(-1) if has_weight else xp.empty(0, x.dtype)
    b = affine[-1].reshape(-1) if len(affine) > has_weight else xp.empty(0, x.dtype)
    out, mean, rstd = xp.empty_like(x), xp.empty(x.size // cols, x.dtype), xp.empty(x.size // cols, x.dtype)
    kernels.parallel(kernels.loops("rowwise").layer_norm, 4, x.reshape(-1, cols), out.reshape(-1, cols), mean, rstd,
                     w, b, x.dtype.type(eps))
    return out, mean, rstd


def _ln_fwd_saving(xp, x, *affine, dims, eps, has_weight, bf16_sums=False):
    """The output and, where the loop runs, its flat mean and 1/std for the backward (empty arrays
    elsewhere: that backward recomputes them, as the one-op form's does)."""
    done = _ln_loop(xp, _row_major(xp, x), affine, dims, eps, has_weight)
    if done is None:
        empty = xp.empty((0,), x.dtype)
        return _ln_fwd(xp, x, *affine, dims=dims, eps=eps, has_weight=has_weight), empty, empty
    return done


# The backward's parts run at once only above this many elements: in the GPT d384 step (512 x 384) its three
# calls took 0.42-0.48 ms against 0.45-0.52 in order, but at 1024 x 128 (GPT d128, Transformer; the sequential
# loop ~40 us hot, less than waking the other CPU costs in a step) 0.26-0.27 -> 0.29-0.38 (two threads,
# issue 17, session 31).
_LN_BACKWARD_SPLIT_ABOVE = 1 << 17


def _ln_bwd_fwd(xp, g, x, *affine, dims, eps, has_weight, needs, bf16_sums=False, saved=False):
    """``(gx, gw, gb)`` for a plain backward (an unneeded one is an empty array): one loop on cpu
    float32, else ``s (gy - mean(gy) - xhat mean(gy xhat))`` with ``gy = g w``, ``sum(g xhat)``, ``sum(g)``.
    With ``saved``, ``affine`` ends with the forward's flat mean and 1/std (empty where it did not keep
    them), which the loop reads instead of recomputing."""
    stats = ()
    if saved:
        affine, stats = affine[:-2], affine[-2:]
    if x.dtype is BFLOAT16_NP:
        mixed = bool(affine) and all(a.dtype == xp.float32 for a in affine)   # ATen's float statistics then
        return in_float32(_ln_bwd_bfloat16, xp, g, x, *affine, dims=dims, eps=eps, has_weight=has_weight,
                          needs=needs, mixed=mixed)
    g, x = _row_major(xp, g), _row_major(xp, x)
    empty = xp.empty((0,), x.dtype)
    w = affine[0] if has_weight else None
    cols = math.prod(x.shape[x.ndim - len(dims):])
    if x.size and kernels.use(xp, g, x, *affine) and g.shape == x.shape:
        gx, gw, gb = xp.empty_like(x), xp.zeros(cols, x.dtype), xp.zeros(cols, x.dtype)   # all three: no branches
        loops, rows = kernels.loops("rowwise"), x.reshape(-1, cols)
        mean, rstd = stats if stats and stats[0].size else (xp.empty(len(rows), x.dtype), xp.empty(len(rows), x.dtype))
        if not (stats and stats[0].size):
            loops.layer_norm_stats(rows, x.dtype.type(eps), mean, rstd)
        # ATen's rows cut as at this many threads: its weight and bias sums differ from one thread's
        chunk = -(-len(rows) // min(kernels.threads(), len(rows)))
        args = (g.reshape(-1, cols), rows, xp.ones(cols, x.dtype) if w is None else xp.ascontiguousarray(w.reshape(-1)),
                w is not None, mean, rstd, gx.reshape(-1, cols))
        if x.size > _LN_BACKWARD_SPLIT_ABOVE and chunk < len(rows):
            # the parts at once, as ATen's (each part's sums on lines of their own), then added in order
            sums = loops.layer_norm_part_sums(len(rows), cols, chunk)
            kernels.parallel_ranges(loops.layer_norm_backward_chunks, len(sums), x.size,
                                    lambda first, lo, hi: (*args, sums, chunk, lo, hi), shared=True)
            loops.layer_norm_add_parts(sums, gw, gb)
        else:   # one compiled call (three here took a d128 step's three 0.26-0.28 -> 0.29-0.35 ms)
            loops.layer_norm_backward_parts(*args, gw, gb, chunk)
        shape = x.shape[x.ndim - len(dims):]
        if bf16_sums:
            gw, gb = _ln_bf16_sums(xp, g, x, cols, eps)
        return gx, gw.reshape(shape), gb.reshape(shape)
    lead = tuple(range(x.ndim - len(dims)))
    c = x - x.mean(axis=dims, keepdims=True)
    s = 1 / xp.sqrt((c * c).mean(axis=dims, keepdims=True) + x.dtype.type(eps))
    c *= s                                                   # xhat
    gx = empty
    if needs[0]:
        gy = g if w is None else g * w
        gx = gy - gy.mean(axis=dims, keepdims=True)
        gx -= c * (gy * c).mean(axis=dims, keepdims=True)
        gx *= s
    gw = (g * c).sum(axis=lead) if needs[1] else empty
    gb = g.sum(axis=lead) if needs[2] else empty
    if bf16_sums and x.size:
        gw, gb = (v.reshape(x.shape[x.ndim - len(dims):]) for v in _ln_bf16_sums(xp, g, x, cols, eps))
    return gx, gw, gb


def _ln_bf16_sums(xp, g, x, cols, eps):
    """The weight's and bias's gradients of a bfloat16 input's float32 copy with float32 parameters (the
    mixed composite): ATen keeps float statistics and sums in bfloat16 buffers."""
    rows, grows = x.reshape(-1, cols), g.reshape(-1, cols)
    mean = rows.mean(axis=1)
    a = 1 / xp.sqrt(((rows - mean[:, None]) ** 2).mean(axis=1) + x.dtype.type(eps))
    return _ln_affine_grads_rounded(xp, grows, rows, mean, a)


def _ln_bwd_bfloat16(xp, g, x, *affine, dims, eps, has_weight, needs, mixed):
    """A bfloat16 layer norm's gradients (arrays in float32), as ATen's: its forward keeps the mean
    and 1/std in bfloat16 (in float with float32 parameters: ``mixed``), and the input's gradient is
    ``a gy + b x + c`` per row with ``a`` that 1/std, ``b = (sum(gy) mean - sum(gy x)) a^3 / N``,
    ``c = -b mean - sum(gy) a / N``. The weight's and bias's gradients accumulate row by row in a
    bfloat16 buffer, each step rounded (float32 parameters' too: their sums carry bfloat16's error)."""
    n = math.prod(x.shape[x.ndim - len(dims):])
    mean = x.mean(axis=dims, keepdims=True)
    c = x - mean
    a = 1 / xp.sqrt((c * c).mean(axis=dims, keepdims=True) + xp.float32(eps))
    if not mixed:
        mean, a = (v.astype(BFLOAT16_NP).astype(xp.float32) for v in (mean, a))
    empty = xp.empty((0,), x.dtype)
    gy = g if not has_weight else g * affine[0]
    gx = empty
    if needs[0]:
        ds, db = (gy * x).sum(axis=dims, keepdims=True), gy.sum(axis=dims, keepdims=True)
        b = (db * mean - ds) * a * a * a / xp.float32(n)
        gx = a * gy + b * x + (-b * mean - db * a / xp.float32(n))
    gw, gb = _ln_affine_grads_rounded(xp, g.reshape(-1, n), x.reshape(-1, n), mean.reshape(-1), a.reshape(-1))
    shape = x.shape[x.ndim - len(dims):]
    return gx, gw.reshape(shape) if needs[1] else empty, gb.reshape(shape) if needs[2] else empty


def _ln_affine_grads_rounded(xp, g, x, mean, a):
    """``sum_r fma(g, fma(a, x, -a mean), acc)`` and ``sum_r g`` over the rows, each partial sum rounded
    to bfloat16 (ATen's reduced-precision buffers), in float32 arrays."""
    gw, gb = xp.zeros(x.shape[1], xp.float32), xp.zeros(x.shape[1], xp.float32)
    if kernels.use(xp, g, x):
        kernels.loops("rowwise").layer_norm_affine_grads_bfloat16(g, x, mean, a, gw, gb)
        return gw, gb
    for r in range(x.shape[0]):
        gw = (gw + g[r] * (a[r] * x[r] - a[r] * mean[r])).astype(BFLOAT16_NP).astype(xp.float32)
        gb = (gb + g[r]).astype(BFLOAT16_NP).astype(xp.float32)
    return gw, gb


def _ln_plain_grads(g, x, affine, stats, dims, eps, has_weight, bf16_sums):
    """The plain backward (grad mode off) as one ``layer_norm_backward`` op: a gradient per input, None
    where none is needed; ``stats`` the forward's kept mean and 1/std, or ``()``."""
    w = affine[0] if has_weight else None
    needs = (x.requires_grad, w is not None and w.requires_grad,
             len(affine) > has_weight and affine[-1].requires_grad)
    more = {"bf16_sums": True} if bf16_sums else {}
    if stats:
        more["saved"] = True
    gx, gw, gb = apply(_ln_bwd, g, x, *affine, *stats, dims=dims, eps=eps, has_weight=has_weight, needs=needs, **more)
    grads = [gx if needs[0] else None] + ([gw if needs[1] else None] if has_weight else [])
    return tuple(grads + ([gb if needs[2] else None] if len(affine) > has_weight else []))


def _ln_vjp(g, out, x, *affine, dims, eps, has_weight, bf16_sums=False):
    w = affine[0] if has_weight else None
    if not is_grad_enabled():              # plain backward: one op; create_graph: Tensor ops below
        return _ln_plain_grads(g, x, affine, (), dims, eps, has_weight, bf16_sums)
    gx = apply(_bn_bwd, g if w is None else g * w, x, dims=dims, eps=eps) if x.requires_grad else None
    grads = [gx]
    lead = tuple(range(x.ndim - len(dims)))
    if w is not None:
        gw = None
        if w.requires_grad:
            xhat = apply(_ln, x, dims=dims, eps=eps, has_weight=False)
            gw = (g * xhat).sum(lead) if lead else g * xhat
        grads.append(gw)
    if len(affine) > has_weight:
        b = affine[-1]
        grads.append((g.sum(lead) if lead else g) if b.requires_grad else None)
    return tuple(grads)


def _ln_passthrough(xp, x, *rest, dims, eps, has_weight, bf16_sums=False):
    """The differentiable op's forward: the output ``layer_norm_forward`` made."""
    return rest[-3]


def _ln_saved_vjp(g, out, x, *rest, dims, eps, has_weight, bf16_sums=False):
    """The pass-through op's vjp: ``rest`` ends with the raw output and the forward's flat mean and
    1/std, which the backward loop reads instead of recomputing (create_graph: ``_ln_vjp``'s formulas)."""
    *affine, _, mean, rstd = rest
    if is_grad_enabled():
        return _ln_vjp(g, out, x, *affine, dims=dims, eps=eps, has_weight=has_weight, bf16_sums=bf16_sums) + (None,) * 3
    return _ln_plain_grads(g, x, affine, (mean, rstd), dims, eps, has_weight, bf16_sums) + (None,) * 3


_LN_ATEN = "layer_norm(native_layer_norm)"
_ln = Op("layer_norm", _ln_fwd, _ln_vjp, promote="float", saves=OTHERS, cost=lambda s, out: 8 * math.prod(out),
         onnx=_onnx_layer_norm, backward_name="NativeLayerNormBackward0", aten=_LN_ATEN)
_ln_bwd = Op("layer_norm_backward", _ln_bwd_fwd, None, promote="float", n_extra=2,
             cost=lambda s, out: 10 * math.prod(s[1]), aten="native_layer_norm_backward")
_ln_saving = Op("layer_norm_forward", _ln_fwd_saving, None, promote="float", n_extra=2, aten=_LN_ATEN)
_ln_saved = Op("layer_norm_saved_stats", _ln_passthrough, _ln_saved_vjp, promote="float", n_kept=3,
               backward_name="NativeLayerNormBackward0")


def layer_norm(x: Tensor, n_dims: int, weight: Tensor | None, bias: Tensor | None, eps: float,
               bf16_sums: bool = False) -> Tensor:
    """Normalise over the trailing ``n_dims`` dims, then scale and shift, as one op. ``bf16_sums``: ``x`` is
    a bfloat16 input's float32 copy with float32 parameters, whose gradients ATen sums in bfloat16. Where
    a gradient will be taken of a float32 input, ``layer_norm_forward`` keeps the loop's mean and 1/std
    and ``layer_norm_saved_stats`` passes its output through (as batch norm and attention keep theirs)."""
    affine = tuple(t for t in (weight, bias) if t is not None)
    params = dict(dims=tuple(range(x.ndim - n_dims, x.ndim)), eps=float(eps), has_weight=weight is not None)
    if bf16_sums:
        params["bf16_sums"] = True
    if x.dtype is _float32 and keeps_forward_state(x, *affine):
        out, mean, rstd = apply(_ln_saving, x, *affine, **params)
        return apply(_ln_saved, x, *affine, out, mean, rstd, **params)
    return apply(_ln, x, *affine, **params)


# ---------------------------------------------------------------- hardswish, hardsigmoid
# ATen's kernels: the backward from the input, its slope x/3 + 1/2 (1/6) on the open interval
# (-3, 3) only, 0 below, 1 (0) above; the composite's clamp passed gradient at -3 and 3 themselves.
def _opmath(fn):
    """``fn`` computed in float32 on bfloat16 or float16 arrays, rounded once (ATen's opmath type)."""
    def run(xp, *arrays, **params):
        dt = arrays[-1].dtype
        if dt is BFLOAT16_NP or dt == xp.float16:
            return fn(xp, *(a.astype(xp.float32) for a in arrays), **params).astype(dt)
        return fn(xp, *arrays, **params)
    return run


@_opmath
def _hardswish_fwd(xp, x):
    return x * xp.minimum(xp.maximum(x + 3, 0), 6) / 6


@_opmath
def _hardswish_bwd_fwd(xp, g, x):
    return xp.where(x <= -3, 0, xp.where(x < 3, g * (x / 3 + 0.5), g))


@_opmath
def _hardsigmoid_fwd(xp, x):
    return xp.minimum(xp.maximum(x + 3, 0), 6) / 6


@_opmath
def _hardsigmoid_bwd_fwd(xp, g, x):
    return xp.where((x > -3) & (x < 3), g * x.dtype.type(1 / 6), 0)


def _inside(x: Tensor) -> Tensor:
    return (x > -3.0) & (x < 3.0)


_hardswish_bwd = Op("hardswish_backward", _hardswish_bwd_fwd,
                    lambda gg, out, g, x: (apply(_hardswish_bwd, gg, x),
                                           (gg * g / 3.0).where(_inside(x), 0.0)), cost=_numel)
_hardswish = Op("hardswish", _hardswish_fwd, lambda g, out, x: (apply(_hardswish_bwd, g, x),), promote="float",
                saves=ALL, cost=_numel, onnx=lambda g, x: g.op("HardSwish", x) if g.opset >= 14 else
                g.op("Mul", x, g.op("HardSigmoid", x, alpha=1 / 6, beta=0.5)))
_hardsigmoid_bwd = Op("hardsigmoid_backward", _hardsigmoid_bwd_fwd,
                      lambda gg, out, g, x: (apply(_hardsigmoid_bwd, gg, x), gg * 0.0), cost=_numel)
_hardsigmoid = Op("hardsigmoid", _hardsigmoid_fwd, lambda g, out, x: (apply(_hardsigmoid_bwd, g, x),),
                  promote="float", saves=ALL, cost=_numel,
                  onnx=lambda g, x: g.op("HardSigmoid", x, alpha=1 / 6, beta=0.5))


# hardtanh (relu6): ATen's clamp forward and ``hardtanh_backward``, ``g`` where ``min < x < max`` (0 at the
# bounds themselves and at nan, as ATen's vector lambda; its scalar tail passes g at nan); the composite was five ops a way (two
# compares, and, clamp, where), 8.5 ms a pass over a MobileNetV2 step's 2.4 M floats
def _hardtanh_fwd(xp, x, *, min_val, max_val):
    out = xp.empty_like(x)
    xp.maximum(x, x.dtype.type(min_val), out=out)
    return xp.minimum(out, x.dtype.type(max_val), out=out)


def _hardtanh_bwd_fwd(xp, g, x, *, min_val, max_val):
    inside = x > x.dtype.type(min_val)
    inside &= x < x.dtype.type(max_val)
    return xp.where(inside, g, g.dtype.type(0))


_hardtanh_bwd = Op("hardtanh_backward", _opmath(_hardtanh_bwd_fwd),
                   lambda gg, out, g, x, **p: (apply(_hardtanh_bwd, gg, x, **p), gg * 0.0), cost=_numel)
_hardtanh = Op("hardtanh", _opmath(_hardtanh_fwd),
               lambda g, out, x, **p: (apply(_hardtanh_bwd, g, x, **p),), saves=ALL, cost=_numel,
               complex_error=(NotImplementedError, "clamp is not supported for complex types"),
               onnx=lambda g, x, *, min_val, max_val: g.op("Min", g.op("Max", x, g.scalar(min_val, x)),
                                                          g.scalar(max_val, x)))


# in place: one node, PyTorch's ``HardtanhBackward0`` (it keeps a copy of the input); the backward reads the clamped
# result instead, which gives the same mask (clamped values sit on the bounds) and is the array written into the
# input, so nothing is copied first (the composite cloned the input and recorded a ``copy_`` node)
_hardtanh_inplace = Op("hardtanh_", _opmath(_hardtanh_fwd),
                       lambda g, out, x, **p: (apply(_hardtanh_bwd, g, out, **p),), saves=NONE, save_output=True,
                       cost=_numel, complex_error=_hardtanh.complex_error, onnx=_hardtanh.onnx,
                       backward_name="HardtanhBackward0")


def hardtanh(x: Tensor, min_val: float, max_val: float) -> Tensor:
    return apply(_hardtanh, x, min_val=float(min_val), max_val=float(max_val))


def hardtanh_(x: Tensor, min_val: float, max_val: float) -> Tensor:
    return apply_(_hardtanh_inplace, x, min_val=float(min_val), max_val=float(max_val))


def hardswish(x: Tensor) -> Tensor:
    return apply(_hardswish, x)


def hardsigmoid(x: Tensor) -> Tensor:
    return apply(_hardsigmoid, x)


# ---------------------------------------------------------------- silu
# ATen's kernels: x / (1 + exp(-x)), its backward g s (1 + x (1 - s)) with s = 1 / (1 + exp(-x)), in
# float32 for half inputs; a differentiable backward (create_graph) is PyTorch's
# infinitely_differentiable_silu_backward, the same formula in Tensor ops of the input's dtype.
def _aten_loop(xp, *arrays) -> bool:
    """Whether ATen's float32 loops (``kernels.pointwise``: the same floats as PyTorch) take these arrays:
    the loops on, numpy arrays of float32, one shape, not empty (any layout: ``aten_map`` reads it as ATen)."""
    return kernels.use(xp) and kernels.loops("pointwise").takes(*arrays)


_SILU_SMALL = kernels.small_entry("silu")


@_opmath
def _silu_fwd(xp, x):
    if _aten_loop(xp, x):
        return kernels.loops("pointwise").aten_map1(_SILU_SMALL, x)
    one = x.dtype.type(1)
    return x / (one + xp.exp(-x))


@_opmath
def _silu_bwd_fwd(xp, g, x):
    if _aten_loop(xp, g, x):
        loops = kernels.loops("pointwise")
        return loops.aten_map(loops.silu_backward, (g, x), ())
    one = x.dtype.type(1)
    s = one / (one + xp.exp(-x))
    return g * s * (one + x * (one - s))


def _silu_vjp(g, out, x):
    if not is_grad_enabled():
        return (apply(_silu_bwd, g, x),)
    s = x.sigmoid()
    return (g * s * (1 + x * (1 - s)),)


_silu_bwd = Op("silu_backward", _silu_bwd_fwd, None, cost=_numel)
_silu = Op("silu", _silu_fwd, _silu_vjp, promote="float", saves=ALL, cost=_numel,
           onnx=lambda g, x: g.op("Mul", x, g.op("Sigmoid", x)))


def silu(x: Tensor) -> Tensor:
    return apply(_silu, x)


# ---------------------------------------------------------------- softplus, elu
# ATen's kernels: softplus ``log1p(exp(beta x)) / beta`` (x above ``threshold``), its backward
# ``g z/(z + 1)``, z = exp(beta x); elu ``alpha expm1(x)`` at or below 0, its backward (from the input)
# ``g alpha exp(x)``. On cpu float32 ``kernels.pointwise``'s loops give PyTorch's floats; the rest is numpy.
def _softplus_fwd(xp, x, *, beta, threshold):
    if _aten_loop(xp, x):
        loops = kernels.loops("pointwise")
        return loops.aten_map(loops.softplus, (x,), (xp.float32(beta), xp.float32(threshold)))
    return _softplus_formula(xp, x, beta, threshold)


def _softplus_formula(xp, x, beta, threshold):
    bx = x * x.dtype.type(beta)
    return xp.where(bx > threshold, x, xp.log1p(xp.exp(xp.minimum(bx, threshold))) / x.dtype.type(beta))


def _softplus_bwd_fwd(xp, g, x, *, beta, threshold):
    if _aten_loop(xp, g, x):
        loops = kernels.loops("pointwise")
        return loops.aten_map(loops.softplus_backward, (g, x), (xp.float32(beta), xp.float32(threshold)))
    bx = x * x.dtype.type(beta)
    z = xp.exp(xp.minimum(bx, threshold))
    return xp.where(bx > threshold, g, g * z / (z + 1))


def _softplus_bwd_vjp(gg, out, g, x, *, beta, threshold):
    s = (x * beta).sigmoid()
    return (apply(_softplus_bwd, gg, x, beta=beta, threshold=threshold),
            (gg * g * beta * s * (1 - s)).where(x * beta <= threshold, 0.0))


_softplus_bwd = Op("softplus_backward", _softplus_bwd_fwd, _softplus_bwd_vjp, cost=_numel)
_softplus = Op("softplus", _softplus_fwd,
               lambda g, out, x, *, beta, threshold: (apply(_softplus_bwd, g, x, beta=beta, threshold=threshold),),
               promote="float", saves=ALL, cost=_numel,
               onnx=lambda g, x, *, beta, threshold: g.op("Div", g.op("Softplus", g.op("Mul", x, beta)), beta))


def softplus(x: Tensor, beta: float, threshold: float) -> Tensor:
    return apply(_softplus, x, beta=beta, threshold=threshold)


def _elu_fwd(xp, x, *, alpha):
    if _aten_loop(xp, x):
        loops = kernels.loops("pointwise")
        return loops.aten_map(loops.elu, (x,), (xp.float32(alpha),))
    return xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0)) * x.dtype.type(alpha))


def _elu_bwd_fwd(xp, g, x, *, alpha):
    if _aten_loop(xp, g, x):
        loops = kernels.loops("pointwise")
        return loops.aten_map(loops.elu_backward, (g, x), (xp.float32(alpha),))
    return xp.where(x > 0, g, g * x.dtype.type(alpha) * xp.exp(xp.minimum(x, 0)))


def _elu_bwd_vjp(gg, out, g, x, *, alpha):
    return (apply(_elu_bwd, gg, x, alpha=alpha), (gg * g * alpha * x.exp()).where(x <= 0, 0.0))


_elu_bwd = Op("elu_backward", _elu_bwd_fwd, _elu_bwd_vjp, cost=_numel)
_elu = Op("elu", _elu_fwd, lambda g, out, x, *, alpha: (apply(_elu_bwd, g, x, alpha=alpha),),
          promote="float", saves=ALL, cost=_numel, onnx=lambda g, x, *, alpha: g.op("Elu", x, alpha=alpha))


def elu(x: Tensor, alpha: float) -> Tensor:
    return apply(_elu, x, alpha=alpha)


# ---------------------------------------------------------------- mish
# ATen's kernels: ``x tanh(softplus(x))`` with no threshold, its backward ``g (t + x s (1 - t^2))``.
_MISH_SMALL = kernels.small_entry("mish")


def _mish_fwd(xp, x):
    if _aten_loop(xp, x):
        return kernels.loops("pointwise").aten_map1(_MISH_SMALL, x)
    return x * xp.tanh(_softplus_formula(xp, x, 1.0, 20.0))


def _mish_bwd_fwd(xp, g, x):
    if _aten_loop(xp, g, x):
        loops = kernels.loops("pointwise")
        return loops.aten_map(loops.mish_backward, (g, x), ())
    t = xp.tanh(_softplus_formula(xp, x, 1.0, 20.0))
    s = 1 / (1 + xp.exp(-x))
    return g * (t + x * s * (1 - t * t))


def _mish_bwd_vjp(gg, out, g, x):
    """mish'' = s (1 - t^2) (2 + x (1 - s) - 2 x s t)."""
    s, t = x.sigmoid(), _softplus_t(x)
    return apply(_mish_bwd, gg, x), gg * g * s * (1 - t * t) * (2 + x * (1 - s) - 2 * x * s * t)


def _softplus_t(x: Tensor) -> Tensor:
    return softplus(x, 1.0, 20.0).tanh()


def _mish_vjp(g, out, x):
    if not is_grad_enabled():
        return (apply(_mish_bwd, g, x),)
    s, t = x.sigmoid(), _softplus_t(x)
    return (g * (t + x * s * (1 - t * t)),)


_mish_bwd = Op("mish_backward", _mish_bwd_fwd, _mish_bwd_vjp, cost=_numel)
_mish = Op("mish", _mish_fwd, _mish_vjp, promote="float", saves=ALL, cost=_numel,
           onnx=lambda g, x: g.op("Mul", x, g.op("Tanh", g.op("Softplus", x))))


def mish(x: Tensor) -> Tensor:
    return apply(_mish, x)


# ---------------------------------------------------------------- log_sigmoid
# ATen's kernel: min(x, 0) - log1p(z), z = exp(-|x|), keeping z in the input's dtype as a buffer
# for the backward, (1 - z/(1+z)) g below 0 and (z/(1+z)) g above (a half input's z rounded there).
def _half(xp, x) -> bool:
    return x.dtype is BFLOAT16_NP or x.dtype == xp.float16


def _dense_map(xp, loop, *arrays):
    """``loop(*flat arrays, flat out)`` over C-contiguous copies (ATen reads ``input.contiguous()``; an
    elementwise loop with no scalar tail gives the same floats in any order), split across threads."""
    flats = [xp.ascontiguousarray(a).reshape(-1) for a in arrays]
    out = xp.empty(arrays[-1].shape, xp.float32)
    kernels.parallel(loop, len(flats) + 1, *flats, out.reshape(-1))
    return out


def _log_sigmoid_fwd(xp, x):
    if _aten_loop(xp, x):
        return _dense_map(xp, kernels.loops("pointwise").log_sigmoid, x)
    a = x.astype(xp.float32) if _half(xp, x) else x
    out = xp.minimum(a, 0) - xp.log1p(xp.exp(-xp.abs(a)))
    return out.astype(x.dtype) if _half(xp, x) else out


def _log_sigmoid_bwd_fwd(xp, g, x):
    if _aten_loop(xp, g, x):
        return _dense_map(xp, kernels.loops("pointwise").log_sigmoid_backward, g, x)
    half = _half(xp, x)
    a, gf = (x.astype(xp.float32), g.astype(xp.float32)) if half else (x, g)
    z = xp.exp(-xp.abs(a))
    if half:
        z = z.astype(x.dtype).astype(xp.float32)
    one = a.dtype.type(1)
    q = z / (one + z)
    res = xp.where(a < 0, one - q, q) * gf
    return res.astype(x.dtype) if half else res


def _log_sigmoid_bwd_vjp(gg, out, g, x):
    s = x.sigmoid()
    return apply(_log_sigmoid_bwd, gg, x), gg * g * (s - 1) * s


_log_sigmoid_bwd = Op("log_sigmoid_backward", _log_sigmoid_bwd_fwd, _log_sigmoid_bwd_vjp, cost=_numel)
_log_sigmoid = Op("log_sigmoid", _log_sigmoid_fwd, lambda g, out, x: (apply(_log_sigmoid_bwd, g, x),),
                  promote="float", saves=ALL, cost=_numel,
                  onnx=lambda g, x: g.op("Neg", g.op("Softplus", g.op("Neg", x))))


def log_sigmoid(x: Tensor) -> Tensor:
    return apply(_log_sigmoid, x)


# ---------------------------------------------------------------- gelu
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_K = math.sqrt(2.0 / math.pi)
_C = 0.044715


def _gelu_fwd(xp, x, *, approximate):
    if x.dtype in REDUCED_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_opmath(_gelu_fwd, xp, x, approximate=approximate)
    if _aten_loop(xp, x):
        loops = kernels.loops("pointwise")
        tanh, mode = approximate == "tanh", loops.gelu_mode(x)
        return loops.aten_map(loops.gelu if tanh or not mode else loops.gelu_onednn, (x,), (tanh, mode))
    if approximate == "tanh":
        inner = xp.tanh((x + x * x * x * x.dtype.type(_C)) * x.dtype.type(_K))
        return x * 0.5 * (inner + 1.0)
    erf = _backend.special(xp).erf(x * x.dtype.type(_SQRT_HALF)).astype(x.dtype, copy=False)
    return x * 0.5 * (erf + 1.0)


def _gelu_grad(xp, x, approximate):
    """gelu'(x) as an array, from ``x`` alone (PyTorch's gelu saves only its input)."""
    if approximate == "tanh":
        t = xp.tanh((x + x * x * x * x.dtype.type(_C)) * x.dtype.type(_K))
        du = x.dtype.type(_K) * (1.0 + x * x * x.dtype.type(3 * _C))
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
    cdf = 0.5 * (_backend.special(xp).erf(x * x.dtype.type(_SQRT_HALF)).astype(x.dtype, copy=False) + 1.0)
    return cdf + x * xp.exp(-0.5 * x * x) * x.dtype.type(_INV_SQRT_2PI)


def _gelu_second(x: Tensor, approximate: str) -> Tensor:
    """gelu''(x) in Tensor ops: phi(x) (2 - x^2), or for tanh (1 - t^2)(u' - x t u'^2 + 3 k c x^2)."""
    if approximate == "tanh":
        t = ((x + x * x * x * _C) * _K).tanh()
        du = (x * x * (3 * _C) + 1.0) * _K
        return (1.0 - t * t) * (du - x * t * du * du + x * x * (3 * _K * _C))
    return (x * x * -0.5).exp() * _INV_SQRT_2PI * (2.0 - x * x)


def _gelu_bwd_vjp(v, out, g, x, *, approximate):
    gg = apply(_gelu_bwd, v, x, approximate=approximate) if g.requires_grad else None
    gx = v * g * _gelu_second(x, approximate) if x.requires_grad else None
    return gg, gx


_gelu = Op("gelu", _gelu_fwd,
           lambda g, out, x, *, approximate: (apply(_gelu_bwd, g, x, approximate=approximate),),
           promote="float", cost=_numel, onnx=_onnx_gelu)


def _gelu_bwd_fwd(xp, g, x, *, approximate):
    if x.dtype is BFLOAT16_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_float32(_gelu_bwd_fwd, xp, g, x, approximate=approximate)
    if _aten_loop(xp, g, x):
        loops = kernels.loops("pointwise")
        tanh, mode = approximate == "tanh", loops.gelu_mode(x, g)
        return loops.aten_map(loops.gelu_backward if tanh or not mode else loops.gelu_backward_onednn, (g, x),
                              (tanh, mode))
    return g * _gelu_grad(xp, x, approximate)


_gelu_bwd = Op("gelu_backward", _gelu_bwd_fwd, _gelu_bwd_vjp, cost=_numel)


def gelu(x: Tensor, approximate: str) -> Tensor:
    return apply(_gelu, x, approximate=approximate)


# ---------------------------------------------------------------- nll_loss and cross_entropy
# Both are ``-sum(a * logp) scaled``, with ``a[n, c] = keep_n ((1 - ls) w[t_n] [c == t_n] + ls/C w[c])``
# per sample (ls: label smoothing; mean divides by sum(keep_n w[t_n])). nll_loss is linear in its
# input, so its vjp is its adjoint ``nll_loss_backward`` (g -> -a * scale) and that one's vjp is
# nll_loss again. cross_entropy is nll_loss of log_softmax; its fused backward is ``p A - a``
# scaled (p = softmax, A = sum_c a), and that op's vjp runs the two parts' vjps in turn.
def _class_last(xp, x, cdim):
    return x if cdim == x.ndim - 1 else xp.moveaxis(x, cdim, -1)


def _targets(xp, t, w, *, n_classes, ignore_index, check, dtype):
    """Per sample (``t`` flattened): the class to read (0 where ignored or bad), ``wt = keep w[t]``
    (the mean's denominator sums it), ``keep`` and ``bad`` (a target outside the classes). Checked,
    a bad target raises IndexError; unchecked (meta, capture) the callers make its loss nan and
    give it no gradient."""
    t = t.reshape(-1)       # a 0-d target's elementwise results would be scalars, not device arrays
    keep = t != ignore_index
    safe = xp.where(keep, t, 0)
    bad = (safe < 0) | (safe >= n_classes)
    if check and has_data(xp) and bool(bad.any()):
        raise IndexError(f"Target {int(safe[bad].ravel()[0])} is out of bounds.")
    safe = xp.where(bad, 0, safe)
    return safe, (keep.astype(dtype) if w is None else w[safe] * keep), keep, bad


def _coeffs(xp, t, w, *, n_classes, ignore_index, label_smoothing, check, dtype, bad_is_nan=True):
    """``a`` over ``(*t.shape, C)`` with label smoothing, and the mean's denominator ``sum(keep w[t])``;
    unchecked, a bad target's coefficients are nan in the forward (its loss reads nan)."""
    safe, wt, keep, bad = _targets(xp, t, w, n_classes=n_classes, ignore_index=ignore_index, check=check,
                                   dtype=dtype)
    a = xp.zeros((safe.shape[0], n_classes), dtype)
    xp.put_along_axis(a, safe[..., None], wt[..., None] * dtype.type(1.0 - label_smoothing), axis=-1)
    row = dtype.type(label_smoothing / n_classes) * (xp.ones(n_classes, dtype) if w is None else w)
    a += row * keep[..., None].astype(dtype)
    if not check and bad_is_nan:
        a = xp.where(bad[..., None], dtype.type("nan"), a)
    return a.reshape(tuple(t.shape) + (n_classes,)), wt.sum()


def _reduce_loss(xp, loss, denom, reduction):
    if reduction == "none":
        return loss
    total = loss.sum()
    return xp.asarray(total / denom if reduction == "mean" else total, dtype=loss.dtype)


def _reduce_class_loss(xp, loss, t, wt, weighted, reduction, p):
    """The reduction of per-sample class losses (``wt``: each sample's class weight, 0 where
    ignored): on cpu float32 without label smoothing ATen's cascade sums (``kernels/cascade.py``),
    so a printed mean loss rounds as PyTorch's; numpy's sums otherwise."""
    if reduction == "none" or p["label_smoothing"] or not t.size or not kernels.use(xp, loss, wt):
        return _reduce_loss(xp, loss, wt.sum(), reduction)
    flat = xp.ascontiguousarray(t.reshape(-1))
    total, weight = kernels.loops("cascade").nll_sums(loss.reshape(-1), flat, wt.reshape(-1), p["ignore_index"],
                                                       weighted)
    total = loss.dtype.type(total)
    return xp.asarray(total / loss.dtype.type(weight) if reduction == "mean" else total, dtype=loss.dtype)


def _weight_total(xp, t, wt, p):
    """A mean class loss's denominator as its forward sums it (``_reduce_class_loss``): ATen's cascade on cpu
    float32, whose total its backward divides by; numpy's sum otherwise."""
    if not t.size or not kernels.use(xp, wt):
        return wt.sum()
    flat, wt = xp.ascontiguousarray(t.reshape(-1)), xp.ascontiguousarray(wt.reshape(-1))
    return wt.dtype.type(kernels.loops("cascade").nll_sums(wt, flat, wt, p["ignore_index"], True)[1])


def _nll_fwd(xp, logp, t, *w, cdim, reduction, **p):
    """Without label smoothing a gather of each sample's target entry, else ``-sum_c a logp``."""
    if logp.dtype is BFLOAT16_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_float32(_nll_fwd, xp, logp, t, *w, cdim=cdim, reduction=reduction, **p)
    if (reduction != "none" and p["check"] and not p["label_smoothing"] and logp.ndim == 2 and cdim == 1
            and t.ndim == 1 and t.size and t.dtype.kind in "iu" and kernels.use(xp, logp, *w)):
        # a mean or summed loss of (N, C) float32: one loop, gather and cascade (10.8 -> 6.4 us at 64 x 10);
        # without class weights a row stands in for them (never read)
        total, weight, bad = kernels.loops("cascade").nll_reduced(logp, xp.ascontiguousarray(t),
                                                                 w[0] if w else logp[0], p["ignore_index"], bool(w))
        if bad < 0:
            f = logp.dtype.type
            return xp.asarray(f(total) / f(weight) if reduction == "mean" else f(total), dtype=logp.dtype)
    looped = None if p["label_smoothing"] else _ce_loop_inputs(xp, logp, t, w, cdim, p)
    if looped is not None:   # the plain (N, C) float32 case: one gather loop
        t, _, wt = looped
        loss = xp.empty(t.shape[0], logp.dtype)
        kernels.loops("rowwise").nll_loss(logp, t, wt, loss)
        return _reduce_class_loss(xp, loss, t, wt, bool(w), reduction, p)
    lp = _class_last(xp, logp, cdim)
    if p["label_smoothing"]:
        a, denom = _coeffs(xp, t, w[0] if w else None, n_classes=logp.shape[cdim], dtype=logp.dtype, **p)
        # a class with coefficient 0 adds nothing, even where logp is -inf (PyTorch gathers, 0 * -inf is nan)
        loss = -xp.where(a != 0, lp * a, 0).sum(axis=-1)
    else:
        safe, wt, _, bad = _targets(xp, t, w[0] if w else None, n_classes=logp.shape[cdim],
                                    ignore_index=p["ignore_index"], check=p["check"], dtype=logp.dtype)
        denom, wt = wt.sum(), wt.reshape(t.shape)
        picked = xp.take_along_axis(lp, safe.reshape(tuple(t.shape) + (1,)), axis=-1)[..., 0]
        loss = -xp.where(wt != 0, picked * wt, 0)   # an ignored -inf entry adds nothing
        if not p["check"]:
            loss = xp.where(bad.reshape(t.shape), logp.dtype.type("nan"), loss)
    loss += 0.0     # an ignored sample's -0.0 reads as PyTorch's 0.0
    if p["label_smoothing"]:
        return _reduce_loss(xp, loss, denom, reduction)
    return _reduce_class_loss(xp, loss, t, wt, bool(w), reduction, p)


def _nll_bwd_fwd(xp, g, t, *w, cdim, n_classes, reduction, **p):
    """``-a g`` scaled; without label smoothing written at each kept sample's target only (every
    sample ignored, 0/0, leaves zeros, as in PyTorch; an unchecked bad target gets no gradient)."""
    if p["label_smoothing"]:
        a, denom = _coeffs(xp, t, w[0] if w else None, n_classes=n_classes, dtype=g.dtype, bad_is_nan=False, **p)
        s = g / denom if reduction == "mean" else g
        res = xp.where(a != 0, a * -(s[..., None] if reduction == "none" else s), 0)
        return xp.ascontiguousarray(xp.moveaxis(res, -1, cdim))
    looped = (_loop_targets(xp, t, w, n_classes, g.dtype, p) if cdim == 1 and t.ndim == 1 and t.size
              and t.dtype.kind in "iu" and kernels.use(xp, g, *w) else None)
    if looped is not None:   # the plain (N, C) float32 case: one scatter loop into zeros
        t, _, wt = looped
        gs = (xp.ascontiguousarray(g, g.dtype) if reduction == "none" else
              xp.full(t.shape[0], g / wt.sum() if reduction == "mean" else g, g.dtype))
        res = xp.zeros((t.shape[0], n_classes), g.dtype)
        kernels.loops("rowwise").nll_loss_backward(t, wt, gs, res, p["ignore_index"])
        return res
    safe, wt, keep, bad = _targets(xp, t, w[0] if w else None, n_classes=n_classes, ignore_index=p["ignore_index"],
                                   check=p["check"], dtype=g.dtype)
    s = g.reshape(-1) if reduction == "none" else g / _weight_total(xp, t, wt, p) if reduction == "mean" else g
    vals = xp.where(keep & ~bad, -(wt * s), 0)
    shape = tuple(t.shape[:cdim]) + (n_classes,) + tuple(t.shape[cdim:])
    res = xp.zeros(shape, g.dtype)
    col = tuple(t.shape) + (1,)
    xp.put_along_axis(_class_last(xp, res, cdim), safe.reshape(col), vals.reshape(col), axis=-1)
    return res


def _nll_vjp(g, out, logp, t, *w, cdim, **p):
    return (apply(_nll_bwd, g, t, *w, cdim=cdim, n_classes=logp.shape[cdim], **p), None) + (None,) * len(w)


def _nll_bwd_vjp(v, out, g, t, *w, cdim, n_classes, **p):
    return (apply(_nll, v, t, *w, cdim=cdim, **p), None) + (None,) * len(w)


def _plain_rows(xp, x, t, w, cdim, p):
    """``arange(N)`` when cross-entropy is the plain (N, C) case: no class weights, no label
    smoothing, every target a valid class (none ignored); else None, and the general formulas run
    (they also raise on a bad target). Then the loss is a gather and its gradient ``softmax - onehot``
    in one pass, with no dense (N, C) coefficient array."""
    if w or p["label_smoothing"] or x.ndim != 2 or cdim != 1 or t.ndim != 1 or not p["check"] or not t.size:
        return None
    if t.dtype.kind not in "iu" or not has_data(xp):
        return None
    if bool((t == p["ignore_index"]).any()) or int(t.min()) < 0 or int(t.max()) >= x.shape[1]:
        return None
    return xp.arange(t.shape[0])


def _ce_loop_inputs(xp, x, t, w, cdim, p):
    """``(class weights, per-row target weights)`` for the fused loops (``kernels.rowwise``): (N, C)
    logits and (N,) targets they take, every target a class or ``ignore_index``; else None, and the
    formulas below run (they also raise on a bad target)."""
    if x.ndim != 2 or cdim != 1 or t.ndim != 1 or not t.size or t.dtype.kind not in "iu" or not kernels.use(xp, x, *w):
        return None
    return _loop_targets(xp, t, w, x.shape[1], x.dtype, p)


# (classes, dtype) -> the ones that stand in for a loss's absent class weights in the fused loops, made once
# (``np.ones`` was 0.6 us of a 64 x 10 cross-entropy's ~8, forward and backward); the loops only read it
_NO_WEIGHTS: dict = {}


def _loop_targets(xp, t, w, n_classes, dtype, p):
    """``_ce_loop_inputs`` once the shapes and dtypes are known to fit: None at a bad target."""
    if w:
        wc = w[0]
    else:
        wc = _NO_WEIGHTS.get((n_classes, dtype))
        if wc is None:
            wc = _NO_WEIGHTS[(n_classes, dtype)] = xp.ones(n_classes, dtype)
    wt = xp.empty(t.shape[0], dtype)
    t = xp.ascontiguousarray(t)
    return (t, wc, wt) if kernels.loops("rowwise").target_weights(t, wc, p["ignore_index"], wt) else None


def _smoothing_grads(xp, g, t, wc, w, p):
    """Per row, the gradient PyTorch's label-smoothing term sends each class's log-probability (before its
    class weight and sign): ``g ls/C``, over the kept rows' count or their targets' summed weights for a mean
    (``ret * (ls / C)``, ``smooth_loss.sum() / denominator``), 0 for an ignored row (``masked_fill``)."""
    keep = t != p["ignore_index"]
    s = g * g.dtype.type(p["label_smoothing"] / wc.shape[0])
    if p["reduction"] == "mean":
        denom = array_sum(xp, w[0][t[keep]], None) if w else g.dtype.type(int(keep.sum()))
        s = s / denom
    return xp.where(keep, s, g.dtype.type(0)).astype(g.dtype, copy=False)


def _ce_loop_params(x, wc, p) -> tuple:
    smooth = x.dtype.type(p["label_smoothing"])
    return p["ignore_index"], smooth, wc.sum(dtype=x.dtype) if smooth else x.dtype.type(0)


def _ce_fwd(xp, x, t, *w, cdim, **p):
    return _ce_forward(xp, x, t, w, cdim, p)[0]


def _ce_fwd_saving(xp, x, t, *w, cdim, **p):
    """The loss and, where the loop runs, its rows' logs of their exps' sums for the backward (an empty
    array elsewhere: that backward recomputes them)."""
    loss, lse = _ce_forward(xp, x, t, w, cdim, p)
    return loss, xp.empty((0,), x.dtype) if lse is None else lse


def _ce_forward(xp, x, t, w, cdim, p):
    """``(loss, the rows' log-sum-exps or None)``."""
    if x.dtype is BFLOAT16_NP:   # PyTorch's: log_softmax rounded to bfloat16, then nll_loss in float32
        return _nll_fwd(xp, _log_softmax_fwd(xp, x, dim=cdim), t, *w, cdim=cdim, **p), None
    looped = _ce_loop_inputs(xp, x, t, w, cdim, p)
    if looped is not None:
        t, wc, wt = looped
        loss, lse = xp.empty(t.shape[0], x.dtype), xp.empty(t.shape[0], x.dtype)
        kernels.parallel(kernels.loops("rowwise").cross_entropy, 5, x, t, wt, loss, lse, wc,
                         *_ce_loop_params(x, wc, p), kernels.loops("pointwise").aten_lanes())
        return _reduce_class_loss(xp, loss, t, wt, bool(w), p["reduction"], p), lse
    logp = _log_softmax_fwd(xp, x, dim=cdim)
    rows = _plain_rows(xp, x, t, w, cdim, p)
    if rows is None:
        return _nll_fwd(xp, logp, t, *w, cdim=cdim, **p), None
    return _reduce_class_loss(xp, -logp[rows, t], t, xp.ones(t.shape[0], logp.dtype), False, p["reduction"], p), None


def _ce_bwd_fwd(xp, g, x, t, *w, cdim, saved=False, **p):
    """With ``saved``, ``w`` ends with the forward's rows' log-sum-exps (empty where it did not keep them),
    which the loop reads instead of recomputing."""
    lse = None
    if saved:
        *w, lse = w
        lse = lse if lse.size else None
    if x.dtype is BFLOAT16_NP:   # PyTorch computes reduced precision in float32, rounded once
        return in_float32(_ce_bwd_fwd, xp, g, x, t, *w, cdim=cdim, **p)
    looped = _ce_loop_inputs(xp, x, t, w, cdim, p)
    reduction = p["reduction"]
    if looped is not None:
        t, wc, wt = looped
        smooth = p["label_smoothing"]
        gn = g * x.dtype.type(1.0 - smooth) if smooth else g   # the nll term's gradient, as ``(1 - ls) * nll``'s
        total = (_weight_total(xp, t, wt, p) if w else xp.add.reduce(wt)) if reduction == "mean" else None
        gs = (xp.ascontiguousarray(gn, x.dtype) if reduction == "none" else   # (class weights: nll_loss's cascade
              xp.full(t.shape[0], gn / total if reduction == "mean" else gn, x.dtype))   # total, as its forward's)
        out = xp.empty_like(x)
        known = lse is not None
        kernels.parallel(kernels.loops("rowwise").cross_entropy_backward, 7, x, t, wt, gs, out,
                         lse if known else xp.empty(t.shape[0], x.dtype),
                         _smoothing_grads(xp, g, t, wc, w, p) if smooth else gs, wc, p["ignore_index"],
                         x.dtype.type(smooth), known, kernels.loops("pointwise").aten_lanes())
        return out
    rows = _plain_rows(xp, x, t, w, cdim, p)
    if rows is not None:
        out = _softmax_fwd(xp, x, dim=1)
        out[rows, t] -= 1
        out *= g[:, None] if reduction == "none" else g / x.dtype.type(t.shape[0]) if reduction == "mean" else g
        return out
    u = _nll_bwd_fwd(xp, g, t, *w, cdim=cdim, n_classes=x.shape[cdim], **p)
    return _log_softmax_bwd_fwd(xp, u, _log_softmax_fwd(xp, x, dim=cdim), dim=cdim)


def _ce_bwd_vjp(v, out, g, x, t, *w, cdim, **p):
    """H(g, x) = LSB(u(g), y(x)) with u = nll_loss_backward, y = log_softmax, LSB its backward."""
    u = apply(_nll_bwd, g, t, *w, cdim=cdim, n_classes=x.shape[cdim], **p)
    y = apply(_log_softmax, x, dim=cdim)
    e = y.exp()
    gg = gx = None
    if g.requires_grad:
        gg = apply(_nll, v - (v * e).sum(cdim, keepdim=True), t, *w, cdim=cdim, **p)
    if x.requires_grad:
        gx = apply(_log_softmax_bwd, -(v * e) * u.sum(cdim, keepdim=True), y, dim=cdim)
    return (gg, gx, None) + (None,) * len(w)


def _ce_vjp(g, out, x, t, *w, **p):
    return (apply(_ce_bwd, g, x, t, *w, **p), None) + (None,) * len(w)


def _ce_passthrough(xp, x, t, *rest, cdim, **p):
    """The differentiable op's forward: the loss ``cross_entropy_forward`` made."""
    return rest[-2]


def _ce_saved_vjp(g, out, x, t, *rest, **p):
    """The pass-through op's vjp: ``rest`` ends with the raw loss and the forward's rows' log-sum-exps,
    which the plain backward's loop reads instead of recomputing (create_graph: ``_ce_vjp``'s ops)."""
    *w, _, lse = rest
    if is_grad_enabled():
        return _ce_vjp(g, out, x, t, *w, **p) + (None, None)
    return (apply(_ce_bwd, g, x, t, *w, lse, saved=True, **p), None) + (None,) * (len(w) + 2)


_CE_ATEN = "cross_entropy_loss(log_softmax(_log_softmax), nll_loss_nd(nll_loss(nll_loss_forward)))"
_nll = Op("nll_loss", _nll_fwd, _nll_vjp, saves=NONE, cost=lambda s, out: math.prod(s[1]),
          aten="nll_loss_nd(nll_loss(nll_loss_forward))")
_nll_bwd = Op("nll_loss_backward", _nll_bwd_fwd, _nll_bwd_vjp, saves=NONE, cost=_numel)
_ce = Op("cross_entropy", _ce_fwd, _ce_vjp, cost=lambda s, out: 4 * math.prod(s[0]),
         backward_name="NllLossBackward0",   # PyTorch's loss node: nll_loss of log_softmax
         aten=_CE_ATEN)
_ce_saving = Op("cross_entropy_forward", _ce_fwd_saving, None, n_extra=1, aten=_CE_ATEN)
_ce_saved = Op("cross_entropy_saved_lse", _ce_passthrough, _ce_saved_vjp, n_kept=2, backward_name="NllLossBackward0")
_ce_bwd = Op("cross_entropy_backward", _ce_bwd_fwd, _ce_bwd_vjp, cost=lambda s, out: 4 * math.prod(out),
             aten="nll_loss_backward, _log_softmax_backward_data")


def nll_loss(logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
             check: bool) -> Tensor:
    """Class-index NLL with ``logp``'s class dim at 1 (0 when 1-d); ``check`` raises on a bad target."""
    return apply(_nll, logp, target, *((weight,) if weight is not None else ()), cdim=int(logp.ndim >= 2),
                 reduction=reduction, ignore_index=ignore_index, label_smoothing=0.0, check=check)


def cross_entropy(x: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
                  label_smoothing: float, check: bool) -> Tensor:
    """log_softmax and class-index NLL (with label smoothing) as one op. Where a gradient will be taken of
    float32 logits, ``cross_entropy_forward`` keeps the rows' log-sum-exps and ``cross_entropy_saved_lse``
    passes its loss through (as layer norm keeps its statistics): the backward then exps each logit once."""
    w = (weight,) if weight is not None else ()
    params = dict(cdim=int(x.ndim >= 2), reduction=reduction, ignore_index=ignore_index,
                  label_smoothing=float(label_smoothing), check=check)
    if x.dtype is _float32 and keeps_forward_state(x):
        loss, lse = apply(_ce_saving, x, target, *w, **params)
        return apply(_ce_saved, x, target, *w, loss, lse, **params)
    return apply(_ce, x, target, *w, **params)
