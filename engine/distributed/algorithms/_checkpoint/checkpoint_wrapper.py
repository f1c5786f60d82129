"""``torch.distributed.algorithms._checkpoint.checkpoint_wrapper``: a submodule wrapped so that its
forward runs under ``utils.checkpoint`` (or keeps its saved tensors on the host), while parameter
names and ``state_dict`` keys stay those of the unwrapped module, so checkpoints load either way.
spikingjelly's ``memopt`` builds its checkpointed modules on ``checkpoint_wrapper``."""
from __future__ import annotations

import abc
import enum
import functools
from typing import Any, Callable, Iterator

from ....autograd.graph import save_on_cpu
from ....nn.modules.module import Module
from ....utils.checkpoint import checkpoint as _utils_checkpoint

__all__ = ["CheckpointImpl", "ActivationWrapper", "CheckpointWrapper", "OffloadWrapper", "checkpoint_wrapper",
           "offload_wrapper", "apply_activation_checkpointing"]

_CHECKPOINT_WRAPPED_MODULE = "_checkpoint_wrapped_module"
_CHECKPOINT_PREFIX = _CHECKPOINT_WRAPPED_MODULE + "."


class CheckpointImpl(enum.Enum):
    REENTRANT = enum.auto()
    NO_REENTRANT = enum.auto()


def _move_prefix(state_dict: dict, old: str, new: str) -> None:
    """Rename the keys under ``old`` to sit under ``new`` instead, in place."""
    for key in [k for k in state_dict if k.startswith(old)]:
        state_dict[new + key[len(old):]] = state_dict.pop(key)


class ActivationWrapper(Module, abc.ABC):
    """The common part: the wrapped module under ``_checkpoint_wrapped_module``, attribute and item
    reads passed through to it, and its parameter names and state-dict keys shown without the prefix."""

    def __init__(self, mod: Module):
        super().__init__()
        self._checkpoint_wrapped_module = mod
        self._register_state_dict_hook(self._post_state_dict_hook)
        self.register_load_state_dict_pre_hook(self._pre_load_state_dict_hook)

    @abc.abstractmethod
    def forward(self, *args, **kwargs):
        """Each wrapper's own forward."""

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._checkpoint_wrapped_module, name)

    def __getitem__(self, key):
        return self._checkpoint_wrapped_module[key]

    def named_parameters(self, *args, **kwargs) -> Iterator[tuple[str, Any]]:
        for name, param in super().named_parameters(*args, **kwargs):
            yield name.replace(_CHECKPOINT_PREFIX, ""), param

    @staticmethod
    def _post_state_dict_hook(module: Module, state_dict: dict, prefix: str, *args) -> dict:
        _move_prefix(state_dict, prefix + _CHECKPOINT_PREFIX, prefix)
        return state_dict

    @staticmethod
    def _pre_load_state_dict_hook(module: Module, state_dict: dict, prefix: str, *args) -> None:
        _move_prefix(state_dict, prefix, prefix + _CHECKPOINT_PREFIX)


class OffloadWrapper(ActivationWrapper):
    """The wrapped forward's saved tensors are kept in host memory until backward."""

    def forward(self, *args, **kwargs):
        with save_on_cpu(pin_memory=True):
            return self._checkpoint_wrapped_module(*args, **kwargs)


class CheckpointWrapper(ActivationWrapper):
    """The wrapped forward runs through ``checkpoint_fn`` (a ``functools.partial`` holding the extra
    keyword arguments; ``utils.checkpoint`` by default)."""

    def __init__(self, mod: Module, checkpoint_impl: CheckpointImpl = CheckpointImpl.NO_REENTRANT,
                 checkpoint_fn: Callable | None = None, **checkpoint_fn_kwargs):
        super().__init__(mod)
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            checkpoint_fn = functools.partial(_utils_checkpoint, use_reentrant=checkpoint_impl == CheckpointImpl.REENTRANT)
        self.checkpoint_fn = functools.partial(checkpoint_fn, **checkpoint_fn_kwargs)

    def forward(self, *args, **kwargs):
        module = self._checkpoint_wrapped_module
        if self.checkpoint_impl != CheckpointImpl.REENTRANT or not kwargs:
            return self.checkpoint_fn(module, *args, **kwargs)
        # the reentrant form passes positional inputs only: keyword values travel after them
        keys, n = tuple(kwargs), len(args)

        def call(*flat):
            return module(*flat[:n], **dict(zip(keys, flat[n:])))
        return self.checkpoint_fn(call, *args, *kwargs.values())


def checkpoint_wrapper(module: Module, checkpoint_impl: CheckpointImpl = CheckpointImpl.NO_REENTRANT,
                       checkpoint_fn: Callable | None = None, **checkpoint_fn_kwargs) -> Module:
    """``module`` wrapped in a ``CheckpointWrapper``."""
    return CheckpointWrapper(module, checkpoint_impl, checkpoint_fn, **checkpoint_fn_kwargs)


def offload_wrapper(module: Module) -> Module:
    """``module`` wrapped in an ``OffloadWrapper``."""
    return OffloadWrapper(module)


def apply_activation_checkpointing(model: Module, checkpoint_wrapper_fn: Callable = checkpoint_wrapper,
                                   check_fn: Callable[[Module], bool] = lambda _: True,
                                   auto_wrap_policy: Callable | None = None) -> None:
    """Replace, in place, each submodule of ``model`` (not ``model`` itself) that ``check_fn`` (or
    ``auto_wrap_policy(module, recurse=False, nonwrapped_numel=...)``) selects by
    ``checkpoint_wrapper_fn(submodule)``, children before their parents, as FSDP's auto-wrap walks."""
    def policy(module: Module, recurse: bool, nonwrapped_numel: int) -> bool:
        if auto_wrap_policy is not None:
            return auto_wrap_policy(module=module, recurse=recurse, nonwrapped_numel=nonwrapped_numel)
        return recurse or check_fn(module)

    def walk(module: Module, is_root: bool) -> tuple[Module, int]:
        """The module, wrapped if chosen, and the number of its parameters inside wrappers."""
        numel = sum(p.numel() for p in module.parameters())
        if not policy(module, True, numel):
            return module, 0
        wrapped_numel = 0
        for name, child in module.named_children():
            new_child, n = walk(child, False)
            if new_child is not child:
                setattr(module, name, new_child)
            wrapped_numel += n
        if not is_root and policy(module, False, numel - wrapped_numel):
            return checkpoint_wrapper_fn(module), numel
        return module, wrapped_numel
    walk(model, True)
