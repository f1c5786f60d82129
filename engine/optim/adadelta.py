"""Adadelta: per-coordinate rates from running averages of squared gradients and updates."""
from __future__ import annotations

from typing import Any

from ..core.creation import zeros_like
from .optimizer import Optimizer, check_hyper, check_single_tensor, scalar

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """``torch.optim.Adadelta``; the update follows PyTorch's single-tensor implementation op for op."""

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("rho value", rho, 0.0 <= rho <= 1.0)
        check_hyper("epsilon value", eps, 0.0 <= eps)
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        check_single_tensor(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, rho, eps = scalar(group["lr"]), group["rho"], group["eps"]
        weight_decay = group["weight_decay"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["square_avg"] = zeros_like(p)
                state["acc_delta"] = zeros_like(p)
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            state["step"] += 1
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_()
            delta.div_(std).mul_(grad)
            acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
            p.add_(delta, alpha=-lr)
