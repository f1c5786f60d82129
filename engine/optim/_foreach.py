"""Multi-tensor optimizer steps: one loop over a group's arrays, ufuncs writing in place.

The per-parameter Tensor path dispatches some ten ops per parameter, and on small models that
dispatch costs more than the arithmetic. While nobody watches (``STATE.slow`` false: no mode,
tape, profiler or anomaly check), an update is the optimizer's own bookkeeping on arrays, as
accumulation into ``.grad`` is in the backward walk: the same arithmetic in the same order as
the Tensor path (so the values are identical, bit for bit), written with ``out=`` into the
parameter and state arrays, each write counted on the tensor's version counter. While someone
watches, the optimizers take the Tensor path, so a tape, profiler or capture sees every update
under the step's named scope; where the array path writes exactly the Tensor path's in-place ops
(SGD without weight decay, ``maximize`` or Nesterov: ``p.add_(grad, alpha=-lr)`` a parameter, with
momentum ``buf.mul_(momentum).add_(grad, ...)`` first) and only ``op`` subscribers and anomaly
detection watch, it runs with each write told as that op (``dispatch.observed_write``): the same
events, without the per-parameter dispatch.

This is what ``foreach=`` and ``fused=`` select in PyTorch; tapelab takes it by default
(``foreach=None``) on the cpu, and ``foreach=False`` forces the per-parameter Tensor path.
For a float32 parameter, Adam's update is one fused loop (engine/kernels/optim.py) computing
the same float32 operations in the same order, so its values are bit for bit these too.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import kernels
from ..kernels import vml
from ..base.coo import COOArray
from ..base.device import CPU
from ..base.dispatch_state import LOCAL, STATE
from ..core.creation import zeros_like
from ..core.dispatch import keeps_float32, observed_write
from ..ops.elementwise import _add, _addcdiv_fwd, _addcmul_fwd, _div, _lerp_fwd, _mul, _sqrt_fwd, scaled_sum

__all__ = ["multi_tensor", "check_fused", "sgd", "adam", "fused_momentum", "momentum_update", "momentum_update_from"]


def check_fused(defaults: dict) -> None:
    """PyTorch's checks of ``fused=True`` at construction."""
    if defaults.get("fused"):
        if defaults.get("differentiable"):
            raise RuntimeError("`fused` does not support `differentiable`")
        if defaults.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def multi_tensor(group: dict, told: Callable[[dict], bool] | None = None) -> bool:
    """Whether this step of ``group`` may run on arrays: not refused by ``foreach=False`` (unless
    ``fused=True``), nobody watching (or only ``op`` subscribers and anomaly detection, no mode of this
    thread or function hook, where ``told(group)`` says the caller tells each write as its op), every
    parameter on one cpu or cuda device and no gradient sparse. On cuda this is what spares the
    per-parameter dispatch: a momentum SGD step there is three kernels per parameter
    (``kernels/device.py``'s fused multiply-add)."""
    if group.get("foreach") is False and not group.get("fused"):
        return False
    if STATE.slow and not (told is not None and not LOCAL.modes and STATE.functions is None and told(group)):
        return False
    params = group["params"]
    dev = params[0]._device if params else CPU
    return dev.type in ("cpu", "cuda") and all(
        p._device is dev and p._data.dtype.kind != "c" and (p._grad is None or type(p._grad._data) is not COOArray)
        for p in params)


def _namespace(group: dict):
    """The array namespace of the group's device (``multi_tensor`` checked there is one)."""
    return group["params"][0]._device.xp if group["params"] else np


def _bump(t) -> None:
    t._vc[0] += 1


def _by_number(xp, op, a, k, out=None):
    """``a`` times or over the Python number ``k`` (``op`` is mul or div) as the Tensor op computes it:
    beside a bfloat16/half array the number stays a float32 and the result is rounded once."""
    ufunc = getattr(xp, op.ufunc)
    if not keeps_float32(op, a.dtype):
        return ufunc(a, k) if out is None else ufunc(a, k, out=out)
    return ufunc(a, np.float32(k)).astype(a.dtype) if out is None else ufunc(a, np.float32(k), out=out)


def sgd_told(opt, group: dict) -> bool:
    """Whether ``sgd`` writes exactly the Tensor path's in-place ops for ``group`` (``multi_tensor``'s
    ``told``): no weight decay, ``maximize`` or Nesterov, and with momentum every buffer made (the first
    step's ``grad.detach().clone()`` is the Tensor path's)."""
    if group["weight_decay"] != 0 or group["maximize"] or group["nesterov"]:
        return False
    if group["momentum"] != 0:
        state = opt.state
        for p in group["params"]:
            if p.grad is not None and (state.get(p) or {}).get("momentum_buffer") is None:
                return False
    return True


def sgd(opt, group: dict, lr: float) -> None:
    """``SGD._step_group`` on arrays, op for op; while someone watches (``sgd_told``'s groups), each
    write told as the Tensor path's in-place op."""
    momentum, dampening = group["momentum"], group["dampening"]
    xp = _namespace(group)
    state = opt.state
    if STATE.slow:
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if momentum != 0:   # buf.mul_(momentum).add_(grad, alpha=1 - dampening), then p.add_(buf, ...)
                buf = state[p]["momentum_buffer"]
                b = buf._data
                _told(_mul, buf, (momentum,), lambda: _by_number(xp, _mul, b, momentum, out=b))
                _told_sum(buf, grad, 1 - dampening, xp)
                grad = buf
            _told_sum(p, grad, -lr, xp)
        return
    weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
    for p in group["params"]:
        grad = p.grad
        if grad is None:
            continue
        g = grad._data
        if maximize:
            g = xp.negative(g)
        if weight_decay != 0:
            g = scaled_sum(xp, g, p._data, weight_decay)
        if momentum != 0:
            st = state[p]
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = st["momentum_buffer"] = zeros_like(grad)
                xp.copyto(buf._data, g)
            elif not nesterov and dampening == 0 and fused_momentum(p._data, g, buf._data):
                momentum_update(p._data, g, buf._data, momentum, -lr)
                _bump(buf)
                _bump(p)
                continue
            else:
                b = buf._data
                _by_number(xp, _mul, b, momentum, out=b)
                scaled_sum(xp, b, g, 1 - dampening, out=b)
            _bump(buf)
            g = scaled_sum(xp, g, buf._data, momentum) if nesterov else buf._data
        data = p._data
        scaled_sum(xp, data, g, -lr, out=data)
        _bump(p)


def _told(op, target, operands: tuple, write: Callable[[], object]) -> None:
    """``write()`` of an array into ``target``'s own memory (no autograd: the optimizer's ``no_grad``),
    told to the ``op`` subscribers as the Tensor path's in-place ``op`` on these operands is told
    (``dispatch.observed_write``, which ``multi_tensor``'s checks let write: no mode, no function hook)."""
    def run() -> bool:
        write()
        target._vc[0] += 1
        return True
    observed_write(op, target, operands, run)


def _told_sum(p, grad, alpha: float, xp) -> None:
    """``p.add_(grad, alpha=alpha)`` on the arrays, told as ``_told`` tells it: one closure per write,
    not two (the writes every told SGD step makes per parameter)."""
    data, u, vc = p._data, grad._data, p._vc

    def write() -> bool:
        scaled_sum(xp, data, u, alpha, out=data)
        vc[0] += 1
        return True
    observed_write(_add, p, (grad,), write)


def fused_momentum(p, g, buf) -> bool:
    """Whether ``momentum_update`` takes these arrays: the loops on, three C-contiguous float32 numpy
    arrays of one shape over separate memory."""
    return (kernels.use(np, p, g, buf) and p.shape == g.shape == buf.shape and p.size > 0
            and not (np.may_share_memory(p, g) or np.may_share_memory(p, buf) or np.may_share_memory(g, buf)))


def momentum_update(p, g, buf, momentum: float, neg_lr: float) -> None:
    """``buf.mul_(momentum).add_(g); p.add_(buf, alpha=neg_lr)`` in one pass (``kernels/optim.py``'s
    ``sgd_momentum``, the same float32 operations in the same order, so the same floats as those three
    ops): eager SGD's step and a captured one's replay (``graphs/_program.py``) both run it. The
    arrays as ``fused_momentum`` accepts them; split over the threads as ``add``'s pass is."""
    if p.ndim != 1:
        p, g, buf = p.ravel(), g.ravel(), buf.ravel()
    f32 = np.float32
    kernels.parallel(kernels.loops("optim").sgd_momentum, 3, p, g, buf, f32(momentum), f32(neg_lr))


def momentum_update_from(p, x, g, buf, filled: float | None, momentum: float, neg_lr: float) -> None:
    """``g`` made from the backward's ``x`` (``g.copy_(x)`` where ``filled`` is None, else ``g.fill_(filled);
    g.add_(x)``: a zeroed ``.grad`` accumulated into) and ``momentum_update(p, g, buf, ...)``, in one pass
    and the same floats as those ops: a captured step's replay runs it where nothing reads ``g`` in between
    (``graphs/_program.py``). ``p``, ``g`` and ``buf`` as ``fused_momentum`` accepts them; ``x`` of their
    shape and dtype, in any layout (read through ``ravel``)."""
    if p.ndim != 1:
        p, g, buf = p.ravel(), g.ravel(), buf.ravel()
    f32 = np.float32
    kernels.parallel(kernels.loops("optim").sgd_momentum_grad, 4, p, x.ravel(), g, buf, filled is not None,
                     f32(0 if filled is None else filled), f32(momentum), f32(neg_lr))


def adam(opt, group: dict, lr: float, beta1: float, beta2: float) -> None:
    """``Adam._step_group`` (and AdamW's) on arrays, op for op; not ``capturable``."""
    eps, weight_decay = group["eps"], group["weight_decay"]
    xp = _namespace(group)
    amsgrad, decoupled, maximize = group["amsgrad"], group["decoupled_weight_decay"], group["maximize"]
    w = 1 - beta1
    state = opt.state
    fused = None if maximize or amsgrad else _FusedAdam(lr, beta1, beta2, eps, weight_decay, decoupled)
    for p in group["params"]:
        grad = p.grad
        if grad is None:
            continue
        st = state[p]
        if not st:
            st["step"] = 0.0
            st["exp_avg"] = zeros_like(p)
            st["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                st["max_exp_avg_sq"] = zeros_like(p)
        step = st["step"] = st["step"] + 1
        g = grad._data
        if fused is not None and fused(p, g, st, step):
            continue
        if maximize:
            g = xp.negative(g)
        data = p._data
        if weight_decay != 0:
            if decoupled:
                _by_number(xp, _mul, data, 1 - lr * weight_decay, out=data)
                _bump(p)
            else:
                g = scaled_sum(xp, g, data, weight_decay)
        exp_avg, exp_avg_sq = st["exp_avg"], st["exp_avg_sq"]
        m, v = exp_avg._data, exp_avg_sq._data
        xp.copyto(m, _lerp_fwd(xp, m, g, w))   # the ops' own forwards: fused multiply-adds as PyTorch's
        _bump(exp_avg)
        _by_number(xp, _mul, v, beta2, out=v)
        xp.copyto(v, _addcmul_fwd(xp, v, g, g, value=1 - beta2))
        _bump(exp_avg_sq)
        step_size = lr / (1 - beta1 ** step)
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        if amsgrad:
            max_sq = st["max_exp_avg_sq"]
            xp.maximum(max_sq._data, v, out=max_sq._data)
            _bump(max_sq)
            denom = _by_number(xp, _div, _sqrt_fwd(xp, max_sq._data), bias_correction2_sqrt) + eps
        else:
            denom = _by_number(xp, _div, _sqrt_fwd(xp, v), bias_correction2_sqrt) + eps
        xp.copyto(data, _addcdiv_fwd(xp, data, m, denom, value=-step_size))
        _bump(p)


class _FusedAdam:
    """One group's Adam step as the fused loop, one call per parameter, when it applies (float32,
    contiguous, and a weight decay that stays nonzero in float32); the version counters move as
    on the path above. The group's float32 constants are rounded once per step, not per
    parameter (the per-parameter Python work was as long as the loop on a small GPT)."""

    def __init__(self, lr, beta1, beta2, eps, weight_decay, decoupled):
        f32 = np.float32
        self.ok = kernels.enabled() and not f32(weight_decay) == 0 != weight_decay
        self.lr, self.beta1, self.beta2 = lr, beta1, beta2
        self.bump_decay = weight_decay != 0 and decoupled
        w = f32(1 - beta1)
        self.args = (f32(1 - lr * weight_decay if self.bump_decay else 1.0),
                     f32(weight_decay if not decoupled else 0.0),
                     -0.5 < w < 0.5, w if -0.5 < w < 0.5 else w - f32(1), f32(beta2), f32(1 - beta2))
        self.eps = f32(eps)
        self.step, self.corrections = None, None

    def __call__(self, p, g, st, step) -> bool:
        if not self.ok:
            return False
        data, m, v = p._data, st["exp_avg"]._data, st["exp_avg_sq"]._data
        if g.shape != data.shape or not kernels.use(np, data, g, m, v):
            return False
        if step != self.step:
            f32 = np.float32
            self.step = step
            self.corrections = (f32((1 - self.beta2 ** step) ** 0.5), self.eps,
                                f32(-(self.lr / (1 - self.beta1 ** step))))
        if data.ndim != 1:
            data, g, m, v = data.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1)
        loop = kernels.loops("optim")
        # each loop split over the threads above ATen's grain as PyTorch's per-op kernels are (elementwise: the
        # same floats); whole, the d384 GPT's AdamW took 2.9 ms at two threads against torch's 3.0, 2.7 at one
        if vml.available():   # PyTorch's denominator reads exp_avg_sq.sqrt(): VML's square root, between two loops
            kernels.parallel(loop.adam_moments, 4, data, g, m, v, *self.args)
            kernels.parallel(loop.adam_apply, 3, data, m, vml.unary_split("sqrt", v), *self.corrections)
        else:
            kernels.parallel(loop.adam, 4, data, g, m, v, *self.args, *self.corrections)
        if self.bump_decay:
            _bump(p)
        for t in (st["exp_avg"], st["exp_avg_sq"], p):
            _bump(t)
        return True
