"""NAdam: Adam with Nesterov momentum (and the momentum-decay schedule of Dozat, 2016)."""
from __future__ import annotations

from typing import Any

from ..base import dtype as _dtype
from ..base.dtype import get_default_dtype
from ..core.creation import tensor, zeros_like
from .optimizer import Optimizer, check_hyper, check_single_tensor, scalar

__all__ = ["NAdam"]


def scalar_dtype():
    """PyTorch's ``_get_scalar_dtype()``: float64 under a float64 default dtype, else float32."""
    return _dtype.float64 if get_default_dtype() == _dtype.float64 else _dtype.float32


class NAdam(Optimizer):
    """``torch.optim.NAdam``; the update follows PyTorch's single-tensor implementation op for op.

    ``mu_product`` is a 0-d tensor of the default scalar dtype (float32 unless the default dtype
    is float64), as in PyTorch, so its rounding, and the update built on it, are PyTorch's.
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("epsilon value", eps, 0.0 <= eps)
        check_hyper("beta parameter at index 0", betas[0], 0.0 <= betas[0] < 1.0)
        check_hyper("beta parameter at index 1", betas[1], 0.0 <= betas[1] < 1.0)
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        check_hyper("momentum_decay value", momentum_decay, 0.0 <= momentum_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable)
        check_single_tensor(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = scalar(group["lr"]), group["eps"], group["weight_decay"]
        momentum_decay, decoupled = group["momentum_decay"], group["decoupled_weight_decay"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["mu_product"] = tensor(1.0, dtype=scalar_dtype())
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            exp_avg, exp_avg_sq, mu_product = state["exp_avg"], state["exp_avg_sq"], state["mu_product"]
            step = state["step"] = state["step"] + 1
            bias_correction2 = 1 - beta2 ** step
            if weight_decay != 0:
                if decoupled:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(p, alpha=weight_decay)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product.mul_(mu)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = exp_avg_sq.div(bias_correction2).sqrt()
            mu_product_value = mu_product.item()
            mu_product_next = mu_product_value * mu_next
            denom.add_(eps)
            p.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - mu_product_value)))
            p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))
