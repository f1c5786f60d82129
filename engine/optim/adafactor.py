"""Adafactor (Shazeer & Stern, 2018): Adam-like steps whose second moment is kept as row and column
factors for matrices, in PyTorch's formulation (relative step size, update clipping by ``d``)."""
from __future__ import annotations

from typing import Any

from ..base.dtype import finfo
from ..core.creation import zeros, zeros_like
from .optimizer import Optimizer, scalar

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """``torch.optim.Adafactor``; the update follows PyTorch's single-tensor implementation."""

    def __init__(self, params, lr: float = 1e-2, beta2_decay: float = -0.8, eps: tuple = (None, 1e-3),
                 d: float = 1.0, weight_decay: float = 0.0, *, foreach: bool | None = None, maximize: bool = False):
        if not 0.0 <= scalar(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not beta2_decay <= 0.0:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, beta2_decay, d, weight_decay = scalar(group["lr"]), group["beta2_decay"], group["d"], group["weight_decay"]
        eps1, eps2 = group["eps"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                if grad.ndim > 1:
                    state["row_var"] = zeros(tuple(grad.shape[:-1]) + (1,), dtype=grad.dtype, device=grad.device)
                    state["col_var"] = zeros(tuple(grad.shape[:-2]) + (1, grad.shape[-1]), dtype=grad.dtype,
                                             device=grad.device)
                else:
                    state["variance"] = zeros_like(grad)
            e1 = finfo(p.dtype).eps if eps1 is None else eps1
            step = state["step"] = state["step"] + 1
            one_minus_beta2 = step ** beta2_decay
            rho = min(lr, 1 / step ** 0.5)
            alpha = max(eps2, p.norm(2).item() / p.numel() ** 0.5) * rho
            if weight_decay != 0:
                p.mul_(1 - lr * weight_decay)
            if grad.ndim > 1:
                row_var, col_var = state["row_var"], state["col_var"]
                row_var.lerp_(grad.norm(dim=-1, keepdim=True).square() / grad.shape[-1], one_minus_beta2)
                col_var.lerp_(grad.norm(dim=-2, keepdim=True).square() / grad.shape[-2], one_minus_beta2)
                var = (row_var @ col_var) / row_var.mean(-2, keepdim=True).clamp(min=e1)
            else:
                state["variance"].lerp_(grad * grad, one_minus_beta2)
                var = state["variance"].clone()
            update = var.clamp(min=e1 * e1).rsqrt() * grad
            denom = max(1.0, update.norm(2).item() / (update.numel() ** 0.5 * d))
            p.add_(update, alpha=-alpha / denom)
