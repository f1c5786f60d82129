"""``torch._functorch.make_functional``: functorch's module API from before ``torch.func`` (``import functorch``
serves it): a module's parameters (and buffers) taken out as tuples, and a module that runs a copy of the
model with the tensors it is given. The copy keeps meta stand-ins where its tensors were, as PyTorch's."""
from __future__ import annotations

import copy
from typing import Any, Callable, Iterable, Sequence

from ...core.tensor import Tensor
from ...nn.modules.module import Module
from ...nn.parameter import Parameter
from ...nn.utils.stateless import _swapped
from ...ops.movement import stack

__all__ = ["FunctionalModule", "FunctionalModuleWithBuffers", "make_functional", "make_functional_with_buffers",
           "combine_state_for_ensemble"]


def _extract(model: Module, named: Callable, wrap: Callable) -> tuple[tuple, tuple, dict]:
    """The distinct tensors ``named`` lists (their first names, and every name each goes by, for tied weights),
    each replaced in ``model`` by an empty meta tensor."""
    names_map: dict[int, tuple[str, list]] = {}
    tensors: dict[int, Tensor] = {}
    for name, t in named(remove_duplicate=False):
        names_map.setdefault(id(t), (name, []))[1].append(name)
        tensors[id(t)] = t
    for key, (_, all_names) in names_map.items():
        stand_in = wrap(tensors[key].new_empty(tensors[key].shape, device="meta"))
        for name in all_names:
            owner_name, _, attr = name.rpartition(".")
            owner = model.get_submodule(owner_name) if owner_name else model
            (owner._parameters if attr in owner._parameters else owner._buffers)[attr] = stand_in
    firsts = [first for first, _ in names_map.values()]
    return tuple(tensors[k] for k in names_map), tuple(firsts), dict(names_map.values())


def _run(model: Module, names_map: dict, tensors: Iterable, args: tuple, kwargs: dict) -> Any:
    """``model(*args, **kwargs)`` with each name in ``names_map`` (in order) bound to the next of ``tensors``."""
    bound = {name: t for names, t in zip(names_map.values(), tensors) for name in names}
    with _swapped(model, bound):
        return model(*args, **kwargs)


class FunctionalModule(Module):
    """What ``make_functional`` returns: ``fmodel(params, *args, **kwargs)``."""

    def __init__(self, stateless_model: Module, param_names: tuple, names_map: dict) -> None:
        super().__init__()
        self.stateless_model, self.param_names, self.names_map = stateless_model, param_names, names_map

    @staticmethod
    def _create_from(model: Module, disable_autograd_tracking: bool = False) -> tuple:
        model_copy = copy.deepcopy(model)
        params, names, names_map = _extract(model_copy, model_copy.named_parameters, Parameter)
        if disable_autograd_tracking:
            for p in params:
                p.requires_grad_(False)
        return FunctionalModule(model_copy, names, names_map), params

    def forward(self, params: Iterable[Tensor], *args, **kwargs) -> Any:
        return _run(self.stateless_model, self.names_map, params, args, kwargs)


class FunctionalModuleWithBuffers(Module):
    """What ``make_functional_with_buffers`` returns: ``fmodel(params, buffers, *args, **kwargs)``."""

    def __init__(self, stateless_model: Module, param_names: tuple, buffer_names: tuple, param_names_map: dict,
                 buffer_names_map: dict) -> None:
        super().__init__()
        self.stateless_model, self.param_names, self.buffer_names = stateless_model, param_names, buffer_names
        self.all_names_map = {**param_names_map, **buffer_names_map}

    @staticmethod
    def _create_from(model: Module, disable_autograd_tracking: bool = False) -> tuple:
        model_copy = copy.deepcopy(model)
        params, names, names_map = _extract(model_copy, model_copy.named_parameters, Parameter)
        buffers, buffer_names, buffer_map = _extract(model_copy, model_copy.named_buffers, lambda t: t)
        if disable_autograd_tracking:
            for p in params:
                p.requires_grad_(False)
        return FunctionalModuleWithBuffers(model_copy, names, buffer_names, names_map, buffer_map), params, buffers

    def forward(self, params: Iterable[Tensor], buffers: Iterable[Tensor], *args, **kwargs) -> Any:
        return _run(self.stateless_model, self.all_names_map, (*params, *buffers), args, kwargs)


def make_functional(model: Module, disable_autograd_tracking: bool = False) -> tuple[FunctionalModule, tuple]:
    """``(fmodel, params)``: ``fmodel(params, x)`` runs ``model`` with ``params``; a model with buffers is refused."""
    if any(True for _ in model.buffers()):
        raise RuntimeError("make_functional(model): `model` has buffers. Please use "
                           "make_functional_with_buffers(model) instead.")
    return FunctionalModule._create_from(model, disable_autograd_tracking)


def make_functional_with_buffers(model: Module, disable_autograd_tracking: bool = False) -> tuple:
    """``(fmodel, params, buffers)``: ``fmodel(params, buffers, x)`` runs ``model`` with them."""
    return FunctionalModuleWithBuffers._create_from(model, disable_autograd_tracking)


def combine_state_for_ensemble(models: Sequence[Module]) -> tuple:
    """``(fmodel, params, buffers)`` of same-class models, each param and buffer stacked (detached) along a new
    leading dim, for ``vmap(fmodel, (0, 0, None))``."""
    if len(models) == 0:
        raise RuntimeError("combine_state_for_ensemble: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("combine_state_for_ensemble: Expected all models to have the same training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("combine_state_for_ensemble: Expected all models to be of the same class.")
    funcs, params, buffers = zip(*[make_functional_with_buffers(m) for m in models])
    return (funcs[0], tuple(stack(shards).detach() for shards in zip(*params)),
            tuple(stack(shards).detach() for shards in zip(*buffers)))
