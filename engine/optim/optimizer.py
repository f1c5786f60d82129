"""The Optimizer base: parameter groups, per-parameter state and PyTorch's state_dict format.

Subclasses implement ``_step_group(group)``, which updates the parameters of one group
with in-place Tensor ops; the base runs the closure with grad enabled and every update
under ``no_grad``, so optimizers never touch the backend arrays and work on every device.

The step counter is kept as a Python float in ``state[p]["step"]`` (PyTorch keeps a 0-d
float32 tensor, then reads it back with ``.item()``); ``state_dict()`` exports it as that
tensor and ``load_state_dict`` accepts either form, so the saved format is PyTorch's.
"""
from __future__ import annotations

import copy
import weakref
from collections import OrderedDict, defaultdict
from itertools import chain
from types import MappingProxyType
from typing import Any, Callable, Iterable, Union

from functools import wraps

from ..base import dtype as _dtype
from ..base.coo import COOArray
from ..base.dispatch_state import STATE
from ..base.grad_mode import enable_grad, no_grad
from ..core.dispatch import module_scope
from ..core.hooks import RemovableHandle
from ..core.tensor import Tensor
from ..base.ranges import RECORDING, record_function
from ..ops.conjugation import view_as_complex, view_as_real

__all__ = ["Optimizer", "ParamsT", "required", "live_optimizers", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook"]

# Every Optimizer made and not yet collected (weakly: the registry keeps none alive)
_LIVE: weakref.WeakSet = weakref.WeakSet()


def live_optimizers() -> list:
    """The optimizers alive now. A graph capture reads their Python-number state (a step count)
    before and after: a number advanced during capture would be frozen into every replay."""
    return list(_LIVE)


# What an optimizer takes as ``params`` (PyTorch's annotation; optimizer libraries import it)
ParamsT = Union[Iterable[Tensor], Iterable[dict[str, Any]], Iterable[tuple[str, Tensor]]]


class _RequiredParameter:
    """Marks a default that every parameter group must set (``lr`` of a plain Optimizer)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

_SCALAR_STATE = ("step",)  # state entries kept as Python numbers, exported as float32 tensors


def _step_scope_name(opt) -> str:
    return f"optimizer.step ({type(opt).__name__})"


# Step hooks every optimizer runs (``register_optimizer_step_pre_hook``), and the optimizers in a hooked step now
_GLOBAL_STEP_PRE_HOOKS: OrderedDict = OrderedDict()
_GLOBAL_STEP_POST_HOOKS: OrderedDict = OrderedDict()
_STEPPING: set = set()
_NO_HOOKS = MappingProxyType({})   # an optimizer's hooks until it registers one (read-only, shared)


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(optimizer, args, kwargs)`` runs before every optimizer's step (before its own pre-hooks)."""
    handle = RemovableHandle(_GLOBAL_STEP_PRE_HOOKS)
    _GLOBAL_STEP_PRE_HOOKS[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """``hook(optimizer, args, kwargs)`` runs after every optimizer's step (after its own post-hooks)."""
    handle = RemovableHandle(_GLOBAL_STEP_POST_HOOKS)
    _GLOBAL_STEP_POST_HOOKS[handle.id] = hook
    return handle


def _step_with_hooks(step, opt, args: tuple, kwargs: dict):
    """PyTorch's ``profile_hook_step``: the pre-hooks see ``args`` with the optimizer first and may
    return new ``(args, kwargs)``; the post-hooks see what the step was called with. A
    ``super().step()`` inside a subclass's step runs them once."""
    args = (opt,) + args
    for hook in chain(_GLOBAL_STEP_PRE_HOOKS.values(), opt._optimizer_step_pre_hooks.values()):
        result = hook(opt, args, kwargs)
        if result is not None:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
            args, kwargs = result
    _STEPPING.add(id(opt))
    try:
        out = step(*args, **kwargs)
    finally:
        _STEPPING.discard(id(opt))
    for hook in chain(opt._optimizer_step_post_hooks.values(), _GLOBAL_STEP_POST_HOOKS.values()):
        hook(opt, args, kwargs)
    return out


def _scoped_step(step):
    """``step`` run inside a named dispatcher scope, ``optimizer.step (AdamW)``: the tape records
    it as each op's ``module`` and the profiler as a span, so a view shows the update as one group.
    A closure (the model's forward and backward) runs outside that scope; a ``super().step()``
    inside a subclass's step does not open a second one. As ``Module.__call__``, it names the
    scope only while someone watches (``STATE.slow``): unobserved steps pay one flag test."""
    if getattr(step, "_tapelab_scoped", False):
        return step

    @wraps(step)
    def scoped(self, *args, **kwargs):
        if ((_GLOBAL_STEP_PRE_HOOKS or _GLOBAL_STEP_POST_HOOKS or self._optimizer_step_pre_hooks
             or self._optimizer_step_post_hooks) and id(self) not in _STEPPING):
            return _step_with_hooks(scoped, self, args, kwargs)
        if not STATE.slow:
            return step(self, *args, **kwargs)
        name = _step_scope_name(self)
        path = STATE.module_path
        if path and path[-1] == name:
            return step(self, *args, **kwargs)
        closure = kwargs.get("closure", args[0] if args else None)
        if closure is not None:
            def unscoped():
                if not (path and path[-1] == name):
                    return closure()
                path.pop()                   # the closure runs in the caller's scope
                try:
                    return closure()
                finally:
                    path.append(name)
            if "closure" in kwargs:
                kwargs["closure"] = unscoped
            else:
                args = (unscoped,) + args[1:]
        if RECORDING:   # a profile: PyTorch's range around it (as zero_grad's)
            with module_scope(name), record_function(f"Optimizer.step#{type(self).__name__}.step"):
                return step(self, *args, **kwargs)
        path.append(name)   # module_scope, inlined (as Module.__call__'s): a watched step pays it each time
        try:
            return step(self, *args, **kwargs)
        finally:
            path.pop()

    scoped._tapelab_scoped = True
    return scoped


def _refuse_sparse(group: dict, message: str) -> None:
    for p in group["params"]:
        g = p._grad
        if g is not None and type(g._data) is COOArray:
            raise RuntimeError(message)


def dense_grad(grad: Tensor) -> Tensor:
    """A sparse gradient as a dense one: an update that reads every element (momentum, decay)
    gives the values PyTorch's sparse arithmetic gives, zeros staying zeros."""
    return grad.to_dense() if type(grad._data) is COOArray else grad


class Optimizer:
    """Base class of all optimizers (``torch.optim.Optimizer``)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:          # decorated once, at class creation (never at run time)
            cls.step = _scoped_step(cls.__dict__["step"])

    def __init__(self, params, defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got {type(params).__name__}")
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)
        _LIVE.add(self)

    # ---------------------------------------------------------------- hooks
    _optimizer_step_pre_hooks = _optimizer_step_post_hooks = _NO_HOOKS
    _optimizer_state_dict_pre_hooks = _optimizer_state_dict_post_hooks = _NO_HOOKS
    _optimizer_load_state_dict_pre_hooks = _optimizer_load_state_dict_post_hooks = _NO_HOOKS

    def _add_hook(self, kind: str, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Register ``hook`` in this optimizer's own dict ``kind`` (made on first use)."""
        hooks = self.__dict__.get(kind)
        if hooks is None:
            hooks = self.__dict__[kind] = OrderedDict()
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before ``step``; it may return ``(new_args, new_kwargs)``."""
        return self._add_hook("_optimizer_step_pre_hooks", hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after ``step`` (ema-pytorch updates its average there)."""
        return self._add_hook("_optimizer_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)`` runs before ``state_dict`` builds the dict."""
        return self._add_hook("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` runs after; a non-None result replaces the dict."""
        return self._add_hook("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` runs before loading (on a shallow copy); a non-None result
        is loaded instead."""
        return self._add_hook("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)`` runs after ``load_state_dict``."""
        return self._add_hook("_optimizer_load_state_dict_post_hooks", hook, prepend)

    # ---------------------------------------------------------------- pickling and deepcopy
    def __getstate__(self) -> dict[str, Any]:
        """PyTorch's: only ``defaults``, ``state`` and ``param_groups`` travel, so a scheduler's
        wrapper of ``step`` (which holds this optimizer, not the copy) stays behind."""
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        _LIVE.add(self)

    # ---------------------------------------------------------------- stepping
    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                if self._sparse_refusal is not None:
                    _refuse_sparse(group, self._sparse_refusal.format(name=type(self).__name__))
                self._step_group(group)
        return loss

    step = _scoped_step(step)

    # PyTorch's words when a gradient is sparse (an ``Embedding(sparse=True)``'s); None in the
    # optimizers that take sparse gradients (SGD, Adagrad, SparseAdam)
    _sparse_refusal: str | None = "{name} does not support sparse gradients"

    def _step_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement step() or _step_group()")

    def _with_grads(self, group: dict[str, Any]):
        """``(param, grad, state)`` for each parameter of ``group`` that has a gradient; the
        gradient is negated when the group maximizes (the first thing every update does)."""
        maximize = group.get("maximize", False)
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[p]
            if p._data.dtype.kind == "c":   # PyTorch updates complex parameters as (real, imag) pairs
                p, grad, state = view_as_real(p), view_as_real(grad), _RealViews(state)
            yield p, (-grad if maximize else grad), state

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (to None by default, as PyTorch)."""
        if RECORDING:   # a profile: PyTorch's range around it
            with record_function(f"Optimizer.zero_grad#{type(self).__name__}.zero_grad"):
                return self._zero_grad(set_to_none)
        self._zero_grad(set_to_none)

    def _zero_grad(self, set_to_none: bool) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    # ---------------------------------------------------------------- groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. "
                                 "Some param names are missing")
            group["param_names"] = names
        group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization "
                                 f"parameter {name}")
            group.setdefault(name, default)
        ids = {id(p) for p in params}
        if len(ids) != len(params):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, "
                          "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for "
                          "more information", stacklevel=3)
        for other in self.param_groups:
            if ("param_names" in group) != ("param_names" in other):
                which = "with names" if "param_names" in group else "without names"
                raise ValueError(f"all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
            if any(id(p) in ids for p in other["params"]):
                raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    # ---------------------------------------------------------------- state dict
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}`` as PyTorch.

        Parameters are numbered in group order; state tensors are the live buffers (not copies).
        """
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): _export(v) for k, v in self.state.items()}
        out = {"state": state, "param_groups": groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, out)
            out = out if result is None else result
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict()`` (ours or PyTorch's, converted) into this optimizer's parameters.

        Tensors are copied and cast to each parameter's device (and dtype, for floating point).
        """
        state_dict = state_dict.copy()
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = hook(self, state_dict)
            state_dict = state_dict if result is None else result
        groups = self.param_groups
        saved = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size "
                             "of optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved),
                          chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            param = id_map.get(k)
            state[param if param is not None else k] = _import(v, param) if param is not None else v
        for group, new in zip(groups, saved):
            new["params"] = group["params"]
            if "param_names" in group and "param_names" not in new:
                new["param_names"] = group["param_names"]
        self.state, self.param_groups = state, saved
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    def __repr__(self) -> str:
        out = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    out += f"    {key}: {group[key]}\n"
        return out + ")"


def _export(param_state: dict[str, Any]) -> dict[str, Any]:
    from ..core.creation import tensor
    return {k: tensor(float(v), dtype=_dtype.float32) if k in _SCALAR_STATE and not isinstance(v, Tensor)
            else v for k, v in param_state.items()}


def _import(value, param: Tensor, key: str | None = None):
    """A deep copy of ``value`` with tensors moved (and floating tensors cast) to ``param``'s."""
    if isinstance(value, Tensor):
        if key in _SCALAR_STATE:
            return float(value.item())
        out = value.to(param.device, param.dtype) if param.is_floating_point() else value.to(param.device)
        return out.clone() if out is value else out
    if isinstance(value, dict):
        return {k: _import(v, param, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_import(v, param) for v in value)
    return value


def scalar(x) -> float:
    """A hyper-parameter as a Python number (PyTorch allows 1-element tensors for lr and betas)."""
    return x.item() if isinstance(x, Tensor) else x


def check_hyper(label: str, value, ok: bool) -> None:
    """Raise PyTorch's ValueError (``Invalid learning rate: -1``) for a bad hyper-parameter."""
    if not ok:
        raise ValueError(f"Invalid {label}: {value}")


def check_single_tensor(defaults: dict[str, Any]) -> None:
    """tapelab has one implementation per optimizer; ``differentiable=True`` is not supported."""
    if defaults.get("differentiable"):
        raise NotImplementedError("differentiable=True optimizers are not supported by tapelab")


class _RealViews(dict):
    """A complex parameter's state seen through ``view_as_real``: the stored tensors stay complex
    (``state_dict`` as PyTorch's), the update reads and writes their (real, imag) views."""

    def __init__(self, state: dict):
        super().__init__()
        self.state = state

    def __len__(self) -> int:
        return len(self.state)

    def __contains__(self, key) -> bool:
        return key in self.state

    def get(self, key, default=None):
        return self[key] if key in self.state else default

    def __getitem__(self, key):
        v = self.state[key]
        return view_as_real(v) if isinstance(v, Tensor) and v._data.dtype.kind == "c" else v

    def __setitem__(self, key, value) -> None:
        real_pair = isinstance(value, Tensor) and value.ndim and value.shape[-1] == 2 and value.is_floating_point()
        self.state[key] = view_as_complex(value) if real_pair and key != "step" else value

