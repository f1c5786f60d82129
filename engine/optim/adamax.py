"""Adamax: Adam with the infinity norm in place of the second moment."""
from __future__ import annotations

from typing import Any

from ..core.creation import zeros_like
from .optimizer import Optimizer, check_hyper, check_single_tensor, scalar

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """``torch.optim.Adamax``; the update follows PyTorch's single-tensor implementation op for op."""

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("epsilon value", eps, 0.0 <= eps)
        check_hyper("beta parameter at index 0", betas[0], 0.0 <= betas[0] < 1.0)
        check_hyper("beta parameter at index 1", betas[1], 0.0 <= betas[1] < 1.0)
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        check_single_tensor(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = scalar(group["lr"]), group["eps"], group["weight_decay"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["exp_avg"] = zeros_like(p)
                state["exp_inf"] = zeros_like(p)
            exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
            step = state["step"] = state["step"] + 1
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_inf.copy_(exp_inf.mul_(beta2).maximum(grad.abs().add_(eps)))
            clr = lr / (1 - beta1 ** step)
            p.addcdiv_(exp_avg, exp_inf, value=-clr)
