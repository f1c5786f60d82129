"""Muon (Jordan et al., 2024): momentum SGD on 2-d parameters whose update is orthogonalised by a
quintic Newton-Schulz iteration, as ``torch.optim.Muon`` does it."""
from __future__ import annotations

import math
from typing import Any

from ..core.creation import zeros_like
from ..core.tensor import Tensor
from .optimizer import Optimizer, scalar

__all__ = ["Muon"]


def _orthogonalize(g: Tensor, coefficients: tuple, steps: int, eps: float) -> Tensor:
    """Approximately ``U V^T`` of ``g = U S V^T`` (singular values pushed into ~[0.5, 1.5]). PyTorch
    iterates in bfloat16; this iterates in the parameter's dtype, so results agree to bfloat16 precision."""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    tall = g.shape[0] > g.shape[1]
    x = g.t() if tall else g
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.t()
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.t() if tall else x


def _adjusted_lr(lr: float, rule: str | None, shape) -> float:
    rows, cols = shape[:2]
    if rule is None or rule == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if rule == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    """``torch.optim.Muon`` for 2-d parameters (use another optimizer for biases and embeddings)."""

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple = (3.4445, -4.775, 2.0315), eps: float = 1e-7,
                 ns_steps: int = 5, adjust_lr_fn: str | None = None):
        if not 0.0 <= scalar(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{tuple(p.shape)}")

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, wd, mom = scalar(group["lr"]), group["weight_decay"], group["momentum"]
        for p, grad, state in self._with_grads(group):
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            if not state:
                state["momentum_buffer"] = zeros_like(grad)
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - mom)
            update = grad.lerp(buf, mom) if group["nesterov"] else buf
            update = _orthogonalize(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
            p.mul_(1 - lr * wd)
            p.add_(update, alpha=-_adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
