"""Module calls ``trace_from_tape`` records as other ops than their eager forward runs.

A train-mode ``BatchNorm`` with ``momentum=None`` keeps a cumulative average: its factor is
``1 / num_batches_tracked``, which the eager forward reads to the host (``float(...)``, as
PyTorch's does). Recorded as is, that read would bake the first step's factor into the graph.
Here the factor is a 0-d float64 tensor op, so every replay computes its own step's factor. The
running-statistics arithmetic is ``F.batch_norm``'s (``update_running_stats``), with the factor cast
to the statistics' dtype first, so the values are bitwise eager's (a float32 times the float32 of a
Python float).
"""
from __future__ import annotations

from typing import Callable

from ..base import dtype as _dtype
from ..base.grad_mode import no_grad
from ..core.tensor import Tensor
from ..nn import _ops
from ..nn.functional_core import update_running_stats
from ..nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d

__all__ = ["module_lowering"]

_BATCH_NORMS = (BatchNorm1d, BatchNorm2d, BatchNorm3d)      # and the lazy ones, once materialised


def module_lowering(module, args: tuple, kwargs: dict) -> Callable[[], Tensor] | None:
    """The call to record instead of ``module(*args, **kwargs)``, or None to record its forward."""
    if (isinstance(module, _BATCH_NORMS) and type(module).forward is BatchNorm1d.forward and module.training
            and module.momentum is None and module.track_running_stats and module.num_batches_tracked is not None
            and not kwargs and len(args) == 1 and isinstance(args[0], Tensor) and not _hooked(module)):
        x = args[0]
        if (x.ndim in module._dims and x.shape[1] == module.running_mean.numel() == module.running_var.numel()
                and x.numel() // x.shape[1] > 1):        # otherwise the forward raises its own error
            return lambda: _batch_norm_cumulative(module, x)
    return None


def _hooked(module) -> bool:
    return bool(module._forward_pre_hooks or module._forward_hooks or module._backward_hooks
                or module._backward_pre_hooks)


def _batch_norm_cumulative(module: BatchNorm1d, x: Tensor) -> Tensor:
    """``module(x)`` in training mode with ``momentum=None``, its factor computed by tensor ops."""
    out, mean, _, unbiased = _ops.batch_norm_normalize(x, (0, *range(2, x.ndim)), module.eps, module.weight,
                                                        module.bias)
    mean_, var_ = module.running_mean, module.running_var
    with no_grad():
        module.num_batches_tracked.add_(1)
        factor = (1.0 / module.num_batches_tracked.to(_dtype.float64)).to(mean_.dtype)
        update_running_stats(mean_, var_, mean, unbiased, factor, 1 - factor)
    return out
