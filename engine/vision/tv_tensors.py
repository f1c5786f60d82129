"""torchvision.tv_tensors (minimal): Tensor subclasses that tell v2 transforms what a tensor holds.

An ``Image`` is transformed as an image, a ``Mask`` by the geometric transforms only (nearest
resampling), ``BoundingBoxes`` carry their format and canvas size. As in torchvision, ops on them
return plain Tensors, except ``clone``/``to``/``detach``/``requires_grad_``, which keep the type.
"""
from __future__ import annotations

import enum
import sys

import numpy as np

from ..core.creation import as_tensor, from_numpy
from ..core.tensor import Tensor

__all__ = ["TVTensor", "Image", "Video", "Mask", "BoundingBoxes", "BoundingBoxFormat", "wrap"]

_KEEP = {"clone", "to", "cast", "detach", "requires_grad_", "pin_memory", "cpu", "cuda"}   # tapelab names .to "cast"


class TVTensor(Tensor):
    """Base of the tagged tensors: results of ops are plain Tensors unless the op keeps the tag.

    Ops do not ask it (``_asked_by_ops = False``): a subclass that every op asks puts every op of the
    process on the dispatcher's slow path while it lives (importing torchvision made a 16-element op
    chain 1.9x slower); tapelab's ops return plain Tensors anyway, and the methods that keep the tag
    rewrap their result below. Functions that check their arguments themselves still call
    ``__torch_function__``."""

    _asked_by_ops = False

    @classmethod
    def _wrap(cls, tensor: Tensor, **meta) -> "TVTensor":
        out = tensor.as_subclass(cls)
        for k, v in meta.items():
            setattr(out, k, v)
        return out

    @staticmethod
    def _to_tensor(data, dtype=None, device=None, requires_grad: bool | None = None) -> Tensor:
        if requires_grad is None:
            requires_grad = data.requires_grad if isinstance(data, Tensor) else False
        return as_tensor(data, dtype=dtype, device=device).requires_grad_(requires_grad)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from .._C import DisableTorchFunctionSubclass
        with DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        first = args[0] if args else None
        if name in _KEEP and isinstance(first, TVTensor) and isinstance(out, Tensor) and not isinstance(out, TVTensor):
            return wrap(out, like=first)
        return out

    def clone(self, *args, **kwargs):
        return _kept(self, Tensor.clone(self, *args, **kwargs))

    def to(self, *args, **kwargs):
        return _kept(self, Tensor.to(self, *args, **kwargs))

    def detach(self):
        return _kept(self, Tensor.detach(self))

    def requires_grad_(self, requires_grad: bool = True):
        return _kept(self, Tensor.requires_grad_(self, requires_grad))

    def pin_memory(self, *args, **kwargs):
        return _kept(self, Tensor.pin_memory(self, *args, **kwargs))

    def cpu(self, *args, **kwargs):
        return _kept(self, Tensor.cpu(self, *args, **kwargs))

    def cuda(self, *args, **kwargs):
        return _kept(self, Tensor.cuda(self, *args, **kwargs))

    def __repr__(self) -> str:
        from .._C import DisableTorchFunctionSubclass
        with DisableTorchFunctionSubclass():
            return Tensor.__repr__(self.as_subclass(Tensor)).replace("tensor", type(self).__name__, 1)


class Image(TVTensor):
    """A ``[..., C, H, W]`` image; a 2-d input gains a channel dim, a PIL image is read as uint8 ``C, H, W``."""

    def __new__(cls, data, *, dtype=None, device=None, requires_grad: bool | None = None) -> "Image":
        image_mod = sys.modules.get("PIL.Image")
        if image_mod is not None and isinstance(data, image_mod.Image):   # as pil_to_tensor: C, H, W of its dtype
            arr = np.array(data, copy=True).reshape(data.height, data.width, len(data.getbands()))
            data = from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))
        tensor = cls._to_tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        if tensor.ndim < 2:
            raise ValueError(f"Image: expected at least 2 dims, got {tensor.ndim}")
        if tensor.ndim == 2:
            tensor = tensor.unsqueeze(0)
        return cls._wrap(tensor)

    def __init__(self, *args, **kwargs) -> None:
        pass


class Video(TVTensor):
    """A ``[..., T, C, H, W]`` video: v2 transforms treat it as images over its leading dims."""

    def __new__(cls, data, *, dtype=None, device=None, requires_grad: bool | None = None) -> "Video":
        tensor = cls._to_tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        if tensor.ndim < 4:
            raise ValueError(f"Video: expected at least 4 dims, got {tensor.ndim}")
        return cls._wrap(tensor)

    def __init__(self, *args, **kwargs) -> None:
        pass


class Mask(TVTensor):
    """A ``[..., H, W]`` segmentation or detection mask."""

    def __new__(cls, data, *, dtype=None, device=None, requires_grad: bool | None = None) -> "Mask":
        return cls._wrap(cls._to_tensor(data, dtype=dtype, device=device, requires_grad=requires_grad))

    def __init__(self, *args, **kwargs) -> None:
        pass


class BoundingBoxFormat(enum.Enum):
    XYXY = "XYXY"
    XYWH = "XYWH"
    CXCYWH = "CXCYWH"


class BoundingBoxes(TVTensor):
    """``[N, 4]`` boxes with their ``format`` and the ``canvas_size`` (H, W) of the image they belong to."""

    format: BoundingBoxFormat
    canvas_size: tuple[int, int]

    def __new__(cls, data, *, format, canvas_size, dtype=None, device=None,
                requires_grad: bool | None = None) -> "BoundingBoxes":
        if isinstance(format, str):
            format = BoundingBoxFormat[format.upper()]
        tensor = cls._to_tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        if tensor.ndim == 1:
            tensor = tensor.unsqueeze(0)
        return cls._wrap(tensor, format=format, canvas_size=tuple(canvas_size))

    def __init__(self, *args, **kwargs) -> None:
        pass


def _kept(like: TVTensor, out):
    """A method's result with ``like``'s type and metadata (itself when it is already a tagged tensor)."""
    return out if isinstance(out, TVTensor) or not isinstance(out, Tensor) else wrap(out, like=like)


def wrap(wrappee: Tensor, *, like: TVTensor, **kwargs) -> TVTensor:
    """``wrappee`` as the type of ``like`` (with its metadata unless given in ``kwargs``)."""
    meta = {}
    if isinstance(like, BoundingBoxes):
        meta = {"format": kwargs.get("format", like.format), "canvas_size": kwargs.get("canvas_size", like.canvas_size)}
    return type(like)._wrap(wrappee.as_subclass(Tensor) if isinstance(wrappee, TVTensor) else wrappee, **meta)
