"""ASGD: averaged stochastic gradient descent (Polyak and Juditsky, 1992)."""
from __future__ import annotations

from typing import Any

from ..core.creation import tensor, zeros_like
from .nadam import scalar_dtype
from .optimizer import Optimizer, check_hyper, check_single_tensor, scalar

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """``torch.optim.ASGD``; the update follows PyTorch's single-tensor implementation op for op.

    ``eta`` and ``mu`` are 0-d tensors of the default scalar dtype, as in PyTorch (so their
    float32 rounding is PyTorch's); ``ax`` holds the running average of the parameter.
    """

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        check_single_tensor(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, lambd, alpha, t0 = scalar(group["lr"]), group["lambd"], group["alpha"], group["t0"]
        weight_decay = group["weight_decay"]
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["eta"] = tensor(lr, dtype=scalar_dtype())
                state["mu"] = tensor(1.0, dtype=scalar_dtype())
                state["ax"] = zeros_like(p)
            mu, ax, eta = state["mu"], state["ax"], state["eta"]
            step = state["step"] = state["step"] + 1
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            eta_value = eta.item()
            p.mul_(1 - lambd * eta_value)
            p.add_(grad, alpha=-eta_value)
            if mu.item() != 1:
                ax.add_(p.sub(ax).mul_(mu))
            else:
                ax.copy_(p)
            # torch.as_tensor(number): rounded to the default dtype before the copy
            eta.copy_(tensor(lr / ((1 + lambd * lr * step) ** alpha)))
            mu.copy_(tensor(1 / max(1, step - t0)))
