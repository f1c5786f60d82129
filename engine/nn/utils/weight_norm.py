"""``torch.nn.utils.weight_norm`` (the pre-parametrization form): ``weight_g`` and ``weight_v``
parameters and a forward pre-hook that recomputes ``weight`` before every call."""
from __future__ import annotations

import warnings

from ..modules.module import Module
from ..parameter import Parameter, UninitializedParameter
from .parametrizations import _norm_except_dim

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


class WeightNorm:
    """The forward pre-hook: sets ``module.<name>`` to ``g * v / ||v||`` (a plain tensor attribute)."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> "WeightNorm":
        # attributed to weight_norm's line (PyTorch's @deprecated on apply does so): shown once, not per caller
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `WeightNorm` can't have uninitialized parameters. "
                             "Make sure to run the dummy forward before applying weight normalization")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Replace ``module.<name>`` by a magnitude ``<name>_g`` and a direction ``<name>_v``
    (deprecated in PyTorch in favour of ``parametrizations.weight_norm``, still widely used)."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Put ``module.<name>`` back as one Parameter holding the current normalised weight."""
    return remove_pre_hook(module, WeightNorm, name, "weight_norm")


def remove_pre_hook(module: Module, kind: type, name: str, label: str) -> Module:
    """Undo the older hook-based form ``kind`` (weight norm, spectral norm) of ``module.<name>``."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"{label} of '{name}' not found in {module}")
