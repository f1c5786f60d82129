"""``torch.nn.utils.prune``: masks that zero parts of a module's tensor (lottery tickets, compression).

Pruning ``module.<name>`` moves the Parameter to ``<name>_orig``, stores a ``<name>_mask`` buffer
and registers the pruning method itself as a forward pre-hook that sets the plain attribute
``<name> = <name>_orig * <name>_mask`` before every call, so state_dict keys are PyTorch's and
gradients reach ``<name>_orig`` only through the kept entries. Pruning the same tensor again
wraps the methods in a ``PruningContainer`` whose new mask is computed on the still-unpruned part.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from ...core import creation
from ...core.tensor import Tensor
from ...ops.reduce import norm
from ...ops.sort import kthvalue, topk
from ..modules.module import Module
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured",
           "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A pruning recipe: ``compute_mask`` says what to keep; ``apply`` installs it on a module."""

    PRUNING_TYPE: str
    _tensor_name: str | None = None

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask for ``t`` (importance scores) that also keeps ``default_mask``'s zeros."""

    def apply_mask(self, module: Module) -> Tensor:
        """``<name>_orig * <name>_mask`` in the original's dtype."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module: Module, name: str, *args: Any, importance_scores: Tensor | None = None,
              **kwargs: Any) -> "BasePruningMethod":
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``, chaining any earlier method."""
        method = _compose(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        elif importance_scores.shape != orig.shape:
            raise AssertionError(f"importance_scores should have the same shape as parameter {name} of "
                                 f"{module}, got {importance_scores.shape} vs {orig.shape}")
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = creation.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            module.register_buffer(name + "_mask", method.compute_mask(importance_scores, default_mask))
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:  # leave the module as it was
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """``t`` times the mask computed from ``importance_scores`` (``t`` itself by default)."""
        if importance_scores is None:
            importance_scores = t
        elif importance_scores.shape != t.shape:
            raise AssertionError("importance_scores should have the same shape as tensor t, "
                                 f"got {importance_scores.shape} vs {t.shape}")
        if default_mask is None:
            default_mask = creation.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module: Module) -> None:
        """Make the pruning permanent: ``<name>`` becomes a plain Parameter holding the pruned values."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        pruned = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters.pop(name + "_orig")
        orig.data = pruned.data
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _compose(cls: type, module: Module, name: str, *args: Any, **kwargs: Any) -> BasePruningMethod:
    """The new method, or the container chaining it after the hook already pruning ``name``."""
    keys = [k for k, hook in module._forward_pre_hooks.items()
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    if len(keys) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                             f"{module}. Use a PruningContainer.")
    old = module._forward_pre_hooks.pop(keys[0]) if keys else None
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old is None:
        return method
    container = old if isinstance(old, PruningContainer) else PruningContainer(old)
    container.add_pruning_method(method)
    return container


class PruningContainer(BasePruningMethod):
    """The sequence of methods applied to one tensor; the last one prunes what the others kept."""

    def __init__(self, *methods: BasePruningMethod) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if methods:
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if method is not None and not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError("Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. "
                             f"Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx: int) -> BasePruningMethod:
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Run the last method on the entries (unstructured), the channels (structured) or the
        whole tensor (global) that ``default_mask`` still keeps, and merge its mask back."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            kept = mask == 1
            mask[kept] = method.compute_mask(t[kept], default_mask=mask[kept]).to(dtype=mask.dtype)
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the '
                                     "attribute `dim` defined.")
            dim = method.dim + t.dim() if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {t.dim()}")
            others = [d for d in range(t.dim()) if d != dim]
            channels = (mask.sum(dim=others) != 0).nonzero().reshape(-1)
            partial = method.compute_mask(t.index_select(dim, channels),
                                          default_mask=mask.index_select(dim, channels))
            mask.index_copy_(dim, channels, partial.to(dtype=mask.dtype))
        elif kind == "global":
            mask = method.compute_mask(t, default_mask=mask).to(dtype=mask.dtype)
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing: installs the ``_orig`` / ``_mask`` mechanism with a mask of ones."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str) -> "Identity":  # type: ignore[override]
        return super().apply(module, name)


class _Unstructured(BasePruningMethod):
    """Zeroes the ``amount`` entries that ``_scores`` ranks lowest."""

    PRUNING_TYPE = "unstructured"
    _largest = False   # which end of the scores is pruned

    def __init__(self, amount: int | float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def _scores(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        count = _compute_nparams_toprune(self.amount, t.numel())
        _validate_pruning_amount(count, t.numel())
        flat = default_mask.clone().reshape(-1)
        if count:
            flat[topk(self._scores(t).reshape(-1), count, largest=self._largest).indices] = 0
        return flat.reshape(default_mask.shape)


class RandomUnstructured(_Unstructured):
    """Zeroes ``amount`` entries drawn uniformly: those whose ``rand_like`` draw is largest, as PyTorch's (the
    same draws, so the same positions, after the same seed)."""

    _largest = True

    def _scores(self, t: Tensor) -> Tensor:
        return creation.rand_like(t)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float) -> "RandomUnstructured":  # type: ignore[override]
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Zeroes the ``amount`` entries of smallest absolute value."""

    def _scores(self, t: Tensor) -> Tensor:
        return t.abs()

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,  # type: ignore[override]
              importance_scores: Tensor | None = None) -> "L1Unstructured":
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Zeroes whole slices (channels) along ``dim``; ``_keep`` picks the channels kept."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def _keep(self, t: Tensor, count: int) -> Tensor:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        channels = t.shape[self.dim]
        count = _compute_nparams_toprune(self.amount, channels)
        _validate_pruning_amount(count, channels)
        if count == 0:
            return default_mask
        shape = [1] * t.dim()
        shape[self.dim] = channels
        keep = self._keep(t, count).to(dtype=t.dtype).reshape(shape)
        return (creation.zeros_like(t) + keep) * default_mask.to(dtype=t.dtype)


class RandomStructured(_Structured):
    """Zeroes ``amount`` channels along ``dim`` drawn uniformly."""

    def _keep(self, t: Tensor, count: int) -> Tensor:
        prob = creation.rand(t.shape[self.dim])
        return prob > kthvalue(prob, count).values

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,  # type: ignore[override]
              dim: int = -1) -> "RandomStructured":
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Zeroes the ``amount`` channels along ``dim`` of smallest L``n`` norm (``n`` as ``torch.norm``'s p)."""

    def __init__(self, amount: int | float, n: Any, dim: int = -1) -> None:
        super().__init__(amount, dim)
        self.n = n

    def _keep(self, t: Tensor, count: int) -> Tensor:
        dim = self.dim % t.dim()
        norms = norm(t, p=self.n, dim=[d for d in range(t.dim()) if d != dim])
        keep = creation.zeros(t.shape[dim], dtype=t.dtype)
        keep[topk(norms, t.shape[dim] - count, largest=True).indices] = 1
        return keep

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float, n: Any,  # type: ignore[override]
              dim: int, importance_scores: Tensor | None = None) -> "LnStructured":
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Applies a given mask (on top of any earlier one)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match "
                                 f"self.mask shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor) -> "CustomFromMask":  # type: ignore[override]
        return super().apply(module, name, mask=mask)


def identity(module: Module, name: str) -> Module:
    """Install the pruning mechanism on ``module.<name>`` with nothing pruned (a mask of ones)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: int | float) -> Module:
    """Prune ``amount`` of the still-kept entries of ``module.<name>``, chosen at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount: int | float,
                    importance_scores: Tensor | None = None) -> Module:
    """Prune the ``amount`` still-kept entries of smallest magnitude (of ``importance_scores`` if given)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: int | float, dim: int) -> Module:
    """Prune ``amount`` of the still-kept channels along ``dim``, chosen at random."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount: int | float, n: Any, dim: int,
                  importance_scores: Tensor | None = None) -> Module:
    """Prune the ``amount`` still-kept channels along ``dim`` of smallest L``n`` norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune where ``mask`` is 0, on top of any earlier mask."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters: Iterable, pruning_method: type, importance_scores: dict | None = None,
                        **kwargs: Any) -> None:
    """Rank the entries of all ``(module, name)`` tensors together and prune each by its share."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    masks = [getattr(m, n + "_mask", None) for m, n in parameters]
    default_mask = parameters_to_vector([creation.ones_like(getattr(m, n)) if mask is None else mask
                                         for (m, n), mask in zip(parameters, masks)])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    final = PruningContainer(method).compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=final[start:start + param.numel()].view_as(param))
        start += param.numel()


def remove(module: Module, name: str) -> Module:
    """Make the pruning of ``module.<name>`` permanent and drop its hook, ``_orig`` and ``_mask``."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module: Module) -> bool:
    """Whether any submodule carries a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, sub in module.named_modules() for hook in sub._forward_pre_hooks.values())


def _validate_pruning_amount_init(amount: Any) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (amount < 0) if isinstance(amount, numbers.Integral) else not 0.0 <= float(amount) <= 1.0:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         "non-negative integer")


def _validate_pruning_amount(amount: int, tensor_size: int) -> None:
    if amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={tensor_size}")


def _validate_structured_pruning(t: Tensor) -> None:
    if t.dim() <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. Found "
                         f"tensor of shape {t.shape} with {t.dim()} dims")


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _compute_nparams_toprune(amount: int | float, tensor_size: int) -> int:
    return amount if isinstance(amount, numbers.Integral) else round(amount * tensor_size)
