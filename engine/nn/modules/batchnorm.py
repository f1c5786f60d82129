"""Batch normalisation: BatchNorm1d/2d/3d, SyncBatchNorm and the lazy batch norms."""
from __future__ import annotations

from ...base import dtype as _dtype
from ...base.grad_mode import no_grad
from ...core import creation
from ...core.tensor import Tensor
from .. import functional as F, init
from ..parameter import Parameter, UninitializedBuffer, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module


__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d"]


def _affine(module: Module, shape: tuple, affine: bool, bias: bool, device, dtype) -> None:
    """Registers ``weight`` (ones) and ``bias`` (zeros), or None for each one switched off."""
    if affine:
        module.weight = Parameter(creation.ones(shape, device=device, dtype=dtype))
    else:
        module.register_parameter("weight", None)
    if affine and bias:
        module.bias = Parameter(creation.zeros(shape, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)


class _NormBase(Module):
    """The state batch and instance norms share: affine parameters and running statistics. (PyTorch's
    split: ``_InstanceNorm`` is a ``_NormBase`` but no ``_BatchNorm``, so ``update_bn`` and the libraries
    that freeze or exclude batch norms by ``isinstance(m, _BatchNorm)`` leave instance norms alone,
    while profilers such as thop count both through ``_NormBase``.)"""

    _dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", creation.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=_dtype.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _fill_state_defaults(self, prefix: str, state_dict: dict) -> None:
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict[key] = self.num_batches_tracked if self.num_batches_tracked is not None else \
                creation.tensor(0, dtype=_dtype.int64)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """Per-channel normalisation by batch statistics, tracking running estimates for eval."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                            self.weight, self.bias, use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    _dims = (5,)


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose statistics span every process of a group; with no process group (one process,
    as here) it is ``BatchNorm`` over inputs of any rank >= 2, as PyTorch falls back to."""

    _dims = tuple(range(2, 65))

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every BatchNorm layer replaced by a SyncBatchNorm sharing its tensors."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm) and \
                type(module).__name__.startswith("BatchNorm"):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                with no_grad():
                    out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


class _LazyNormMixin(LazyModuleMixin):
    """``num_features`` from the channel dim of the first input."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None):
        super().__init__(0, eps, momentum, affine, track_running_stats, device, dtype)
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
        self._lazy_init()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[self._feature_dim(input)]
        n = (self.num_features,)
        self._materialize_all({"weight": n, "bias": n, "running_mean": n, "running_var": n})


class _LazyBatchNorm(_LazyNormMixin):
    @staticmethod
    def _feature_dim(input: Tensor) -> int:
        return 1


def _lazy_norm(name: str, mixin: type, eager: type, module: str = __name__) -> type:
    doc = f"``{eager.__name__}`` whose ``num_features`` comes from the first input."
    return type(name, (mixin, eager), {"cls_to_become": eager, "__doc__": doc, "__module__": module})


LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", _LazyBatchNorm, BatchNorm1d)


LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", _LazyBatchNorm, BatchNorm2d)


LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", _LazyBatchNorm, BatchNorm3d)
