"""``torch.utils.dlpack``: tensors to and from other array libraries without a copy (torch_geometric
imports ``from_dlpack`` from here)."""
from __future__ import annotations

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..core import creation
from ..core.tensor import Tensor

__all__ = ["from_dlpack", "to_dlpack"]


class _Capsule:
    """A bare DLPack capsule (what ``to_dlpack`` of any library returns) in the protocol's object form;
    its memory is taken to be on the cpu (numpy refuses a capsule of another device)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self) -> tuple:
        return (1, 0)


def from_dlpack(ext) -> Tensor:
    """A tensor over ``ext``'s memory: an object with ``__dlpack__`` (a numpy, cupy or PyTorch array) or a capsule."""
    return creation.from_dlpack(ext if hasattr(ext, "__dlpack__") else _Capsule(ext))


def to_dlpack(tensor: Tensor):
    """The tensor's DLPack capsule (``from_dlpack`` of any library takes it back without a copy)."""
    if _DISPATCH.functions is not None and has_tensor_like((tensor,)):
        return handle_torch_function(to_dlpack, (tensor,), tensor)
    return tensor.__dlpack__()
