"""Gradient clipping by total norm and by value (in place, unrecorded)."""
from __future__ import annotations

from typing import Iterable

from ...core import creation
from ...base.grad_mode import no_grad
from ...ops.movement import stack
from ...core.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(parameters) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _vector_norm(t: Tensor, norm_type: float) -> Tensor:
    if norm_type == float("inf"):
        return t.abs().amax()
    if norm_type == float("-inf"):
        return t.abs().amin()
    if norm_type == 0:
        return (t != 0).sum().to(t.dtype)
    return (t.abs() ** norm_type).sum() ** (1.0 / norm_type)


@no_grad()
def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The p-norm of all ``tensors`` taken together, as if concatenated into one vector."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return creation.tensor(0.0)
    first = tensors[0].device
    norms = [_vector_norm(t, norm_type).to(first) for t in tensors]
    total = _vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and not bool(total.isfinite()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                           "so it cannot be clipped. To disable this error and scale the gradients by the "
                           "non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach: bool | None = None) -> None:
    """Scale every gradient by ``min(1, max_norm / (total_norm + 1e-6))`` without a host sync."""
    coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.mul_(coef.to(p.grad.device))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Clip the gradients' total norm to ``max_norm`` in place; returns the norm before clipping."""
    parameters = _as_list(parameters)
    total = get_total_norm([p.grad for p in parameters if p.grad is not None], norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.clamp_(-clip_value, clip_value)
