"""``torch.nn.utils._named_member_accessor``: put a tensor in a module's parameter, buffer or attribute
slot and hand back what was there (``functional_call``'s swaps; tensordict's ``to_module``)."""
from __future__ import annotations

from ...core.tensor import Tensor
from ..modules.module import Module

__all__ = ["swap_tensor", "set_tensor", "swap_submodule"]

_MISSING: Tensor = object()   # "no such attribute": what swap_tensor returns for one, and removes with


def swap_tensor(module: Module, name: str, tensor, allow_missing: bool = False):
    """Put ``tensor`` where ``module.<name>`` lives (its parameters, its buffers, else a plain attribute;
    ``_MISSING`` removes it) and return the tensor that was there."""
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of torch.Tensor")
    if "." in name:
        raise KeyError('tensor name can\'t contain "."')
    if name == "":
        raise KeyError('tensor name can\'t be empty string ""')
    for store in (module._parameters, module._buffers):
        if name in store:
            orig = store[name]
            if tensor is _MISSING:
                del store[name]
            else:
                store[name] = tensor
            return orig
    if hasattr(module, name):
        orig = getattr(module, name)
    elif allow_missing:
        orig = _MISSING
    else:
        raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{name}`: {orig} is not an instance of torch.Tensor")
    if tensor is not _MISSING:
        setattr(module, name, tensor)
    elif hasattr(module, name):
        delattr(module, name)
    return orig


def set_tensor(module: Module, name: str, tensor: Tensor) -> None:
    """``swap_tensor`` without the old value."""
    swap_tensor(module, name, tensor)


def swap_submodule(module: Module, name: str, submodule: Module) -> Module:
    """Put ``submodule`` in ``module``'s child slot ``name`` and return the child that was there."""
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    if not isinstance(submodule, Module):
        raise TypeError(f"{submodule} is not an instance of torch.nn.Module")
    if "." in name:
        raise KeyError('submodule name can\'t contain "."')
    if name == "":
        raise KeyError('submodule name can\'t be empty string ""')
    if name not in module._modules:
        raise KeyError(f"submodule {name} does not exist")
    orig = module._modules[name]
    if not isinstance(orig, Module):
        raise TypeError(f"{name} attribute is not an instance of torch.nn.Module")
    module._modules[name] = submodule
    return orig
