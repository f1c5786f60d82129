"""Adam and AdamW (decoupled weight decay), with AMSGrad."""
from __future__ import annotations

from typing import Any

from ..core.creation import tensor, zeros_like
from ..core.tensor import Tensor
from . import _foreach
from .optimizer import Optimizer, check_hyper, check_single_tensor, scalar

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``torch.optim.Adam``; the update follows PyTorch's single-tensor implementation op for op,
    on a group's arrays at once while nobody watches (``_foreach.py``; ``foreach=False`` opts out)."""

    _sparse_refusal = "Adam does not support sparse gradients, please consider SparseAdam instead"

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("epsilon value", eps, 0.0 <= eps)
        check_hyper("beta parameter at index 0", betas[0], 0.0 <= scalar(betas[0]) < 1.0)
        check_hyper("beta parameter at index 1", betas[1], 0.0 <= scalar(betas[1]) < 1.0)
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        check_single_tensor(defaults)
        _foreach.check_fused(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = (scalar(b) for b in group["betas"])
        lr, eps, weight_decay = scalar(group["lr"]), group["eps"], group["weight_decay"]
        amsgrad, decoupled = group["amsgrad"], group["decoupled_weight_decay"]
        capturable = group["capturable"]
        if not capturable and _foreach.multi_tensor(group):
            _foreach.adam(self, group, lr, beta1, beta2)
            return
        for p, grad, state in self._with_grads(group):
            if not state:
                state["step"] = 0.0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            if capturable:  # the count is a tensor, so a captured step's replays keep counting
                if not isinstance(state["step"], Tensor):
                    state["step"] = tensor(float(state["step"]))
                state["step"].add_(1)
                step = None
            else:
                step = state["step"] = state["step"] + 1
            if weight_decay != 0:
                if decoupled:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(p, alpha=weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if capturable:
                _capturable_update(p, state, exp_avg, exp_avg_sq, beta1, beta2, lr, eps, amsgrad)
                continue
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            if amsgrad:
                max_sq = state["max_exp_avg_sq"]
                max_sq.copy_(max_sq.maximum(exp_avg_sq))
                denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            else:
                denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)


def _capturable_update(p, state, exp_avg, exp_avg_sq, beta1, beta2, lr, eps, amsgrad) -> None:
    """PyTorch's ``capturable=True`` branch, op for op: bias corrections from the step tensor."""
    step = state["step"]
    step_size_neg = -(lr / (1 - beta1 ** step))
    bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
    if amsgrad:
        max_sq = state["max_exp_avg_sq"]
        max_sq.copy_(max_sq.maximum(exp_avg_sq))
        second = max_sq
    else:
        second = exp_avg_sq
    denom = (second.sqrt() / (bias_correction2_sqrt * step_size_neg)).add_(eps / step_size_neg)
    p.addcdiv_(exp_avg, denom)


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam whose weight decay shrinks the parameters directly."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
