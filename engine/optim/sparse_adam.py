"""SparseAdam: Adam's moments and step on the rows a sparse gradient touches (embedding tables)."""
from __future__ import annotations

import math
from typing import Any

from ..base.coo import COOArray
from ..core.creation import zeros_like
from .optimizer import Optimizer, check_hyper

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """``torch.optim.SparseAdam``: for a sparse gradient (``nn.Embedding(sparse=True)``), the two
    moments and the parameter change only at the gradient's indices, PyTorch's lazy Adam, op for op."""

    _sparse_refusal = None

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False):
        check_hyper("learning rate", lr, 0.0 < lr)
        check_hyper("epsilon value", eps, 0.0 < eps)
        check_hyper("beta parameter at index 0", betas[0], 0.0 <= betas[0] < 1.0)
        check_hyper("beta parameter at index 1", betas[1], 0.0 <= betas[1] < 1.0)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse = [i for group in self.param_groups for i, p in enumerate(group["params"])
                  if type(p._data) is COOArray]
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense parameter tensors")

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, eps, maximize = group["lr"], group["eps"], group["maximize"]
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if type(grad._data) is not COOArray:
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"], state["exp_avg_sq"] = zeros_like(p), zeros_like(p)
            state["step"] += 1
            grad = grad.coalesce()
            rows, values = tuple(grad._indices()), grad._values()
            if maximize:
                values = -values
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            old_avg, old_sq = exp_avg[rows], exp_avg_sq[rows]
            avg_update = values.sub(old_avg).mul_(1 - beta1)
            sq_update = values.pow(2).sub_(old_sq).mul_(1 - beta2)
            exp_avg[rows] = old_avg + avg_update
            exp_avg_sq[rows] = old_sq + sq_update
            numer = avg_update.add_(old_avg)
            denom = sq_update.add_(old_sq).sqrt_().add_(eps)
            step = state["step"]
            step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
            p[rows] = p[rows] + numer.div_(denom).mul_(-step_size)
