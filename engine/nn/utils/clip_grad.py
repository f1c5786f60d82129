"""Gradient clipping by total norm and by value (in place, unrecorded).

``clip_grad_norm_`` of 2-norms on cpu float32/float64 gradients runs on the arrays while nobody
watches (``STATE.slow`` false), as the optimizers' multi-tensor steps do (``optim/_foreach.py``):
one 2-norm per gradient (``vector_norm``'s, summed in ATen's order) and one in-place multiply,
where the Tensor path dispatched five ops per gradient (1.9 ms against PyTorch's 0.6 on the LSTM
LM step's eleven; bench/README.md, issue 17 session 5). The arithmetic is PyTorch's: each
gradient's norm in its dtype, the norm of those.
"""
from __future__ import annotations

import warnings

from typing import Iterable

import numpy as np

from ...core import creation
from ...base.device import CPU
from ...base.dispatch_state import STATE
from ...base.grad_mode import no_grad
from ...ops.movement import stack
from ...ops.reduce import array_norm2, vector_norm
from ...core.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_", "clip_grad_norm"]


def _as_list(parameters) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


@no_grad()
def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The p-norm of all ``tensors`` taken together, as if concatenated into one vector."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return creation.tensor(0.0)
    first = tensors[0].device
    norms = [vector_norm(t, norm_type).to(first) for t in tensors]
    total = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and not bool(total.isfinite()):
        _nonfinite(norm_type)
    return total


def _nonfinite(norm_type: float):
    raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                       "so it cannot be clipped. To disable this error and scale the gradients by the "
                       "non-finite norm anyway, set `error_if_nonfinite=False`")


@no_grad()
def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach: bool | None = None) -> None:
    """Scale every gradient by ``min(1, max_norm / (total_norm + 1e-6))`` without a host sync."""
    coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.mul_(coef.to(p.grad.device))


def _on_arrays(grads: list[Tensor], norm_type: float, foreach: bool | None) -> bool:
    """Whether the 2-norm clip may run on the arrays: allowed, nobody watching, and every gradient
    a cpu float32 or float64 array of one dtype that records nothing."""
    if foreach is False or STATE.slow or norm_type != 2.0 or not grads:
        return False
    dtype = grads[0]._data.dtype
    return dtype in (np.float32, np.float64) and all(
        g._device is CPU and type(g._data) is np.ndarray and g._data.dtype == dtype and not g.requires_grad
        for g in grads)


def _clip_arrays(grads: list[Tensor], max_norm: float, error_if_nonfinite: bool) -> Tensor:
    """The 2-norm clip on the gradients' arrays, each write counted on its version counter."""
    one = grads[0]._data.dtype.type
    norms = np.array([array_norm2(g._data) for g in grads], dtype=one)
    total = array_norm2(norms)
    if error_if_nonfinite and not np.isfinite(total):
        _nonfinite(2.0)
    coef = min(one(max_norm) / (total + one(1e-6)), one(1.0))
    for g in grads:
        np.multiply(g._data, coef, out=g._data)
        g._vc[0] += 1
    return creation.from_numpy(np.asarray(total))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Clip the gradients' total norm to ``max_norm`` in place; returns the norm before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    if _on_arrays(grads, float(norm_type), foreach):
        return _clip_arrays(grads, max_norm, error_if_nonfinite)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.clamp_(-clip_value, clip_value)


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """Deprecated in PyTorch in favour of ``clip_grad_norm_`` (older programs still call it)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
