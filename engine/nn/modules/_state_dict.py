"""``Module.state_dict`` and ``load_state_dict`` with PyTorch's extension points.

Checkpoint code reaches into these: modules override ``_save_to_state_dict`` and
``_load_from_state_dict`` to rename old keys, libraries register load pre-hooks that rewrite a
checkpoint before it is read (``_register_load_state_dict_pre_hook``), post-hooks that add or
drop entries, and ``get_extra_state``/``set_extra_state`` carry non-tensor state. The walk is
PyTorch's: a module saves its own tensors, then its children's under ``prefix + name + "."``;
loading hands each child the entries under its prefix after the parent's pre-hooks ran, and
``_metadata`` (each module's ``_version``) travels with the dict both ways.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from types import MappingProxyType
from typing import Any, Callable

from ...base.grad_mode import no_grad
from ...core.hooks import RemovableHandle
from ...core.overrides import handle_torch_function, is_tensor_like
from ...core.tensor import Tensor
from ..parameter import Parameter

__all__ = ["StateDict", "RemovableHandle"]

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"   # the state-dict key of get_extra_state()'s value (PyTorch's name)

_NONE = MappingProxyType({})     # a module's hooks until it registers one (read-only, shared)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _load_into(mod, name: str, current: Tensor, value: Tensor, assign: bool) -> None:
    with no_grad():
        if assign:
            if name in mod._parameters:
                mod._parameters[name] = Parameter(value.detach(), current.requires_grad)
            else:
                mod._buffers[name] = value.detach()
        elif isinstance(value, Tensor):
            current.copy_(value.detach())
        else:   # a tensor-like (Lightning's lazily loaded tensor) is handed the copy, as PyTorch's copy_ hands it
            handle_torch_function(Tensor.copy_, (current, value), current, value)


class StateDict:
    """The state-dict half of ``Module`` (a mixin: it reads ``_parameters``, ``_buffers``,
    ``_non_persistent_buffers_set``, ``_modules`` and ``_version``)."""

    _state_dict_pre_hooks = _state_dict_hooks = _load_state_dict_pre_hooks = _load_state_dict_post_hooks = _NONE

    def _add_hook(self, kind: str, hook: Callable) -> RemovableHandle:
        """Register ``hook`` in this module's own dict ``kind`` (made on first use)."""
        hooks = self.__dict__.get(kind)
        if hooks is None:
            hooks = self.__dict__[kind] = OrderedDict()
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    # ---------------------------------------------------------------- registering hooks
    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)`` runs before this module saves its state."""
        return self._add_hook("_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after; it edits the dict in place."""
        def post(module, state_dict, prefix, local_metadata):
            if hook(module, state_dict, prefix, local_metadata) is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return self._register_state_dict_hook(post)

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)``; a non-None result replaces the dict."""
        return self._add_hook("_state_dict_hooks", hook)

    def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False) -> RemovableHandle:
        """``hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` (the module first with ``with_module``) runs before this module reads its keys."""
        return self._add_hook("_load_state_dict_pre_hooks", (lambda *args: hook(self, *args)) if with_module else hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` runs before this module reads its keys."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, incompatible_keys)`` runs after this module and its children loaded; it
        may edit the missing and unexpected keys in place."""
        return self._add_hook("_load_state_dict_post_hooks", hook)

    # ---------------------------------------------------------------- extra state
    def get_extra_state(self) -> Any:
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called. Please "
                           "file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
                           "to report this bug.")

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called. Please "
                           "file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
                           "to report this bug.")

    def _has_extra_state(self, which: str) -> bool:
        return getattr(type(self), which) is not getattr(StateDict, which)

    # ---------------------------------------------------------------- saving
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """This module's own parameters and persistent buffers (and extra state), not its children's."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state("get_extra_state"):
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by qualified name (detached unless ``keep_vars``)."""
        if args:   # PyTorch's deprecated positional form: (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if result is not None:
                destination = result
        return destination

    # ---------------------------------------------------------------- loading
    def _fill_state_defaults(self, prefix: str, state_dict: dict) -> None:
        """Add entries older checkpoints may lack (BatchNorm's ``num_batches_tracked``)."""

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        """Read this module's own entries of ``state_dict`` (its children read theirs)."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        self._fill_state_defaults(prefix, state_dict)
        local = {k: v for k, v in itertools.chain(
            self._parameters.items(),
            ((k, b) for k, b in self._buffers.items() if k not in self._non_persistent_buffers_set)) if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, current in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not is_tensor_like(value):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                  f"Tensor-like object from checkpoint but received {type(value)}")
                continue
            if value.shape != current.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {value.shape} "
                                  f"from checkpoint, the shape in current model is {current.shape}.")
                continue
            try:
                _load_into(self, name, current, value, assign)
            except Exception as ex:  # noqa: BLE001 - reported as PyTorch reports it
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{current.size()} and whose dimensions in the checkpoint are {value.size()}, "
                                  f"an exception occurred : {ex.args}.")
        extra = prefix + _EXTRA_STATE_KEY_SUFFIX
        if self._has_extra_state("set_extra_state"):
            if extra in state_dict:
                self.set_extra_state(state_dict[extra])
            elif strict:
                missing_keys.append(extra)
        elif strict and extra in state_dict:
            unexpected_keys.append(extra)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra:
                    head = key[len(prefix):].split(".", 1)
                    if (len(head) > 1 and head[0] not in self._modules) or (len(head) == 1 and head[0] not in local):
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy values into parameters and buffers in place (or, with ``assign``, take them);
        report or raise on key mismatches."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state: dict, prefix: str = "") -> None:
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = True
            module._load_from_state_dict(local_state, prefix, local_metadata, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state.items() if k.startswith(child_prefix)}, child_prefix)
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, keys) is not None:
                    raise RuntimeError("load_state_dict post-hook must return None")
        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__,
                                                                                   "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)
