"""RMSprop, optionally centered and with momentum."""
from __future__ import annotations

from typing import Any

from ..core.creation import zeros_like
from .optimizer import Optimizer, check_hyper, check_single_tensor, scalar

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``; the update follows PyTorch's single-tensor implementation op for op."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("epsilon value", eps, 0.0 <= eps)
        check_hyper("momentum value", momentum, 0.0 <= momentum)
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        check_hyper("alpha value", alpha, 0.0 <= alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        check_single_tensor(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, alpha, eps = scalar(group["lr"]), group["alpha"], group["eps"]
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        centered = group["centered"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["square_avg"] = zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if centered:
                    state["grad_avg"] = zeros_like(p)
            square_avg = state["square_avg"]
            state["step"] += 1
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            if centered:
                grad_avg = state["grad_avg"]
                grad_avg.lerp_(grad, 1 - alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg = avg.add_(eps)
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum).addcdiv_(grad, avg)
                p.add_(buf, alpha=-lr)
            else:
                p.addcdiv_(grad, avg, value=-lr)
