"""Adagrad: per-coordinate steps shrinking with the accumulated squared gradients."""
from __future__ import annotations

from typing import Any

from ..core.creation import full_like
from ..ops.conjugation import view_as_real
from ..base.coo import COOArray
from .optimizer import Optimizer, check_hyper, check_single_tensor, dense_grad, scalar

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """``torch.optim.Adagrad``; the update follows PyTorch's single-tensor implementation op for op."""

    _sparse_refusal = None

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10,
                 foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        check_hyper("learning rate", lr, 0.0 <= scalar(lr))
        check_hyper("lr_decay value", lr_decay, 0.0 <= lr_decay)
        check_hyper("weight_decay value", weight_decay, 0.0 <= weight_decay)
        check_hyper("initial_accumulator_value value", initial_accumulator_value,
                    0.0 <= initial_accumulator_value)
        check_hyper("epsilon value", eps, 0.0 <= eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        check_single_tensor(defaults)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group: dict[str, Any]) -> dict[str, Any]:
        # PyTorch creates Adagrad's state eagerly, so state_dict() lists every parameter
        state = self.state[p]
        state["step"] = 0.0
        state["sum"] = full_like(p, group["initial_accumulator_value"])
        return state

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, lr_decay, eps = scalar(group["lr"]), group["lr_decay"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if type(grad._data) is COOArray:   # PyTorch's sparse update is the dense one on its rows
                if weight_decay != 0:
                    raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                grad = dense_grad(grad)
            state = self.state[p] or self._init_state(p, group)
            step = state["step"] = state["step"] + 1
            if maximize:
                grad = -grad
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            clr = lr / (1 + (step - 1) * lr_decay)
            state_sum = state["sum"]
            if p._data.dtype.kind == "c":   # PyTorch updates complex parameters as (real, imag) pairs
                p, grad, state_sum = view_as_real(p), view_as_real(grad), view_as_real(state_sum)
            state_sum.addcmul_(grad, grad, value=1)
            std = state_sum.sqrt().add_(eps)
            p.addcdiv_(grad, std, value=-clr)
