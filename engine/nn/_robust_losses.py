"""``huber_loss`` and ``smooth_l1_loss`` as one op each, with their backward ops, as ATen declares them: the
elementwise loss then the mean or sum (``_ops._reduced``: the ``mean``/``sum`` ops' rounding), and
``*_loss_backward(g, input, target)`` for the input (the target's gradient is the same op with the two swapped,
as PyTorch's derivatives). On cpu float32 ``kernels.losses``' loops walk the arrays as ATen's elementwise loop
(``pointwise.aten_map``), so values and gradients are PyTorch's bit for bit at every thread count: the backward's
vector and scalar lambdas round differently (float32 ``delta`` against double). The composite was ten ops a
step and 10x torch's time on 256k elements."""
from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..core.dispatch import apply
from ..core.registry import ALL, Op
from ..core.tensor import Tensor
from ..ops._util import unbroadcast
from ._fused import _aten_loop
from ._ops import _reduced

_F32 = np.dtype(np.float32)
_AVX2_BLOCK = 16   # ATen registers these kernels for AVX2 alone (``REGISTER_DISPATCH``): two 8-float vectors a step


def _loops(xp, *arrays):
    """``kernels.losses`` where ATen's float32 walk applies (``_aten_loop``), else None."""
    return kernels.loops("losses") if _aten_loop(xp, *arrays) else None


def _loss_fwd(name, formula):
    def fwd(xp, x, t, *, reduction, p):
        loops = _loops(xp, x, t)
        if loops is not None:
            loss = kernels.loops("pointwise").aten_map(getattr(loops, name), (x, t), (np.float32(p),))
        else:
            loss = formula(xp, xp.abs(x - t), p)
        return _reduced(xp, loss, reduction)
    return fwd


def _huber_formula(xp, z, delta):
    return xp.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))


def _smooth_l1_formula(xp, z, beta):
    return xp.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)


def _norm(reduction: str, *shapes) -> float:
    """The backward's scale: 1/n for a mean over the ``n`` elements of the broadcast inputs (PyTorch's
    ``huber_loss`` expands both first), else 1."""
    n = math.prod(np.broadcast_shapes(*shapes))
    return 1.0 / n if reduction == "mean" and n else 1.0


def _bwd_fwd(name, formula):
    def fwd(xp, g, x, t, *, reduction, p):
        norm = _norm(reduction, x.shape, t.shape)
        loops = _loops(xp, x, t) if g.dtype == _F32 else None
        if loops is not None:
            aten_map = kernels.loops("pointwise").aten_map
            if g.ndim == 0 or (g.size and not any(g.strides)):   # a reduced loss's g, or one value broadcast
                return aten_map(getattr(loops, name + "_scalar"), (x, t),
                                (np.float32(g.flat[0]), np.float32(norm), np.float32(p), float(p)), _AVX2_BLOCK)
            if g.shape == x.shape:
                return aten_map(getattr(loops, name), (x, t, g), (np.float32(norm), np.float32(p), float(p)),
                                _AVX2_BLOCK)
        return formula(xp, g, x - t, x.dtype.type(norm), p)
    return fwd


def _huber_grad_formula(xp, g, d, norm, delta):
    """ATen's scalar lambda (float64's and cupy's formula)."""
    return xp.where(d <= -delta, -norm * g * delta, xp.where(d >= delta, norm * g * delta, norm * d * g))


def _smooth_l1_grad_formula(xp, g, d, norm, beta):
    return xp.where(d <= -beta, -norm * g, xp.where(d >= beta, norm * g, norm * d * g / beta))


def _bwd_vjp(name, slope):
    """The backward op's own gradients: it is linear in ``g``; in ``x`` and ``t`` its slope is ``slope(p)`` times
    ``norm g`` where ``|x - t| < p`` (0 elsewhere)."""
    def vjp(gg, out, g, x, t, *, reduction, p):
        op = _BACKWARDS[name]
        gg_g = apply(op, gg, x, t, reduction=reduction, p=p)
        norm = _norm(reduction, x.shape, t.shape)
        inner = gg * g * (norm * slope(p))
        dx = inner.where((x - t).abs() < p, 0.0)
        return (unbroadcast(gg_g, g) if g.requires_grad else None,
                unbroadcast(dx, x) if x.requires_grad else None,
                unbroadcast(-dx, t) if isinstance(t, Tensor) and t.requires_grad else None)
    return vjp


def _loss_vjp(g, out, x, t, *, reduction, p, op):
    return (unbroadcast(apply(op, g, x, t, reduction=reduction, p=p), x) if x.requires_grad else None,
            unbroadcast(apply(op, g, t, x, reduction=reduction, p=p), t)
            if isinstance(t, Tensor) and t.requires_grad else None)


def _onnx(smooth: bool):
    """The loss in ONNX nodes: ``Where(z < p, 0.5 z z [/ p], ...)`` reduced as ``mse_loss``'s lowering."""
    def lower(g, x, t, *, reduction, p):
        z = g.op("Abs", g.op("Sub", x, t))
        bound, half = g.scalar(p, x), g.scalar(0.5, x)
        quad = g.op("Mul", g.op("Mul", half, z), z)
        if smooth:
            quad, lin = g.op("Div", quad, bound), g.op("Sub", z, g.op("Mul", half, bound))
        else:
            lin = g.op("Mul", bound, g.op("Sub", z, g.op("Mul", half, bound)))
        loss = g.op("Where", g.op("Less", z, bound), quad, lin)
        return loss if reduction == "none" else g.reduce("ReduceMean" if reduction == "mean" else "ReduceSum",
                                                         loss, None, False)
    return lower


def _cost(s, out):
    return 4 * max(math.prod(s[0]), math.prod(s[1]))


_huber_bwd = Op("huber_loss_backward", _bwd_fwd("huber_backward", _huber_grad_formula),
                _bwd_vjp("huber", lambda delta: 1.0), saves=ALL, cost=_cost)
_smooth_l1_bwd = Op("smooth_l1_loss_backward", _bwd_fwd("smooth_l1_backward", _smooth_l1_grad_formula),
                    _bwd_vjp("smooth_l1", lambda beta: 1.0 / beta), saves=ALL, cost=_cost)
_BACKWARDS = {"huber": _huber_bwd, "smooth_l1": _smooth_l1_bwd}   # each backward op's vjp applies it again
_huber = Op("huber_loss", _loss_fwd("huber", _huber_formula),
            lambda g, out, x, t, **p: _loss_vjp(g, out, x, t, **p, op=_huber_bwd),
            promote="common", saves=ALL, cost=_cost, onnx=_onnx(False))
_smooth_l1 = Op("smooth_l1_loss", _loss_fwd("smooth_l1", _smooth_l1_formula),
                lambda g, out, x, t, **p: _loss_vjp(g, out, x, t, **p, op=_smooth_l1_bwd),
                promote="common", saves=ALL, cost=_cost, onnx=_onnx(True))


def huber_loss(input: Tensor, target: Tensor, reduction: str, delta: float) -> Tensor:
    """``0.5 z^2`` for ``z = |input - target| < delta``, else ``delta (z - 0.5 delta)``, reduced."""
    return apply(_huber, input, target, reduction=reduction, p=float(delta))


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str, beta: float) -> Tensor:
    """``0.5 z^2 / beta`` for ``z < beta``, else ``z - 0.5 beta``, reduced (``beta > 0``)."""
    return apply(_smooth_l1, input, target, reduction=reduction, p=float(beta))
