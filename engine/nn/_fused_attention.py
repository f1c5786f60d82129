"""``scaled_dot_product_attention`` as one op (the composite was ~10 forward dispatches and as
many backward nodes), named as users type it so the tape view's search finds it.

Inputs are ``q, k, v`` and, when present, the mask (bool: True attends; float: added) and the
dropout keep-mask (already scaled by 1/(1-p), drawn by a random op outside). While nobody
watches and a gradient will be taken, the forward is two ops, as ``lstm`` is:
``scaled_dot_product_attention_forward`` (not differentiable) returns the output and the weights,
and ``scaled_dot_product_attention_saved_weights`` passes the output through and keeps the weights
for its plain backward (which then skips q kᵀ and the softmax: ~2% of a GPT step). Otherwise (a
tape, profiler, autocast or tracer watching, no gradient, bfloat16) it is the one op
``scaled_dot_product_attention``, whose backward recomputes the weights. On cpu
float32 without a mask array, the weights are one fused loop over the scores (scale, causal
cut, softmax; engine/kernels), and so is the softmax backward. Plain
backward runs one fused op that returns the three gradients (two as extra outputs); under
``create_graph`` the vjp is written in Tensor ops, so double backward stays exact.
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..kernels import gemm
from ..kernels.gemm import attention as _one_region, attention_grad as _one_region_grad
from ..base import dtype as _dtype
from ..base.grad_mode import is_grad_enabled
from ..core import creation
from ..core.dispatch import apply, keeps_forward_state
from ..core.registry import Op
from ..core.tensor import Tensor, sum_to
from ._fused import _softmax, _softmax_bwd

__all__ = ["attention"]


# ---------------------------------------------------------------- ONNX lowering (``Op.onnx``, engine/onnx)
def _onnx_attention(g, *args, scale, causal, masked, dropped):
    """The forward above in ONNX ops; masked rows with nothing to attend give zeros, as here."""
    q, k, v, mask, _ = _split(args, masked, dropped)
    n = g.rank(k)
    s = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=list(range(n - 2)) + [n - 1, n - 2])), scale)
    if causal:
        allowed = g.op("Trilu", g.full([g.shape(q)[-2], g.shape(k)[-2]], 1, "int64"), upper=0)
        s = g.op("Where", g.cast(allowed, "bool"), s, float("-inf"))
    elif masked == "bool":
        s = g.op("Where", mask, s, float("-inf"))
    elif masked == "float":
        s = g.op("Add", s, mask)
    if not masked:
        return g.op("MatMul", g.op("Softmax", s, axis=-1), v)
    m = g.reduce("ReduceMax", s, [-1], True)
    m = g.op("Where", g.op("Equal", m, float("-inf")), 0.0, m)
    p = g.op("Exp", g.op("Sub", s, m))
    z = g.reduce("ReduceSum", p, [-1], True)
    return g.op("MatMul", g.op("Div", p, g.op("Where", g.op("Equal", z, 0.0), 1.0, z)), v)


def _weights(xp, q, k, mask, *, scale, causal, masked):
    """softmax(q kᵀ scale + mask) as an array; rows with nothing to attend give zeros when masked."""
    s = gemm(xp, q, xp.swapaxes(k, -1, -2))
    if not masked and s.size and kernels.use(xp, s):
        kernels.parallel(kernels.loops("rowwise").attention_softmax, 1, s.reshape(-1, s.shape[-1]), s.shape[-2],
                         s.dtype.type(scale), causal, align=s.shape[-2])
        return s
    if (masked and s.size and kernels.use(xp, s) and mask.dtype in (s.dtype, np.bool_)
            and _masked_softmax(s, mask, scale)):
        return s
    s *= s.dtype.type(scale)
    ninf = s.dtype.type("-inf")
    if causal:
        L, S = s.shape[-2:]
        s = xp.where(xp.arange(L)[:, None] >= xp.arange(S)[None, :], s, ninf)
    elif masked == "bool":
        s = xp.where(mask, s, ninf)
    elif masked == "float":
        s = s + mask
    m = s.max(axis=-1, keepdims=True)
    if masked:
        m = xp.where(m == ninf, 0, m)
    p = xp.exp(s - m)
    z = p.sum(axis=-1, keepdims=True)
    if masked:
        z = xp.where(z == 0, 1, z)
    p /= z
    return p


def _masked_softmax(s, mask, scale: float) -> bool:
    """``_weights``' softmax of the float32 scores ``s`` with a mask array, in place, as one loop over
    the heads (``rowwise.attention_softmax_masked``) reading the mask's own rows (numpy's six passes,
    ``s + mask`` among them, took 3x torch's time on a Llama step's small heads); a bool mask becomes
    ATen's -inf bias first (its size, not the scores'). False where the scores have more than four
    dims (then nothing is done)."""
    if s.ndim > 4:
        return False
    L, S = s.shape[-2:]
    a, b = (1,) * (4 - s.ndim) + s.shape[:-2]
    if mask.dtype == np.bool_:
        mask = np.where(mask, s.dtype.type(0), s.dtype.type("-inf"))
    if mask.shape[-1] != S:   # shared along the keys: the rows made whole
        mask = np.broadcast_to(mask, mask.shape[:-1] + (S,))
    mask = np.ascontiguousarray(mask).reshape((1,) * (4 - mask.ndim) + mask.shape)
    kernels.parallel(kernels.loops("rowwise").attention_softmax_masked, 2, s.reshape(-1, L, S), np.arange(a * b), b,
                     mask, s.dtype.type(scale))
    return True


def _split(args, masked, dropped):
    q, k, v = args[:3]
    rest = list(args[3:])
    mask = rest.pop(0) if masked else None
    keep = rest.pop(0) if dropped else None
    return q, k, v, mask, keep


def _laid_out_as_query(xp, q, out, dropped: bool):
    """PyTorch's CPU flash kernel (4-d, no dropout) writes its output in the query's order of (length, heads):
    from a query that is a (batch, length, heads, dim) tensor transposed, an output laid out the same way, so
    ``y.transpose(1, 2).view(b, l, h * d)`` works as it does there."""
    if _as_query(out.shape, q, dropped):
        return xp.ascontiguousarray(out.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    return out


def _as_query(shape: tuple, q, dropped: bool) -> bool:
    return len(shape) == 4 and not dropped and q.strides[1] < q.strides[2]


def _fused(xp, q, k, v, *, scale, causal, masked, dropped):
    """``(output, weights)`` from one region of heads where MKL runs the products (float32, no mask or
    dropout; ``kernels.gemm.attention``: the floats of ``_weights`` then ``_attend``), else None."""
    if masked or dropped or xp is not np or q.dtype != np.float32 or not kernels.enabled():
        return None
    shape = q.shape[:-1] + v.shape[-1:]
    if _as_query(shape, q, dropped):
        out = np.empty((shape[0], shape[2], shape[1], shape[3]), np.float32).transpose(0, 2, 1, 3)
    else:
        out = np.empty(shape, np.float32)
    p = _one_region(xp, q, k, v, scale, causal, out)
    return None if p is None else (out, p)


def _attend(xp, q, p, v, dropped: bool):
    """``p @ v``, written straight into ``_laid_out_as_query``'s layout where that applies (the
    products step through it by strides: no copy of the output afterwards)."""
    shape = np.broadcast_shapes(p.shape[:-2], v.shape[:-2]) + (p.shape[-2], v.shape[-1])
    if not _as_query(shape, q, dropped) or xp is not np:
        return _laid_out_as_query(xp, q, gemm(xp, p, v), dropped)
    out = np.empty((shape[0], shape[2], shape[1], shape[3]), np.result_type(p, v)).transpose(0, 2, 1, 3)
    return gemm(xp, p, v, out=out)


_REDUCED = (_dtype.BFLOAT16_NP, np.dtype(np.float16))


def _flash_reduced(xp, q, k, v, mask, *, scale, causal, masked, lse=False):
    """PyTorch's CPU flash kernel for bfloat16 and half (4-d, no dropout): float32 scores and softmax
    statistics over key blocks of 512 (one block below 512 keys), each block's unnormalised weights
    rounded to the input dtype before their GEMM with ``v`` (float32 accumulation, the running sum
    and output rescaled as the maximum grows), the output times the row sum's reciprocal, rounded once.
    Bit for bit torch's below 512 keys on CPUs without AVX512-BF16; on one with it (session 23's host)
    3-9% of outputs are one bfloat16 ulp off torch's, whatever order the float32 sums take (not found
    yet); from 512 keys on, the GEMMs' float32 sums differ in order. With ``lse``, also the rows'
    float32 log-sum-exp (0 for a row with nothing to attend), which the backward reads."""
    dt, f32 = q.dtype, np.float32
    q, k, v = q.astype(f32), k.astype(f32), v.astype(f32)
    if masked == "float":
        mask = mask.astype(f32)
    L, S = q.shape[-2], k.shape[-2]
    split = 512 if S >= 512 else max(S, 1)
    ninf = f32("-inf")
    top = acc = total = None
    for j in range(0, S, split):
        kj, vj = k[..., j:j + split, :], v[..., j:j + split, :]
        s = gemm(xp, q, xp.swapaxes(kj, -1, -2)) * f32(scale)
        if causal:
            s = xp.where(xp.arange(L)[:, None] >= xp.arange(j, j + kj.shape[-2])[None, :], s, ninf)
        elif masked == "bool":
            s = xp.where(mask[..., j:j + split], s, ninf)
        elif masked == "float":
            s = s + mask[..., j:j + split]
        new = s.max(axis=-1, keepdims=True) if top is None else xp.maximum(top, s.max(axis=-1, keepdims=True))
        shift = xp.where(new == ninf, f32(0), new)
        p = xp.exp(s - shift)
        part = gemm(xp, p.astype(dt).astype(f32), vj)
        if top is None:
            total, acc = p.sum(axis=-1, keepdims=True), part
        else:
            grow = xp.exp(top - shift)
            total = grow * total + p.sum(axis=-1, keepdims=True)
            acc = acc * grow + part
        top = new
    if acc is None:
        out = xp.zeros(q.shape[:-1] + v.shape[-1:], dt)
        return (out, xp.zeros(q.shape[:-1] + (1,), f32)) if lse else out
    total = xp.where(total == 0, f32(1), total)
    out = (acc * (f32(1) / total)).astype(dt)
    return (out, xp.where(top == ninf, f32(0), top) + xp.log(total)) if lse else out


def _rounded(x, dt):
    """The float32 array ``x`` rounded to ``dt`` (bfloat16 or half), in place (``x`` is a C-contiguous
    temporary); bfloat16 by rounding the bit pattern to nearest even (ml_dtypes' casts took most of a
    long sequence's backward)."""
    if dt is not _dtype.BFLOAT16_NP:
        x[...] = x.astype(dt)
        return x
    u = x.view(np.uint32)
    half = u >> np.uint32(16)
    half &= np.uint32(1)
    half += np.uint32(0x7FFF)
    u += half
    u &= np.uint32(0xFFFF0000)
    return x


def _flash_reduced_bwd(xp, g, q, k, v, mask, *, scale, causal, masked):
    """PyTorch's CPU flash backward for bfloat16 and half (4-d, no dropout): the float32 weights rebuilt
    from the forward's log-sum-exp, the score gradient ``w * (g vᵀ - rowsum(g * out))`` from the
    rounded output, both rounded to the input dtype before their GEMMs; dq gathers over blocks of 512
    keys and dk, dv over blocks of queries (32 rows below 192 queries, 64 below 768, else 256) in the
    input dtype (float32 sums, rounded after each block). Also the float32 score gradient."""
    dt, f32 = q.dtype, np.float32
    out, lse = _flash_reduced(xp, q, k, v, mask, scale=scale, causal=causal, masked=masked, lse=True)
    q, k, v, g = q.astype(f32), k.astype(f32), v.astype(f32), g.astype(f32)
    L, S = q.shape[-2], k.shape[-2]
    w = gemm(xp, q, xp.swapaxes(k, -1, -2))
    w *= f32(scale)
    if masked == "float":
        w += mask.astype(f32)
    elif masked == "bool":
        w = xp.where(mask, w, f32("-inf"))
    w -= lse
    with np.errstate(over="ignore"):   # PyTorch zeroes the causal cut after the exponential
        xp.exp(w, out=w)
    if causal:
        w *= xp.arange(L)[:, None] >= xp.arange(S)[None, :]
    ds = gemm(xp, g, xp.swapaxes(v, -1, -2))
    ds -= (g * out.astype(f32)).sum(axis=-1, keepdims=True)
    ds *= w
    w, dw = _rounded(w, dt), _rounded(ds.copy(), dt)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    dq, dk, dv = (xp.zeros(batch + a.shape[-2:], f32) for a in (q, k, v))
    for n in range(0, S, 512):
        dq = _rounded(dq + gemm(xp, dw[..., n:n + 512], k[..., n:n + 512, :]) * f32(scale), dt)
    split = 256 if L >= 768 else 64 if L >= 192 else 32
    for m in range(0, L, split):
        rows = slice(m, m + split)
        dv = _rounded(dv + gemm(xp, xp.swapaxes(w[..., rows, :], -1, -2), g[..., rows, :]), dt)
        dk = _rounded(dk + gemm(xp, xp.swapaxes(dw[..., rows, :], -1, -2), q[..., rows, :]) * f32(scale), dt)
    return dq.astype(dt), dk.astype(dt), dv.astype(dt), ds


def _fwd(xp, *args, scale, causal, masked, dropped):
    if args[0].dtype in _REDUCED and args[0].ndim == 4 and not dropped and xp is np:
        q, k, v, mask, _ = _split(args, masked, dropped)
        return _laid_out_as_query(xp, q, _flash_reduced(xp, q, k, v, mask, scale=scale, causal=causal,
                                                         masked=masked), dropped)
    if args[0].dtype is _dtype.BFLOAT16_NP:   # numpy's bfloat16 matmul gives float32: compute there, round once
        return _dtype.in_float32(_fwd, xp, *args, scale=scale, causal=causal, masked=masked, dropped=dropped)
    return _fwd_weights(xp, *args, scale=scale, causal=causal, masked=masked, dropped=dropped)[0]


def _fwd_weights(xp, *args, scale, causal, masked, dropped):
    """The output and, as an extra, the weights (before dropout) for the backward to reuse."""
    q, k, v, mask, keep = _split(args, masked, dropped)
    fused = _fused(xp, q, k, v, scale=scale, causal=causal, masked=masked, dropped=dropped)
    if fused is not None:
        return fused
    p = _weights(xp, q, k, mask, scale=scale, causal=causal, masked=masked)
    return _attend(xp, q, p * keep if dropped else p, v, dropped), p


def _passthrough(xp, *args, scale, causal, masked, dropped):
    """The differentiable op's forward: the output ``scaled_dot_product_attention_forward`` made."""
    return args[-2]


def _bwd_fwd(xp, g, *args, scale, causal, masked, dropped, saved=False, into=None):
    """dq, then dk, dv (and the float mask's gradient, the score gradient) as extras; with
    ``saved``, the last argument is the forward's weights, not recomputed. ``into``: three arrays of
    q's, k's and v's shapes that float32 and float64 gradients are written into (a compiled step's parts
    of the joined qkv gradient: no copy into it afterwards); the same floats."""
    if g.dtype in _REDUCED and g.ndim == 4 and not dropped and xp is np:
        q, k, v, mask, _ = _split(args[:-1] if saved else args, masked, dropped)
        return _flash_reduced_bwd(xp, g, q, k, v, mask, scale=scale, causal=causal, masked=masked)
    if g.dtype is _dtype.BFLOAT16_NP:
        return _dtype.in_float32(_bwd_fwd, xp, g, *args, scale=scale, causal=causal, masked=masked, dropped=dropped)
    if saved:
        p, args = args[-1], args[:-1]
    q, k, v, mask, keep = _split(args, masked, dropped)
    if not saved:
        p = _weights(xp, q, k, mask, scale=scale, causal=causal, masked=masked)
    pd = p * keep if dropped else p
    as_flash = _grads_as_flash(xp, q, k, v, dropped)
    if not dropped and xp is np and g.dtype == np.float32 and kernels.enabled():
        # one region of heads where MKL runs the products: the floats of the passes below
        dq, dk, dv = into or (_grad_out(x.shape, x.dtype, as_flash) if as_flash else np.empty_like(x)
                              for x in (q, k, v))
        ds = _one_region_grad(xp, g, q, k, v, p, dq, dk, dv)
        if ds is not None:
            dq *= dq.dtype.type(scale)
            dk *= dk.dtype.type(scale)
            return dq, dk, dv, ds
    outs = into or tuple(_grad_out(x.shape, x.dtype, as_flash) for x in (q, k, v))
    dv = gemm(xp, xp.swapaxes(pd, -1, -2), g, out=outs[2])
    dp = gemm(xp, g, xp.swapaxes(v, -1, -2))
    if dropped:
        dp *= keep
    if dp.size and dp.shape == p.shape and kernels.use(xp, dp, p):
        ds = dp.reshape(-1, dp.shape[-1])
        kernels.parallel(kernels.loops("rowwise").softmax_backward, 3, ds, p.reshape(ds.shape), ds)   # in place: dp is dead
        ds = dp
    else:
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = gemm(xp, ds, k, out=outs[0])
    dq *= dq.dtype.type(scale)
    dk = gemm(xp, xp.swapaxes(ds, -1, -2), q, out=outs[1])
    dk *= dk.dtype.type(scale)
    return dq, dk, dv, ds


def _grads_as_flash(xp, q, k, v, dropped: bool) -> bool:
    """Whether to write dq, dk and dv as PyTorch's CPU flash backward does, (batch, length, heads, dim)
    arrays transposed (its layout for 4-d inputs of one batch shape and head dim, no dropout): where the
    query is laid out so too (GPT's ``view(b, l, h, d).transpose(1, 2)`` of a projection's columns), whose
    gradients then go back through the views without a copy. Elsewhere the one-region backward writes
    them laid out as their inputs (``np.empty_like``): contiguous heads get contiguous gradients, and
    multi-head attention's heads, a (length, bsz * heads, dim) copy, get gradients that its reshapes pass
    back as views (~0.15 ms less a Transformer step at one thread; PyTorch's flash layout there made them
    copy, 0.13 ms more: bench/README.md, issue 17, sessions 29 and 35)."""
    return (xp is np and q.ndim == 4 and not dropped and q.dtype in _FLASH_GRAD_DTYPES
            and q.shape[:2] == k.shape[:2] == v.shape[:2] and q.shape[-1] == v.shape[-1]
            and q.strides[0] > q.strides[2] > q.strides[1] > q.strides[3] > 0)


_FLASH_GRAD_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _grad_out(shape: tuple, dtype, as_flash: bool):
    """An empty (batch, heads, length, dim) array laid out as the flash backward's gradients, or None."""
    if not as_flash:
        return None
    b, h, n, d = shape
    return np.empty((b, n, h, d), dtype).transpose(0, 2, 1, 3)


def _vjp_tensors(g, q, k, v, mask, keep, *, scale, causal, masked):
    """The same gradients in Tensor ops (differentiable: used under create_graph)."""
    s = q.matmul(k.transpose(-2, -1)) * scale
    if causal:
        L, S = s.shape[-2:]
        allowed = creation.arange(L, device=s.device).unsqueeze(-1) >= creation.arange(S, device=s.device)
        s = s.masked_fill(allowed.logical_not(), float("-inf"))
    elif masked == "bool":
        s = s.masked_fill(mask.logical_not(), float("-inf"))
    elif masked == "float":
        s = s + mask
    if masked:
        dead = (s.detach() == float("-inf")).all(-1, keepdim=True)
        p = apply(_softmax, s.masked_fill(dead, 0.0), dim=s.ndim - 1).masked_fill(dead, 0.0)
    else:
        p = apply(_softmax, s, dim=s.ndim - 1)
    pd = p * keep if keep is not None else p
    dv = pd.transpose(-2, -1).matmul(g)
    dp = g.matmul(v.transpose(-2, -1))
    if keep is not None:
        dp = dp * keep
    ds = apply(_softmax_bwd, dp, p, dim=p.ndim - 1)
    return ds.matmul(k) * scale, ds.transpose(-2, -1).matmul(q) * scale, dv, ds


def _vjp(g, out, *args, scale, causal, masked, dropped):
    q, k, v, mask, keep = _split(args, masked, dropped)
    if is_grad_enabled():
        dq, dk, dv, ds = _vjp_tensors(g, q, k, v, mask, keep, scale=scale, causal=causal, masked=masked)
    else:
        dq, dk, dv, ds = apply(_bwd, g, *args, scale=scale, causal=causal, masked=masked, dropped=dropped)
    grads = [sum_to(dq, tuple(q.shape)) if q.requires_grad else None,
             sum_to(dk, tuple(k.shape)) if k.requires_grad else None,
             sum_to(dv, tuple(v.shape)) if v.requires_grad else None]
    if masked:
        grads.append(sum_to(ds, tuple(mask.shape)) if masked == "float" and mask.requires_grad else None)
    if dropped:
        grads.append(None)
    return tuple(grads)


def _saved_vjp(g, out, *args, scale, causal, masked, dropped):
    """The vjp of the pass-through op: ``args`` end with the raw output and the weights."""
    *args, _, p = args
    if is_grad_enabled():
        return _vjp(g, out, *args, scale=scale, causal=causal, masked=masked, dropped=dropped) + (None, None)
    q, k, v, mask, _ = _split(args, masked, dropped)
    dq, dk, dv, ds = apply(_bwd, g, *args, p, scale=scale, causal=causal, masked=masked, dropped=dropped,
                           saved=True)
    grads = [sum_to(dq, tuple(q.shape)) if q.requires_grad else None,
             sum_to(dk, tuple(k.shape)) if k.requires_grad else None,
             sum_to(dv, tuple(v.shape)) if v.requires_grad else None]
    if masked:
        grads.append(sum_to(ds, tuple(mask.shape)) if masked == "float" and mask.requires_grad else None)
    return tuple(grads) + (None,) * (bool(dropped) + 2)


def _cost(shapes, out) -> int:
    """Two GEMMs, q kᵀ and p v: 2 FLOPs per multiply-add over ``(batch, L, S, E + Ev)``."""
    q, k = shapes[0], shapes[1]
    return 2 * math.prod(out[:-1]) * k[-2] * (q[-1] + out[-1])


def _backward_name(input_ndims: tuple, params: dict) -> str:
    """PyTorch's CPU node: the flash kernel's for 4-d queries, else its math path's final view
    (``input_ndims`` all None once the node is freed)."""
    return "ScaledDotProductFlashAttentionForCpuBackward0" if input_ndims[0] in (4, None) else "UnsafeViewBackward0"


_attention = Op("scaled_dot_product_attention", _fwd, _vjp, cost=_cost, onnx=_onnx_attention,
                backward_name=_backward_name,
                aten="scaled_dot_product_attention(_scaled_dot_product_flash_attention_for_cpu)")
_bwd = Op("scaled_dot_product_attention_backward", _bwd_fwd, None, n_extra=3,
          aten="_scaled_dot_product_flash_attention_for_cpu_backward")
_fwd_saving = Op("scaled_dot_product_attention_forward", _fwd_weights, None, n_extra=1,
                 aten="scaled_dot_product_attention(_scaled_dot_product_flash_attention_for_cpu)")
_attention_saved = Op("scaled_dot_product_attention_saved_weights", _passthrough, _saved_vjp, n_kept=2,
                      backward_name=_backward_name)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, keep: Tensor | None, scale: float,
              causal: bool) -> Tensor:
    """``softmax(q kᵀ scale + mask) v`` with an optional bool/float ``mask`` or ``causal`` (top-left
    aligned) masking, and ``keep`` the scaled dropout mask over the weights."""
    masked = "" if mask is None else ("bool" if mask.dtype == _dtype.bool else "float")
    extra = tuple(t for t in (mask, keep) if t is not None)
    params = dict(scale=float(scale), causal=bool(causal), masked=masked, dropped=keep is not None)
    if q.dtype not in (_dtype.bfloat16, _dtype.float16) and keeps_forward_state(q, k, v, mask):
        # keep the weights for the backward, not in bfloat16 or half (PyTorch's flash kernels, both ways)
        out, p = apply(_fwd_saving, q, k, v, *extra, **params)
        return apply(_attention_saved, q, k, v, *extra, out, p, **params)
    return apply(_attention, q, k, v, *extra, scale=float(scale), causal=bool(causal), masked=masked,
                 dropped=keep is not None)
