"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

from typing import Any

from . import _foreach
from .optimizer import Optimizer, check_hyper, check_single_tensor, dense_grad, scalar

__all__ = ["SGD"]


class SGD(Optimizer):
    """``torch.optim.SGD``; the update follows PyTorch's single-tensor implementation op for op,
    on a group's arrays at once while nobody watches (``_foreach.py``; ``foreach=False`` opts out).
    A sparse gradient (``Embedding(sparse=True)``) updates only its rows; with momentum it is made
    dense first (the same values; PyTorch keeps a sparse momentum buffer), with weight decay it is
    refused as PyTorch's ``grad.add(param)`` refuses it."""

    _sparse_refusal = None

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None):
        check_hyper("learning rate", lr, lr >= 0.0)
        check_hyper("momentum value", momentum, momentum >= 0.0)
        check_hyper("weight_decay value", weight_decay, weight_decay >= 0.0)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        check_single_tensor(defaults)
        _foreach.check_fused(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        if _foreach.multi_tensor(group, lambda g: _foreach.sgd_told(self, g)):
            _foreach.sgd(self, group, scalar(group["lr"]))
            return
        lr, momentum, dampening = scalar(group["lr"]), group["momentum"], group["dampening"]
        weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if momentum != 0 or weight_decay != 0:
                if weight_decay != 0 and grad.is_sparse:   # PyTorch's grad.add(param) refuses it
                    raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
                grad = dense_grad(grad)
            if maximize:
                grad = -grad
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = grad.detach().clone()
                else:
                    buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                grad = grad.add(buf, alpha=momentum) if nesterov else buf
            p.add_(grad, alpha=-lr)
