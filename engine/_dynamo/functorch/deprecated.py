"""``torch._functorch.deprecated``: the ``functorch.*`` transforms (``import functorch``), each the
``torch.func`` one after PyTorch's FutureWarning that points to it."""
from __future__ import annotations

import warnings
from typing import Any, Callable

from ... import func as _func
from . import make_functional as _nn

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functionalize",
           "make_functional", "make_functional_with_buffers", "combine_state_for_ensemble"]


def _warn(api: str, new_api: str | None = None) -> None:
    warnings.warn(f"We've integrated functorch into PyTorch. As the final step of the integration, `functorch.{api}` "
                  "is deprecated as of PyTorch 2.0 and will be deleted in a future version of PyTorch >= 2.3. "
                  f"Please use `{new_api or 'torch.func.' + api}` instead; see the PyTorch 2.0 release notes and/or the "
                  "`torch.func` migration guide for more details https://pytorch.org/docs/main/func.migrating.html",
                  FutureWarning, stacklevel=3)


def vmap(func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None) -> Callable:
    _warn("vmap", "torch.vmap")
    return _func.vmap(func, in_dims, out_dims, randomness, chunk_size=chunk_size)


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    _warn("grad")
    return _func.grad(func, argnums, has_aux)


def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    _warn("grad_and_value")
    return _func.grad_and_value(func, argnums, has_aux)


def vjp(func: Callable, *primals, has_aux: bool = False) -> Any:
    _warn("vjp")
    return _func.vjp(func, *primals, has_aux=has_aux)


def jvp(func: Callable, primals, tangents, *, strict: bool = False, has_aux: bool = False) -> Any:
    _warn("jvp")
    return _func.jvp(func, primals, tangents, has_aux=has_aux)


def jacrev(func: Callable, argnums=0, *, has_aux: bool = False, chunk_size=None) -> Callable:
    _warn("jacrev")
    return _func.jacrev(func, argnums, has_aux=has_aux, chunk_size=chunk_size)


def jacfwd(func: Callable, argnums=0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    _warn("jacfwd")
    return _func.jacfwd(func, argnums, has_aux, randomness=randomness)


def hessian(func: Callable, argnums=0) -> Callable:
    _warn("hessian")
    return _func.hessian(func, argnums=argnums)


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    _warn("functionalize")
    return _func.functionalize(func, remove=remove)


def make_functional(model, disable_autograd_tracking: bool = False) -> tuple:
    _warn("make_functional", "torch.func.functional_call")
    return _nn.make_functional(model, disable_autograd_tracking)


def make_functional_with_buffers(model, disable_autograd_tracking: bool = False) -> tuple:
    _warn("make_functional_with_buffers", "torch.func.functional_call")
    return _nn.make_functional_with_buffers(model, disable_autograd_tracking)


def combine_state_for_ensemble(models) -> tuple:
    _warn("combine_state_for_ensemble", "torch.func.stack_module_state")
    return _nn.combine_state_for_ensemble(models)
