"""Rprop: resilient backpropagation, per-coordinate step sizes driven by gradient signs."""
from __future__ import annotations

from typing import Any

from ..core.creation import full_like, zeros_like
from .optimizer import Optimizer, check_single_tensor, check_hyper, scalar

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """``torch.optim.Rprop``; the update follows PyTorch's single-tensor implementation op for op."""

    def __init__(self, params, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        check_single_tensor(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["prev"] = zeros_like(p)
                state["step_size"] = full_like(grad, scalar(group["lr"]))
            prev, step_size = state["prev"], state["step_size"]
            state["step"] += 1
            sign = grad.mul(prev).sign()
            positive, negative, zero = sign.gt(0), sign.lt(0), sign.eq(0)
            sign.masked_fill_(positive, etaplus)
            sign.masked_fill_(negative, etaminus)
            sign.masked_fill_(zero, 1)
            step_size.mul_(sign).clamp_(step_size_min, step_size_max)
            grad = grad.clone()
            grad.masked_fill_(sign.eq(etaminus), 0)
            p.addcmul_(grad.sign(), step_size, value=-1)
            prev.copy_(grad)
