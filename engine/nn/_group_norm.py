"""``group_norm`` as one op, its plain backward as one op.

As a composite of mean, var and arithmetic (seven nodes) its float32 values and gradients differed
from PyTorch's in about half the elements; on cpu float32 both run ``kernels/groupnorm.py``'s loops,
ATen's kernel's roundings (bit for bit). Under ``create_graph`` the vjp is written in Tensor ops (the
normalisation's vjp is ``batch_norm_backward`` over each group's values), so higher derivatives stay
exact. Elsewhere (float64, cupy, meta, no numba) the forward and the backward are the numpy formulas.
"""
from __future__ import annotations

import math

from .. import kernels
from ..base.grad_mode import is_grad_enabled
from ..core.dispatch import apply
from ..core.registry import ALL, Op
from ..core.tensor import Tensor
from ._fused import _row_major
from ._ops import _bn_bwd

__all__ = ["group_norm"]


def _split(affine: tuple, has_weight: bool) -> tuple:
    """``(weight, bias)`` from the op's trailing inputs, None where absent."""
    return (affine[0] if has_weight else None), (affine[-1] if len(affine) > has_weight else None)


def _channel(a, ndim: int):
    """A ``(C,)`` array or Tensor shaped to broadcast over dim 1 of an ``ndim``-d input."""
    return a.reshape((a.shape[0],) + (1,) * (ndim - 2))


def _statistics(xp, rows, eps):
    """Each group's mean and ``1 / sqrt(biased var + eps)`` (kept dims) by the numpy formula."""
    mean = rows.mean(axis=2, keepdims=True)
    c = rows - mean
    return mean, 1 / xp.sqrt((c * c).mean(axis=2, keepdims=True) + rows.dtype.type(eps))


def _loop_stats(xp, x, groups, eps):
    """The loop's flat mean and 1/std per ``(n, group)`` (layer_norm's moments over each group's values)."""
    rows = x.reshape(x.shape[0] * groups, -1)
    mean, rstd = xp.empty(len(rows), x.dtype), xp.empty(len(rows), x.dtype)
    kernels.loops("rowwise").layer_norm_stats(rows, eps, mean, rstd)
    return mean, rstd


def _gn_fwd(xp, x, *affine, groups, eps, has_weight):
    x = _row_major(xp, x)   # ATen normalizes a contiguous input: a row-major result
    w, b = _split(affine, has_weight)
    n, c = x.shape[:2]
    if x.size and kernels.use(xp, x, *affine):
        empty = xp.empty(0, x.dtype)
        out, mean, rstd = xp.empty_like(x), xp.empty(n * groups, x.dtype), xp.empty(n * groups, x.dtype)
        kernels.loops("groupnorm").group_norm(x.reshape(n, c, -1), groups, empty if w is None else w, empty if b is None
                                              else b, float(eps), out.reshape(n, c, -1), mean, rstd)
        return out
    rows = x.reshape(n, groups, -1)
    mean, s = _statistics(xp, rows, eps)
    out = ((rows - mean) * s).reshape(x.shape)
    if w is not None:
        out = out * _channel(w, x.ndim)
    if b is not None:
        out = out + _channel(b, x.ndim)
    return out


def _gn_bwd_fwd(xp, g, x, *affine, groups, eps, has_weight, needs):
    """``(gx, gw, gb)`` (an unneeded one an empty array): the loops on cpu float32, else
    ``s (gy - mean(gy) - xhat mean(gy xhat))`` per group with ``gy = g w``, ``sum(g xhat)``, ``sum(g)``."""
    g, x = _row_major(xp, g), _row_major(xp, x)
    w, _ = _split(affine, has_weight)
    n, c = x.shape[:2]
    empty = xp.empty(0, x.dtype)
    if x.size and kernels.use(xp, g, x, *affine) and g.shape == x.shape:
        mean, rstd = _loop_stats(xp, x, groups, float(eps))
        gx = xp.empty_like(x) if needs[0] else empty
        gw, gb = (xp.empty(c, x.dtype) if need else empty for need in needs[1:])
        kernels.loops("groupnorm").group_norm_backward(g.reshape(n, c, -1), x.reshape(n, c, -1), groups, mean, rstd,
                                                       empty if w is None else w, w is not None, kernels.threads(),
                                                       gx.reshape(n, c, -1) if needs[0] else empty, gw, gb)
        return gx, gw, gb
    rows = x.reshape(n, groups, -1)
    mean, s = _statistics(xp, rows, eps)
    xhat = (rows - mean) * s
    gx = empty
    if needs[0]:
        gy = (g if w is None else g * _channel(w, x.ndim)).reshape(n, groups, -1)
        gx = (s * (gy - gy.mean(axis=2, keepdims=True) - xhat * (gy * xhat).mean(axis=2, keepdims=True))).reshape(x.shape)
    lead = (0,) + tuple(range(2, x.ndim))
    gw = (g * xhat.reshape(x.shape)).sum(axis=lead) if needs[1] else empty
    gb = g.sum(axis=lead) if needs[2] else empty
    return gx, gw, gb


def _gn_vjp(g, out, x, *affine, groups, eps, has_weight):
    w, b = _split(affine, has_weight)
    params = dict(groups=groups, eps=eps)
    if not is_grad_enabled():              # plain backward: one op; create_graph: Tensor ops below
        needs = (x.requires_grad, w is not None and w.requires_grad, b is not None and b.requires_grad)
        gx, gw, gb = apply(_gn_bwd, g, x, *affine, **params, has_weight=has_weight, needs=needs)
        grads = [gx if needs[0] else None] + ([gw if needs[1] else None] if w is not None else [])
        return tuple(grads + ([gb if needs[2] else None] if b is not None else []))
    n = x.shape[0]
    grads = [None]
    if x.requires_grad:
        gy = g if w is None else g * _channel(w, x.ndim)
        grads[0] = apply(_bn_bwd, gy.reshape(n, groups, -1), x.reshape(n, groups, -1), dims=(2,),
                         eps=eps).reshape(x.shape)
    lead = (0,) + tuple(range(2, x.ndim))
    if w is not None:
        grads.append((g * apply(_gn, x, **params, has_weight=False)).sum(lead) if w.requires_grad else None)
    if b is not None:
        grads.append(g.sum(lead) if b.requires_grad else None)
    return tuple(grads)


def _onnx_group_norm(g, x, *affine, groups, eps, has_weight):
    """Each group's values as one instance of ``InstanceNormalization``, then the channels' scale and shift."""
    rank = g.rank(x)
    ones, zeros = g.full([groups], 1.0, g.dtype(x)), g.full([groups], 0.0, g.dtype(x))
    y = g.op("InstanceNormalization", g.op("Reshape", x, g.const([0, groups, -1], "int64")), ones, zeros, epsilon=eps)
    y = g.op("Reshape", y, g.op("Shape", x))
    w, b = _split(affine, has_weight)
    view = g.const([-1] + [1] * (rank - 2), "int64")
    if w is not None:
        y = g.op("Mul", y, g.op("Reshape", w, view))
    if b is not None:
        y = g.op("Add", y, g.op("Reshape", b, view))
    return y


_gn = Op("group_norm", _gn_fwd, _gn_vjp, promote="float", saves=ALL, cost=lambda s, out: 8 * math.prod(out),
         onnx=_onnx_group_norm, backward_name="NativeGroupNormBackward0", aten="group_norm(native_group_norm)")
_gn_bwd = Op("group_norm_backward", _gn_bwd_fwd, None, promote="float", n_extra=2,
             cost=lambda s, out: 10 * math.prod(s[1]), aten="native_group_norm_backward")


def group_norm(x: Tensor, groups: int, weight: Tensor | None, bias: Tensor | None, eps: float) -> Tensor:
    """``x`` (``(N, C, *)``) normalised over each of ``groups`` channel groups per sample, then scaled and
    shifted per channel, as one op."""
    affine = tuple(t for t in (weight, bias) if t is not None)
    return apply(_gn, x, *affine, groups=int(groups), eps=float(eps), has_weight=weight is not None)
