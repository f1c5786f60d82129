"""RAdam: Adam with the variance of the adaptive learning rate rectified (Liu et al., 2019)."""
from __future__ import annotations

from typing import Any

from ..core.creation import zeros_like
from .optimizer import Optimizer, check_hyper, check_single_tensor, scalar

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """``torch.optim.RAdam``; the update follows PyTorch's single-tensor implementation op for op."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("epsilon value", eps, 0.0 <= eps)
        check_hyper("beta parameter at index 0", betas[0], 0.0 <= betas[0] < 1.0)
        check_hyper("beta parameter at index 1", betas[1], 0.0 <= betas[1] < 1.0)
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable)
        check_single_tensor(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = scalar(group["lr"]), group["eps"], group["weight_decay"]
        decoupled = group["decoupled_weight_decay"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            step = state["step"] = state["step"] + 1
            if weight_decay != 0:
                if decoupled:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(p, alpha=weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            bias_corrected_exp_avg = exp_avg / bias_correction1
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                # PyTorch's ``number / tensor`` is ``tensor.reciprocal() * number``
                adaptive_lr = exp_avg_sq.sqrt().add_(eps).reciprocal() * (bias_correction2 ** 0.5)
                p.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
            else:
                p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
