"""torchvision.transforms.v2's transform classes, over ``v2.functional``.

A transform takes any nest of tuples, lists and dicts; it transforms the images (PIL images,
``tv_tensors.Image``, or else the first plain tensor), masks where the op is geometric, and passes
everything else through. Random parameters are drawn by ``make_params`` with tapelab's generator in
torchvision's order (``rand``, ``randint``, ``empty(1).uniform_``, ``randperm``), so a seeded
pipeline gives torchvision's numbers.
"""
from __future__ import annotations

import enum
import math
import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .... import nn
from ....base.dtype import float32
from ....core.creation import arange, as_tensor, empty, linspace, rand, randint, randperm
from ....core.tensor import Tensor
from ....distributions.gamma import Beta, sample_dirichlet
from ... import tv_tensors
from .._tensor import elastic_displacement
from ..functional import InterpolationMode
from ..transforms import linear_transformation
from . import functional as F

__all__ = ["Transform", "Compose", "RandomApply", "RandomChoice", "RandomOrder", "Lambda", "Identity", "ToImage",
           "ToPureTensor", "PILToTensor", "ToPILImage", "ToTensor", "ToDtype", "ConvertImageDtype", "Normalize",
           "Resize", "CenterCrop", "RandomCrop", "Pad", "RandomResizedCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "ColorJitter", "Grayscale", "RandomGrayscale", "RGB", "RandomRotation",
           "RandomAffine", "RandomPerspective", "ElasticTransform", "GaussianBlur", "GaussianNoise", "RandomInvert",
           "RandomPosterize", "RandomSolarize", "RandomAdjustSharpness", "RandomAutocontrast", "RandomEqualize",
           "FiveCrop", "TenCrop", "RandomErasing", "MixUp", "CutMix", "AutoAugmentPolicy", "AutoAugment",
           "RandAugment", "TrivialAugmentWide", "AugMix", "ClampBoundingBoxes", "ConvertBoundingBoxFormat",
           "SanitizeBoundingBoxes", "RandomZoomOut", "RandomIoUCrop", "RandomPhotometricDistort",
           "RandomChannelPermutation", "ScaleJitter", "RandomShortestSize", "RandomResize",
           "LinearTransformation"]


# ---------------------------------------------------------------- input trees
def _flatten(tree) -> tuple[list, Any]:
    """Leaves and a spec of nested tuples, lists and dicts (as torch.utils._pytree sees them)."""
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        leaves, specs = [], []
        for item in tree:
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for key, item in tree.items():
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((key, len(sub), spec))
        return leaves, (dict, specs)
    return [tree], None


def _unflatten(leaves: list, spec):
    if spec is None:
        return leaves[0]
    kind, specs = spec
    out, k = [], 0
    if kind is dict:
        result = {}
        for key, n, sub in specs:
            result[key] = _unflatten(leaves[k:k + n], sub)
            k += n
        return result
    for n, sub in specs:
        out.append(_unflatten(leaves[k:k + n], sub))
        k += n
    return kind(out)


def _is_pil(x) -> bool:
    image = sys.modules.get("PIL.Image")
    return image is not None and isinstance(x, image.Image)


def _is_pure_tensor(x) -> bool:
    return isinstance(x, Tensor) and not isinstance(x, tv_tensors.TVTensor)


def _is_image(x) -> bool:
    return _is_pil(x) or isinstance(x, (tv_tensors.Image, tv_tensors.Video)) or _is_pure_tensor(x)


def query_size(flat: list) -> tuple[int, int]:
    """(H, W) shared by the images, masks and boxes of a sample."""
    sizes = {tuple(F.get_size(x)) for x in flat if _is_image(x) or isinstance(x, tv_tensors.TVTensor)}
    if not sizes:
        raise TypeError("No image, mask or bounding box was found in the sample")
    if len(sizes) > 1:
        raise ValueError(f"Found multiple HxW dimensions in the sample: {sorted(sizes)}")
    return sizes.pop()


def query_chw(flat: list) -> tuple[int, int, int]:
    chws = {tuple(F.get_dimensions(x)) for x in flat if _is_image(x)}
    if not chws:
        raise TypeError("No image was found in the sample")
    if len(chws) > 1:
        raise ValueError(f"Found multiple CxHxW dimensions in the sample: {sorted(chws)}")
    return chws.pop()


def _uniform(low: float, high: float) -> float:
    return float(empty(1).uniform_(low, high).item())


def _log_uniform(log_range: Tensor) -> float:
    """exp of a uniform draw between two float32 logs, in float32 (torchvision's aspect ratio draw)."""
    return float(empty(1).uniform_(float(log_range[0]), float(log_range[1])).exp().item())


def _setup_size(size, name: str = "size") -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) in (1, 2):
        return (int(size[0]),) * 2 if len(size) == 1 else (int(size[0]), int(size[1]))
    raise ValueError(f"{name}: please provide only two dimensions (h, w), got {size!r}")


def _setup_angle(value, name: str, sizes=(2,)) -> list[float]:
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be positive")
        return [-float(value), float(value)]
    if len(value) not in sizes:
        raise ValueError(f"If {name} is a sequence its length should be one of {sizes}")
    return [float(v) for v in value]


def _pad_ltrb_to_lrtb(padding) -> list[int]:
    if isinstance(padding, int):
        return [padding] * 4
    padding = list(padding)
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return [padding[0], padding[0], padding[1], padding[1]]
    if len(padding) == 4:
        return [padding[0], padding[2], padding[1], padding[3]]
    raise ValueError(f"Padding must be an int or a 1, 2, or 4 element sequence, got {len(padding)} elements")


def _get_fill(fill, inpt):
    if isinstance(fill, dict):
        for kind, value in fill.items():
            if isinstance(kind, type) and isinstance(inpt, kind):
                return value
        return fill.get("others")
    return fill


# ---------------------------------------------------------------- bases
class Transform(nn.Module):
    """Base of the v2 transforms: ``make_params`` draws once per call, ``transform`` maps each input."""

    def check_inputs(self, flat_inputs: list) -> None:
        pass

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        return {}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _needs_transform(self, inpt) -> bool:
        return isinstance(inpt, Tensor) or _is_pil(inpt)

    def _needs_transform_list(self, flat: list) -> list[bool]:
        pure_ok = not any(_is_pil(x) or isinstance(x, (tv_tensors.Image, tv_tensors.Video)) for x in flat)
        needs = []
        for x in flat:
            need = self._needs_transform(x)
            if need and _is_pure_tensor(x):
                need, pure_ok = pure_ok, False
            needs.append(need)
        return needs

    def forward(self, *inputs: Any) -> Any:
        flat, spec = _flatten(inputs if len(inputs) > 1 else inputs[0])
        self.check_inputs(flat)
        needs = self._needs_transform_list(flat)
        params = self.make_params([x for x, n in zip(flat, needs) if n])
        return _unflatten([self.transform(x, params) if n else x for x, n in zip(flat, needs)], spec)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v.value if isinstance(v, InterpolationMode) else v}" for k, v in self.__dict__.items()
                         if not k.startswith("_") and k != "training"
                         and isinstance(v, (bool, int, float, str, tuple, list, enum.Enum)))


class _RandomApplyTransform(Transform):
    """Applies with probability ``p`` (one ``rand(1)`` draw, before the parameters)."""

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError("`p` should be a floating point value in the interval [0.0, 1.0].")
        super().__init__()
        self.p = p

    def forward(self, *inputs: Any) -> Any:
        inputs = inputs if len(inputs) > 1 else inputs[0]
        flat, spec = _flatten(inputs)
        self.check_inputs(flat)
        if rand(1).item() >= self.p:
            return inputs
        needs = self._needs_transform_list(flat)
        params = self.make_params([x for x, n in zip(flat, needs) if n])
        return _unflatten([self.transform(x, params) if n else x for x, n in zip(flat, needs)], spec)


# ---------------------------------------------------------------- containers
class Compose(Transform):
    def __init__(self, transforms: Sequence[Callable]) -> None:
        super().__init__()
        if not isinstance(transforms, Sequence):
            raise TypeError("Argument transforms should be a sequence of callables")
        if not transforms:
            raise ValueError("Pass at least one transform")
        self.transforms = transforms

    def forward(self, *inputs: Any) -> Any:
        unpack = len(inputs) > 1
        for t in self.transforms:
            outputs = t(*inputs)
            inputs = outputs if unpack else (outputs,)
        return outputs

    def extra_repr(self) -> str:
        return "\n".join(f"    {t}" for t in self.transforms)


class RandomApply(Transform):
    extra_repr = Compose.extra_repr

    def __init__(self, transforms: Sequence[Callable], p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError("`p` should be a floating point value in the interval [0.0, 1.0].")
        self.transforms, self.p = transforms, p

    def forward(self, *inputs: Any) -> Any:
        unpack = len(inputs) > 1
        if rand(1).item() >= self.p:
            return inputs if unpack else inputs[0]
        for t in self.transforms:
            outputs = t(*inputs)
            inputs = outputs if unpack else (outputs,)
        return outputs


class RandomChoice(Transform):
    def __init__(self, transforms: Sequence[Callable], p: list[float] | None = None) -> None:
        super().__init__()
        p = [1.0] * len(transforms) if p is None else p
        if len(p) != len(transforms):
            raise ValueError(f"Length of p doesn't match the number of transforms: {len(p)} != {len(transforms)}")
        self.transforms = transforms
        self.p = [v / sum(p) for v in p]

    def forward(self, *inputs: Any) -> Any:
        idx = int(as_tensor(self.p).multinomial(1).item())
        return self.transforms[idx](*inputs)


class RandomOrder(Transform):
    def __init__(self, transforms: Sequence[Callable]) -> None:
        super().__init__()
        self.transforms = transforms

    def forward(self, *inputs: Any) -> Any:
        unpack = len(inputs) > 1
        for idx in randperm(len(self.transforms)).tolist():
            outputs = self.transforms[idx](*inputs)
            inputs = outputs if unpack else (outputs,)
        return outputs


class Lambda(Transform):
    """``lambd`` applied to the inputs of ``types`` (any by default)."""

    def __init__(self, lambd: Callable, *types: type) -> None:
        super().__init__()
        self.lambd, self.types = lambd, types or (object,)

    def _needs_transform(self, inpt) -> bool:
        return True

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return self.lambd(inpt) if isinstance(inpt, self.types) else inpt

    def extra_repr(self) -> str:
        name = getattr(self.lambd, "__name__", None)
        return ", ".join(([name] if name else []) + [f"types={[t.__name__ for t in self.types]}"])


class Identity(Transform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return inpt


# ---------------------------------------------------------------- conversion
class ToImage(Transform):
    def _needs_transform(self, inpt) -> bool:
        return _is_pure_tensor(inpt) or _is_pil(inpt) or isinstance(inpt, np.ndarray)

    def transform(self, inpt: Any, params: dict[str, Any]) -> tv_tensors.Image:
        return F.to_image(inpt)


class ToPureTensor(Transform):
    def _needs_transform(self, inpt) -> bool:
        return isinstance(inpt, tv_tensors.TVTensor)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Tensor:
        return inpt.as_subclass(Tensor)


class PILToTensor(Transform):
    def _needs_transform(self, inpt) -> bool:
        return _is_pil(inpt)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Tensor:
        return F.pil_to_tensor(inpt)


class ToTensor(Transform):
    def _needs_transform(self, inpt) -> bool:
        return _is_pil(inpt) or isinstance(inpt, np.ndarray)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Tensor:
        return F.to_tensor(inpt)


class ToPILImage(Transform):
    def __init__(self, mode: str | None = None) -> None:
        super().__init__()
        self.mode = mode

    def _needs_transform(self, inpt) -> bool:
        return _is_pure_tensor(inpt) or isinstance(inpt, (tv_tensors.Image, np.ndarray))

    def transform(self, inpt: Any, params: dict[str, Any]):
        return F.to_pil_image(inpt.as_subclass(Tensor) if isinstance(inpt, Tensor) else inpt, mode=self.mode)


class ToDtype(Transform):
    """Cast images (with ``scale``, rescaling their value range); a dict picks a dtype per tv_tensor type."""

    def __init__(self, dtype, scale: bool = False) -> None:
        super().__init__()
        self.dtype, self.scale = dtype, scale

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if isinstance(self.dtype, dict):
            kind = type(inpt) if not _is_pure_tensor(inpt) else Tensor
            if kind in self.dtype:
                dtype = self.dtype[kind]
            elif "others" in self.dtype:
                dtype = self.dtype["others"]
            else:
                raise ValueError(f"No dtype was specified for type {type(inpt)}")
        else:
            if not (_is_pure_tensor(inpt) or isinstance(inpt, (tv_tensors.Image, tv_tensors.Video))):
                return inpt
            dtype = self.dtype
        return inpt if dtype is None else F.to_dtype(inpt, dtype, scale=self.scale)


class ConvertImageDtype(Transform):
    def __init__(self, dtype=float32) -> None:
        super().__init__()
        self.dtype = dtype

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not (_is_pure_tensor(inpt) or isinstance(inpt, (tv_tensors.Image, tv_tensors.Video))):
            return inpt
        return F.to_dtype(inpt, self.dtype, scale=True)


class Normalize(Transform):
    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        super().__init__()
        self.mean, self.std, self.inplace = list(mean), list(std), inplace

    def check_inputs(self, flat_inputs: list) -> None:
        if any(_is_pil(x) for x in flat_inputs):
            raise TypeError("Normalize() does not support PIL images.")

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.normalize(inpt, self.mean, self.std, self.inplace)


# ---------------------------------------------------------------- geometry
class Resize(Transform):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size: int | None = None,
                 antialias: bool | None = True) -> None:
        super().__init__()
        self.size = [size] if isinstance(size, int) else (list(size) if size is not None else None)
        self.interpolation, self.max_size, self.antialias = interpolation, max_size, antialias

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.resize(inpt, self.size, self.interpolation, self.max_size, self.antialias)


class CenterCrop(Transform):
    def __init__(self, size) -> None:
        super().__init__()
        self.size = _setup_size(size)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.center_crop(inpt, self.size)


class Pad(Transform):
    def __init__(self, padding, fill=0, padding_mode: str = "constant") -> None:
        super().__init__()
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.pad(inpt, self.padding, _get_fill(self.fill, inpt), self.padding_mode)


class RandomCrop(Transform):
    def __init__(self, size, padding=None, pad_if_needed: bool = False, fill=0, padding_mode: str = "constant") -> None:
        super().__init__()
        self.size = _setup_size(size)
        self.padding = _pad_ltrb_to_lrtb(padding) if padding else None
        self.pad_if_needed, self.fill, self.padding_mode = pad_if_needed, fill, padding_mode

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        h, w = query_size(flat_inputs)
        left, right, top, bottom = self.padding or (0, 0, 0, 0)
        h, w = h + top + bottom, w + left + right
        ch, cw = self.size
        if self.pad_if_needed:
            if h < ch:
                diff = ch - h
                top, bottom, h = top + diff, bottom + diff, h + 2 * diff
            if w < cw:
                diff = cw - w
                left, right, w = left + diff, right + diff, w + 2 * diff
        if h < ch or w < cw:
            raise ValueError(f"Required crop size {(ch, cw)} is larger than input image size {(h, w)}.")
        i = int(randint(0, h - ch + 1, size=()).item()) if h > ch else 0
        j = int(randint(0, w - cw + 1, size=()).item()) if w > cw else 0
        return dict(padding=[left, top, right, bottom], top=i, left=j, height=ch, width=cw,
                    needs_crop=h > ch or w > cw)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if any(params["padding"]):
            inpt = F.pad(inpt, params["padding"], _get_fill(self.fill, inpt), self.padding_mode)
        if params["needs_crop"]:
            inpt = F.crop(inpt, params["top"], params["left"], params["height"], params["width"])
        return inpt


class RandomResizedCrop(Transform):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        super().__init__()
        self.size = _setup_size(size)
        self.scale, self.ratio = scale, ratio
        self.interpolation, self.antialias = interpolation, antialias
        self._log_ratio = as_tensor(list(ratio), dtype=float32).log()

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        height, width = query_size(flat_inputs)
        area = height * width
        for _ in range(10):
            target_area = area * _uniform(self.scale[0], self.scale[1])
            aspect = _log_uniform(self._log_ratio)
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                i = int(randint(0, height - h + 1, size=(1,)).item())
                j = int(randint(0, width - w + 1, size=(1,)).item())
                return dict(top=i, left=j, height=h, width=w)
        in_ratio = width / height
        if in_ratio < min(self.ratio):
            w, h = width, int(round(width / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            h, w = height, int(round(height * max(self.ratio)))
        else:
            w, h = width, height
        return dict(top=(height - h) // 2, left=(width - w) // 2, height=h, width=w)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.resized_crop(inpt, params["top"], params["left"], params["height"], params["width"], self.size,
                              self.interpolation, self.antialias)


class RandomHorizontalFlip(_RandomApplyTransform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.hflip(inpt)


class RandomVerticalFlip(_RandomApplyTransform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.vflip(inpt)


class RandomRotation(Transform):
    def __init__(self, degrees, interpolation=InterpolationMode.NEAREST, expand: bool = False,
                 center: Sequence[float] | None = None, fill=0) -> None:
        super().__init__()
        self.degrees = _setup_angle(degrees, "degrees")
        self.interpolation, self.expand, self.center, self.fill = interpolation, expand, center, fill

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        return dict(angle=_uniform(self.degrees[0], self.degrees[1]))

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.rotate(inpt, params["angle"], self.interpolation, self.expand, self.center,
                        _get_fill(self.fill, inpt))


class RandomAffine(Transform):
    def __init__(self, degrees, translate: Sequence[float] | None = None, scale: Sequence[float] | None = None,
                 shear=None, interpolation=InterpolationMode.NEAREST, fill=0,
                 center: Sequence[float] | None = None) -> None:
        super().__init__()
        self.degrees = _setup_angle(degrees, "degrees")
        self.translate, self.scale = translate, scale
        self.shear = _setup_angle(shear, "shear", (2, 4)) if shear is not None else None
        self.interpolation, self.fill, self.center = interpolation, fill, center

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        height, width = query_size(flat_inputs)
        angle = _uniform(self.degrees[0], self.degrees[1])
        translate = (0, 0)
        if self.translate is not None:
            max_dx, max_dy = float(self.translate[0] * width), float(self.translate[1] * height)
            translate = (int(round(_uniform(-max_dx, max_dx))), int(round(_uniform(-max_dy, max_dy))))
        scale = _uniform(self.scale[0], self.scale[1]) if self.scale is not None else 1.0
        shear = [0.0, 0.0]
        if self.shear is not None:
            shear[0] = _uniform(self.shear[0], self.shear[1])
            if len(self.shear) == 4:
                shear[1] = _uniform(self.shear[2], self.shear[3])
        return dict(angle=angle, translate=translate, scale=scale, shear=shear)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.affine(inpt, params["angle"], list(params["translate"]), params["scale"], params["shear"],
                        self.interpolation, _get_fill(self.fill, inpt), self.center)


class RandomPerspective(_RandomApplyTransform):
    def __init__(self, distortion_scale: float = 0.5, p: float = 0.5, interpolation=InterpolationMode.BILINEAR,
                 fill=0) -> None:
        super().__init__(p=p)
        if not 0 <= distortion_scale <= 1:
            raise ValueError("Argument distortion_scale value should be between 0 and 1")
        self.distortion_scale, self.interpolation, self.fill = distortion_scale, interpolation, fill

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        height, width = query_size(flat_inputs)
        return dict(coefficients=perspective_params(width, height, self.distortion_scale))

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.perspective(inpt, None, None, self.interpolation, _get_fill(self.fill, inpt),
                             coefficients=params["coefficients"])


def _corners(width: int, height: int, distortion_scale: float) -> tuple[list, list]:
    """Four corners and where each moves, drawn in torchvision's order (x then y, clockwise from top left)."""
    bh, bw = int(distortion_scale * (height // 2)) + 1, int(distortion_scale * (width // 2)) + 1

    def draw(lo: int, hi: int) -> int:
        return int(randint(lo, hi, size=(1,)).item())
    tl = [draw(0, bw), draw(0, bh)]
    tr = [draw(width - bw, width), draw(0, bh)]
    br = [draw(width - bw, width), draw(height - bh, height)]
    bl = [draw(0, bw), draw(height - bh, height)]
    return [[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]], [tl, tr, br, bl]


def perspective_params(width: int, height: int, distortion_scale: float) -> list[float]:
    start, end = _corners(width, height, distortion_scale)
    return F.perspective_coeffs(start, end)


class LinearTransformation(Transform):
    """(flattened image - mean_vector) @ transformation_matrix, reshaped back (ZCA whitening)."""

    def __init__(self, transformation_matrix: Tensor, mean_vector: Tensor) -> None:
        super().__init__()
        self.transformation_matrix, self.mean_vector = transformation_matrix, mean_vector

    def check_inputs(self, flat_inputs: list) -> None:
        if any(_is_pil(x) for x in flat_inputs):
            raise TypeError(f"{type(self).__name__}() does not support PIL images.")

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if isinstance(inpt, (tv_tensors.Mask, tv_tensors.BoundingBoxes)):
            return inpt
        plain = inpt.as_subclass(Tensor) if isinstance(inpt, tv_tensors.TVTensor) else inpt
        out = linear_transformation(plain, self.transformation_matrix, self.mean_vector)
        return tv_tensors.wrap(out, like=inpt) if isinstance(inpt, tv_tensors.TVTensor) else out


class ElasticTransform(Transform):
    """Elastic distortion: Gaussian-smoothed random offsets of strength ``alpha`` and smoothness ``sigma``."""

    def __init__(self, alpha=50.0, sigma=5.0, interpolation=InterpolationMode.BILINEAR, fill=0) -> None:
        super().__init__()
        pair = (lambda v: [float(v)] * 2 if isinstance(v, (int, float))
                else [float(x) for x in v] * (2 if len(v) == 1 else 1))
        self.alpha, self.sigma = pair(alpha), pair(sigma)
        self.interpolation, self.fill = interpolation, fill

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        height, width = query_size(flat_inputs)
        return dict(displacement=elastic_displacement(self.alpha, self.sigma, height, width, v1=False))

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.elastic(inpt, params["displacement"], self.interpolation, _get_fill(self.fill, inpt))


class FiveCrop(Transform):
    def __init__(self, size) -> None:
        super().__init__()
        self.size = _setup_size(size)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.five_crop(inpt, self.size)


class TenCrop(Transform):
    def __init__(self, size, vertical_flip: bool = False) -> None:
        super().__init__()
        self.size, self.vertical_flip = _setup_size(size), vertical_flip

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.ten_crop(inpt, self.size, self.vertical_flip)


# ---------------------------------------------------------------- colour
def _jitter_range(value, name: str, center: float = 1.0, bound=(0, float("inf")), clip_first_on_zero: bool = True):
    if value is None:
        return None
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be non negative.")
        value = [center - value, center + value]
        if clip_first_on_zero:
            value[0] = max(value[0], 0.0)
    elif isinstance(value, Sequence) and len(value) == 2:
        value = [float(v) for v in value]
    else:
        raise TypeError(f"{name}={value} should be a single number or a sequence with length 2.")
    if not bound[0] <= value[0] <= value[1] <= bound[1]:
        raise ValueError(f"{name} values should be between {bound}, but got {value}.")
    return None if value[0] == value[1] == center else (float(value[0]), float(value[1]))


class ColorJitter(Transform):
    """Random brightness, contrast, saturation and hue, in a random order."""

    def __init__(self, brightness=None, contrast=None, saturation=None, hue=None) -> None:
        super().__init__()
        self.brightness = _jitter_range(brightness, "brightness")
        self.contrast = _jitter_range(contrast, "contrast")
        self.saturation = _jitter_range(saturation, "saturation")
        self.hue = _jitter_range(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        fn_idx = randperm(4).tolist()
        factors = [None if r is None else _uniform(r[0], r[1])
                   for r in (self.brightness, self.contrast, self.saturation, self.hue)]
        return dict(fn_idx=fn_idx, factors=factors)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        fns = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)
        for k in params["fn_idx"]:
            if params["factors"][k] is not None:
                inpt = fns[k](inpt, params["factors"][k])
        return inpt


class Grayscale(Transform):
    def __init__(self, num_output_channels: int = 1) -> None:
        super().__init__()
        self.num_output_channels = num_output_channels

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.rgb_to_grayscale(inpt, self.num_output_channels)


class RandomGrayscale(_RandomApplyTransform):
    def __init__(self, p: float = 0.1) -> None:
        super().__init__(p=p)

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        return dict(num_input_channels=query_chw(flat_inputs)[0])

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.rgb_to_grayscale(inpt, params["num_input_channels"])


class RGB(Transform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.grayscale_to_rgb(inpt)


class GaussianBlur(Transform):
    def __init__(self, kernel_size, sigma=(0.1, 2.0)) -> None:
        super().__init__()
        self.kernel_size = _setup_size(kernel_size, "kernel_size")
        if any(k <= 0 or k % 2 == 0 for k in self.kernel_size):
            raise ValueError("Kernel size value should be an odd and positive number.")
        if isinstance(sigma, numbers.Number):
            if sigma <= 0:
                raise ValueError("If sigma is a single number, it must be positive.")
            sigma = (float(sigma), float(sigma))
        elif not (isinstance(sigma, Sequence) and len(sigma) == 2 and 0.0 < sigma[0] <= sigma[1]):
            raise ValueError("sigma should be a single number or a list/tuple with length 2.")
        self.sigma = [float(s) for s in sigma]

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        s = _uniform(self.sigma[0], self.sigma[1])
        return dict(sigma=[s, s])

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.gaussian_blur(inpt, self.kernel_size, params["sigma"])


class GaussianNoise(Transform):
    def __init__(self, mean: float = 0.0, sigma: float = 0.1, clip: bool = True) -> None:
        super().__init__()
        self.mean, self.sigma, self.clip = mean, sigma, clip

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.gaussian_noise(inpt, self.mean, self.sigma, self.clip)


class RandomInvert(_RandomApplyTransform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.invert(inpt)


class RandomPosterize(_RandomApplyTransform):
    def __init__(self, bits: int, p: float = 0.5) -> None:
        super().__init__(p=p)
        self.bits = bits

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.posterize(inpt, self.bits)


class RandomSolarize(_RandomApplyTransform):
    def __init__(self, threshold: float, p: float = 0.5) -> None:
        super().__init__(p=p)
        self.threshold = threshold

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.solarize(inpt, self.threshold)


class RandomAdjustSharpness(_RandomApplyTransform):
    def __init__(self, sharpness_factor: float, p: float = 0.5) -> None:
        super().__init__(p=p)
        self.sharpness_factor = sharpness_factor

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.adjust_sharpness(inpt, self.sharpness_factor)


class RandomAutocontrast(_RandomApplyTransform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.autocontrast(inpt)


class RandomEqualize(_RandomApplyTransform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.equalize(inpt)


# ---------------------------------------------------------------- erasing, mixing
class RandomErasing(_RandomApplyTransform):
    """Erase a random box (``scale`` of the area, aspect ``ratio``) with ``value`` or normal noise ("random")."""

    def __init__(self, p: float = 0.5, scale: Sequence[float] = (0.02, 0.33), ratio: Sequence[float] = (0.3, 3.3),
                 value=0.0, inplace: bool = False) -> None:
        super().__init__(p=p)
        if isinstance(value, str) and value != "random":
            raise ValueError("If value is str, it should be 'random'")
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        self.scale, self.ratio = scale, ratio
        if isinstance(value, (int, float)):
            self.value = [float(value)]
        elif isinstance(value, str):
            self.value = None
        else:
            self.value = [float(v) for v in value]
        self.inplace = inplace
        self._log_ratio = as_tensor(list(ratio), dtype=float32).log()

    def _needs_transform(self, inpt) -> bool:
        return super()._needs_transform(inpt) and not isinstance(inpt, (tv_tensors.Mask, tv_tensors.BoundingBoxes))

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        c, img_h, img_w = query_chw(flat_inputs)
        if self.value is not None and len(self.value) not in (1, c):
            raise ValueError(f"If value is a sequence, it should have either a single value or {c} (number of "
                             f"inpt channels)")
        area = img_h * img_w
        for _ in range(10):
            erase_area = area * _uniform(self.scale[0], self.scale[1])
            aspect = _log_uniform(self._log_ratio)
            h = int(round(math.sqrt(erase_area * aspect)))
            w = int(round(math.sqrt(erase_area / aspect)))
            if not (h < img_h and w < img_w):
                continue
            v = empty([c, h, w], dtype=float32).normal_() if self.value is None \
                else as_tensor(self.value)[:, None, None]
            i = int(randint(0, img_h - h + 1, size=(1,)).item())
            j = int(randint(0, img_w - w + 1, size=(1,)).item())
            return dict(i=i, j=j, h=h, w=w, v=v)
        return dict(i=0, j=0, h=img_h, w=img_w, v=None)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if params["v"] is None:
            return inpt
        return F.erase(inpt, params["i"], params["j"], params["h"], params["w"], params["v"], self.inplace)


def _default_labels(inputs):
    """The labels tensor: the second item of a (images, labels) pair, or a dict's 'labels'-like entry."""
    if isinstance(inputs, (tuple, list)):
        inputs = inputs[1]
    if _is_pure_tensor(inputs):
        return inputs
    if not isinstance(inputs, dict):
        raise ValueError("When using the default labels_getter, the input passed to forward must be a dictionary "
                         "or a two-tuple whose second item is a dictionary or a tensor")
    keys = [k for k in inputs if str(k).lower() == "labels"] or [k for k in inputs if "label" in str(k).lower()]
    if not keys:
        raise ValueError("Could not infer where the labels are in the sample.")
    return inputs[keys[0]]


class _BaseMixUpCutMix(Transform):
    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None, labels_getter="default") -> None:
        super().__init__()
        self.alpha = float(alpha)
        self._dist = Beta(as_tensor([alpha]), as_tensor([alpha]))
        self.num_classes = num_classes
        self._labels_getter = _default_labels if labels_getter == "default" else labels_getter

    def forward(self, *inputs: Any) -> Any:
        inputs = inputs if len(inputs) > 1 else inputs[0]
        flat, spec = _flatten(inputs)
        needs = self._needs_transform_list(flat)
        if any(_is_pil(x) or isinstance(x, (tv_tensors.BoundingBoxes, tv_tensors.Mask)) for x in flat):
            raise ValueError(f"{type(self).__name__}() does not support PIL images, bounding boxes and masks.")
        labels = self._labels_getter(inputs)
        if not isinstance(labels, Tensor):
            raise ValueError(f"The labels must be a tensor, but got {type(labels)} instead.")
        if labels.ndim not in (1, 2):
            raise ValueError(f"labels should be index based with shape (batch_size,) or probability based with "
                             f"shape (batch_size, num_classes), but got a tensor of shape {labels.shape} instead.")
        if labels.ndim == 1 and self.num_classes is None:
            raise ValueError("num_classes must be passed if the labels are index-based (1D)")
        params = {"labels": labels, "batch_size": labels.shape[0],
                  **self.make_params([x for x, n in zip(flat, needs) if n])}
        needs[next(k for k, x in enumerate(flat) if x is labels)] = True
        return _unflatten([self.transform(x, params) if n else x for x, n in zip(flat, needs)], spec)

    def _check_image(self, inpt: Tensor, batch_size: int) -> None:
        expected = 5 if isinstance(inpt, tv_tensors.Video) else 4
        if inpt.ndim != expected:
            raise ValueError(f"Expected a batched input with {expected} dims, but got {inpt.ndim} dimensions instead.")
        if inpt.shape[0] != batch_size:
            raise ValueError(f"The batch size of the image or video does not match the batch size of the labels: "
                             f"{inpt.shape[0]} != {batch_size}.")

    def _mixup_label(self, label: Tensor, lam: float) -> Tensor:
        if label.ndim == 1:
            label = nn.functional.one_hot(label, num_classes=self.num_classes)
        if not label.is_floating_point():
            label = label.float()
        return label.roll(1, 0).mul(1.0 - lam) + label.mul(lam)

    def _sample_lam(self) -> float:
        return float(self._dist.sample(()).item())


class MixUp(_BaseMixUpCutMix):
    """Blend each image (and one-hot label) with the previous one in the batch by a Beta(alpha, alpha) weight."""

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        return dict(lam=self._sample_lam())

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        lam = params["lam"]
        if inpt is params["labels"]:
            return self._mixup_label(inpt, lam)
        if isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or _is_pure_tensor(inpt):
            self._check_image(inpt, params["batch_size"])
            x = inpt.as_subclass(Tensor) if isinstance(inpt, tv_tensors.TVTensor) else inpt
            out = x.roll(1, 0).mul(1.0 - lam) + x.mul(lam)
            return tv_tensors.wrap(out, like=inpt) if isinstance(inpt, tv_tensors.TVTensor) else out
        return inpt


class CutMix(_BaseMixUpCutMix):
    """Paste a random box of the previous image in the batch; labels mix by the pasted area."""

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        lam = self._sample_lam()
        H, W = query_size(flat_inputs)
        r_x = int(randint(0, W, size=(1,)).item())
        r_y = int(randint(0, H, size=(1,)).item())
        r = 0.5 * math.sqrt(1.0 - lam)
        rw, rh = int(r * W), int(r * H)
        x1, y1 = max(r_x - rw, 0), max(r_y - rh, 0)
        x2, y2 = min(r_x + rw, W), min(r_y + rh, H)
        return dict(box=(x1, y1, x2, y2), lam_adjusted=float(1.0 - (x2 - x1) * (y2 - y1) / (W * H)))

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if inpt is params["labels"]:
            return self._mixup_label(inpt, params["lam_adjusted"])
        if isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or _is_pure_tensor(inpt):
            self._check_image(inpt, params["batch_size"])
            x1, y1, x2, y2 = params["box"]
            x = inpt.as_subclass(Tensor) if isinstance(inpt, tv_tensors.TVTensor) else inpt
            out = x.clone()
            out[..., y1:y2, x1:x2] = x.roll(1, 0)[..., y1:y2, x1:x2]
            return tv_tensors.wrap(out, like=inpt) if isinstance(inpt, tv_tensors.TVTensor) else out
        return inpt


# ---------------------------------------------------------------- automatic augmentation
class AutoAugmentPolicy(enum.Enum):
    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


def _linspace(lo: float, hi: float):
    return lambda bins, h, w: linspace(lo, hi, bins)


def _posterize_bins(top: int, span: int):
    return lambda bins, h, w: (top - arange(bins) / ((bins - 1) / span)).round().int()


# the published policies: (op, probability, magnitude bin) pairs
_POLICIES = {
    AutoAugmentPolicy.IMAGENET: [
        (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)), (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
        (("Solarize", 0.6, 3), ("Equalize", 0.6, None)), (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
        (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)), (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
        (("Rotate", 0.8, 8), ("Color", 0.4, 0)), (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
        (("Equalize", 0.0, None), ("Equalize", 0.8, None)), (("Invert", 0.6, None), ("Equalize", 1.0, None)),
        (("Color", 0.6, 4), ("Contrast", 1.0, 8)), (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
        (("Color", 0.8, 8), ("Solarize", 0.8, 7)), (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
        (("ShearX", 0.6, 5), ("Equalize", 1.0, None)), (("Color", 0.4, 0), ("Equalize", 0.6, None)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Invert", 0.6, None), ("Equalize", 1.0, None)), (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    ],
    AutoAugmentPolicy.CIFAR10: [
        (("Invert", 0.1, None), ("Contrast", 0.2, 6)), (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
        (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)), (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)), (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
        (("Color", 0.4, 3), ("Brightness", 0.6, 7)), (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
        (("Equalize", 0.6, None), ("Equalize", 0.5, None)), (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
        (("Color", 0.7, 7), ("TranslateX", 0.5, 8)), (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
        (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)), (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
        (("Solarize", 0.5, 2), ("Invert", 0.0, None)), (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.2, None), ("Equalize", 0.6, None)), (("Color", 0.9, 9), ("Equalize", 0.6, None)),
        (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)), (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
        (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)), (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)), (("Equalize", 0.8, None), ("Invert", 0.1, None)),
        (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
    ],
    AutoAugmentPolicy.SVHN: [
        (("ShearX", 0.9, 4), ("Invert", 0.2, None)), (("ShearY", 0.9, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.6, None), ("Solarize", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Equalize", 0.6, None), ("Rotate", 0.9, 3)), (("ShearX", 0.9, 4), ("AutoContrast", 0.8, None)),
        (("ShearY", 0.9, 8), ("Invert", 0.4, None)), (("ShearY", 0.9, 5), ("Solarize", 0.2, 6)),
        (("Invert", 0.9, None), ("AutoContrast", 0.8, None)), (("Equalize", 0.6, None), ("Rotate", 0.9, 3)),
        (("ShearX", 0.9, 4), ("Solarize", 0.3, 3)), (("ShearY", 0.8, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.9, None), ("TranslateY", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Contrast", 0.3, 3), ("Rotate", 0.8, 4)), (("Invert", 0.8, None), ("TranslateY", 0.0, 2)),
        (("ShearY", 0.7, 6), ("Solarize", 0.4, 8)), (("Invert", 0.6, None), ("Rotate", 0.8, 4)),
        (("ShearY", 0.3, 7), ("TranslateX", 0.9, 3)), (("ShearX", 0.1, 6), ("Invert", 0.6, None)),
        (("Solarize", 0.7, 2), ("TranslateY", 0.6, 7)), (("ShearY", 0.8, 4), ("Invert", 0.8, None)),
        (("ShearX", 0.7, 9), ("TranslateY", 0.8, 3)), (("ShearY", 0.8, 5), ("AutoContrast", 0.7, None)),
        (("ShearX", 0.7, 2), ("Invert", 0.1, None)),
    ],
}


def apply_op(img, op: str, magnitude: float, interpolation, fill):
    """One auto-augmentation op at ``magnitude`` (torchvision's definitions of each)."""
    if op == "Identity":
        return img
    if op in ("ShearX", "ShearY"):
        s = math.degrees(math.atan(magnitude))
        return F.affine(img, 0.0, [0, 0], 1.0, [s, 0.0] if op == "ShearX" else [0.0, s], interpolation, fill, [0, 0])
    if op in ("TranslateX", "TranslateY"):
        t = [int(magnitude), 0] if op == "TranslateX" else [0, int(magnitude)]
        return F.affine(img, 0.0, t, 1.0, [0.0, 0.0], interpolation, fill)
    if op == "Rotate":
        return F.rotate(img, magnitude, interpolation, fill=fill)
    if op == "Brightness":
        return F.adjust_brightness(img, 1.0 + magnitude)
    if op == "Color":
        return F.adjust_saturation(img, 1.0 + magnitude)
    if op == "Contrast":
        return F.adjust_contrast(img, 1.0 + magnitude)
    if op == "Sharpness":
        return F.adjust_sharpness(img, 1.0 + magnitude)
    if op == "Posterize":
        return F.posterize(img, int(magnitude))
    if op == "Solarize":
        bound = (1.0 if img.is_floating_point() else 255.0) if isinstance(img, Tensor) else 255.0
        return F.solarize(img, bound * magnitude)
    if op == "AutoContrast":
        return F.autocontrast(img)
    if op == "Equalize":
        return F.equalize(img)
    if op == "Invert":
        return F.invert(img)
    raise ValueError(f"No transform available for {op}")


class _AutoAugmentBase(Transform):
    _SPACE: dict = {}

    def __init__(self, *, interpolation=InterpolationMode.NEAREST, fill=None) -> None:
        super().__init__()
        self.interpolation, self.fill = interpolation, fill

    def _extract_image(self, inputs) -> tuple:
        flat, spec = _flatten(inputs if len(inputs) > 1 else inputs[0])
        needs = self._needs_transform_list(flat)
        found = []
        for k, (x, n) in enumerate(zip(flat, needs)):
            if n and _is_image(x):
                found.append(k)
            elif isinstance(x, (tv_tensors.BoundingBoxes, tv_tensors.Mask)):
                raise TypeError(f"Inputs of type {type(x).__name__} are not supported by {type(self).__name__}()")
        if not found:
            raise TypeError("Found no image in the sample.")
        if len(found) > 1:
            raise TypeError(f"Auto augment transformations are only properly defined for a single image, but found "
                            f"{len(found)}.")
        return flat, spec, found[0]

    def _random_op(self) -> tuple[str, tuple]:
        keys = tuple(self._SPACE)
        key = keys[int(randint(0, len(keys), size=()).item())]
        return key, self._SPACE[key]

    @staticmethod
    def _signed(magnitude: float, signed: bool) -> float:
        return -magnitude if signed and rand(()).item() <= 0.5 else magnitude

    def _apply(self, img, op: str, magnitude: float):
        return apply_op(img, op, magnitude, self.interpolation, _get_fill(self.fill, img))


_COMMON_SPACE = {
    "ShearX": (_linspace(0.0, 0.3), True), "ShearY": (_linspace(0.0, 0.3), True),
    "TranslateX": (lambda bins, h, w: linspace(0.0, 150.0 / 331.0 * w, bins), True),
    "TranslateY": (lambda bins, h, w: linspace(0.0, 150.0 / 331.0 * h, bins), True),
    "Rotate": (_linspace(0.0, 30.0), True), "Brightness": (_linspace(0.0, 0.9), True),
    "Color": (_linspace(0.0, 0.9), True), "Contrast": (_linspace(0.0, 0.9), True),
    "Sharpness": (_linspace(0.0, 0.9), True), "Posterize": (_posterize_bins(8, 4), False),
    "Solarize": (_linspace(1.0, 0.0), False), "AutoContrast": (lambda bins, h, w: None, False),
    "Equalize": (lambda bins, h, w: None, False),
}


class AutoAugment(_AutoAugmentBase):
    """One of the policy's 25 sub-policies per call; each of its two ops applies with its probability."""

    _SPACE = {**_COMMON_SPACE, "Invert": (lambda bins, h, w: None, False)}

    def __init__(self, policy: AutoAugmentPolicy = AutoAugmentPolicy.IMAGENET,
                 interpolation=InterpolationMode.NEAREST, fill=None) -> None:
        super().__init__(interpolation=interpolation, fill=fill)
        if policy not in _POLICIES:
            raise ValueError(f"The provided policy {policy} is not recognized.")
        self.policy = policy
        self._policies = _POLICIES[policy]

    def forward(self, *inputs: Any) -> Any:
        flat, spec, idx = self._extract_image(inputs)
        img = flat[idx]
        h, w = F.get_size(img)
        policy = self._policies[int(randint(0, len(self._policies), size=()).item())]
        for op, probability, bin_idx in policy:
            if not rand(()).item() <= probability:
                continue
            fn, signed = self._SPACE[op]
            mags = fn(10, h, w)
            magnitude = self._signed(float(mags[bin_idx].item()), signed) if mags is not None else 0.0
            img = self._apply(img, op, magnitude)
        flat[idx] = img
        return _unflatten(flat, spec)


class RandAugment(_AutoAugmentBase):
    """``num_ops`` ops drawn uniformly, each at the fixed ``magnitude`` bin."""

    _SPACE = {"Identity": (lambda bins, h, w: None, False), **_COMMON_SPACE}

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation=InterpolationMode.NEAREST, fill=None) -> None:
        super().__init__(interpolation=interpolation, fill=fill)
        if not isinstance(num_ops, int) or num_ops < 0:
            raise ValueError(f"num_ops should be a non-negative integer, but got {num_ops} instead.")
        self.num_ops, self.magnitude, self.num_magnitude_bins = num_ops, magnitude, num_magnitude_bins

    def forward(self, *inputs: Any) -> Any:
        flat, spec, idx = self._extract_image(inputs)
        img = flat[idx]
        h, w = F.get_size(img)
        for _ in range(self.num_ops):
            op, (fn, signed) = self._random_op()
            mags = fn(self.num_magnitude_bins, h, w)
            magnitude = self._signed(float(mags[self.magnitude].item()), signed) if mags is not None else 0.0
            img = self._apply(img, op, magnitude)
        flat[idx] = img
        return _unflatten(flat, spec)


class TrivialAugmentWide(_AutoAugmentBase):
    """One op drawn uniformly at a uniformly drawn magnitude bin, over wider ranges."""

    _SPACE = {
        "Identity": (lambda bins, h, w: None, False),
        "ShearX": (_linspace(0.0, 0.99), True), "ShearY": (_linspace(0.0, 0.99), True),
        "TranslateX": (_linspace(0.0, 32.0), True), "TranslateY": (_linspace(0.0, 32.0), True),
        "Rotate": (_linspace(0.0, 135.0), True), "Brightness": (_linspace(0.0, 0.99), True),
        "Color": (_linspace(0.0, 0.99), True), "Contrast": (_linspace(0.0, 0.99), True),
        "Sharpness": (_linspace(0.0, 0.99), True), "Posterize": (_posterize_bins(8, 6), False),
        "Solarize": (_linspace(1.0, 0.0), False), "AutoContrast": (lambda bins, h, w: None, False),
        "Equalize": (lambda bins, h, w: None, False),
    }

    def __init__(self, num_magnitude_bins: int = 31, interpolation=InterpolationMode.NEAREST, fill=None) -> None:
        super().__init__(interpolation=interpolation, fill=fill)
        self.num_magnitude_bins = num_magnitude_bins

    def forward(self, *inputs: Any) -> Any:
        flat, spec, idx = self._extract_image(inputs)
        img = flat[idx]
        h, w = F.get_size(img)
        op, (fn, signed) = self._random_op()
        mags = fn(self.num_magnitude_bins, h, w)
        if mags is not None:
            magnitude = float(mags[int(randint(0, self.num_magnitude_bins, size=()).item())].item())
            magnitude = self._signed(magnitude, signed)
        else:
            magnitude = 0.0
        flat[idx] = self._apply(img, op, magnitude)
        return _unflatten(flat, spec)


class AugMix(_AutoAugmentBase):
    """AugMix: ``mixture_width`` chains of 1-3 random ops, mixed by Dirichlet weights, then mixed with the
    original by a Dirichlet(alpha, alpha) pair."""

    _PARTIAL = {
        "ShearX": (_linspace(0.0, 0.3), True), "ShearY": (_linspace(0.0, 0.3), True),
        "TranslateX": (lambda bins, h, w: linspace(0.0, w / 3.0, bins), True),
        "TranslateY": (lambda bins, h, w: linspace(0.0, h / 3.0, bins), True),
        "Rotate": (_linspace(0.0, 30.0), True), "Posterize": (_posterize_bins(4, 4), False),
        "Solarize": (_linspace(1.0, 0.0), False), "AutoContrast": (lambda bins, h, w: None, False),
        "Equalize": (lambda bins, h, w: None, False),
    }
    _FULL = {**_PARTIAL, "Brightness": (_linspace(0.0, 0.9), True), "Color": (_linspace(0.0, 0.9), True),
             "Contrast": (_linspace(0.0, 0.9), True), "Sharpness": (_linspace(0.0, 0.9), True)}

    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1, alpha: float = 1.0,
                 all_ops: bool = True, interpolation=InterpolationMode.BILINEAR, fill=None) -> None:
        super().__init__(interpolation=interpolation, fill=fill)
        if not 1 <= severity <= 10:
            raise ValueError(f"The severity must be between [1, 10]. Got {severity} instead.")
        self.severity, self.mixture_width, self.chain_depth = severity, mixture_width, chain_depth
        self.alpha, self.all_ops = alpha, all_ops
        self._SPACE = self._FULL if all_ops else self._PARTIAL

    def forward(self, *inputs: Any) -> Any:
        flat, spec, idx = self._extract_image(inputs)
        orig = flat[idx]
        h, w = F.get_size(orig)
        img = orig.as_subclass(Tensor) if isinstance(orig, Tensor) else F.pil_to_tensor(orig)
        dims = list(img.shape)
        batch = img.reshape([1] * max((5 if isinstance(orig, tv_tensors.Video) else 4) - img.ndim, 0) + dims)
        bdims = [batch.shape[0]] + [1] * (batch.ndim - 1)
        m = sample_dirichlet(as_tensor([self.alpha, self.alpha]).expand(bdims[0], -1))
        weights = sample_dirichlet(as_tensor([self.alpha] * self.mixture_width).expand(bdims[0], -1)) \
            * m[:, 1].reshape(bdims[0], -1)
        mix = m[:, 0].reshape(bdims) * batch
        for i in range(self.mixture_width):
            aug = batch
            depth = self.chain_depth if self.chain_depth > 0 else int(randint(1, 4, size=(1,)).item())
            for _ in range(depth):
                op, (fn, signed) = self._random_op()
                mags = fn(10, h, w)
                magnitude = 0.0
                if mags is not None:
                    magnitude = self._signed(float(mags[int(randint(0, self.severity, size=()).item())].item()),
                                             signed)
                aug = self._apply(aug, op, magnitude)
            mix = mix + weights[:, i].reshape(bdims) * aug
        mix = mix.reshape(dims).to(img.dtype)
        if isinstance(orig, (tv_tensors.Image, tv_tensors.Video)):
            mix = tv_tensors.wrap(mix, like=orig)
        elif _is_pil(orig):
            mix = F.to_pil_image(mix)
        flat[idx] = mix
        return _unflatten(flat, spec)


# ---------------------------------------------------------------- detection samples (images, boxes, masks, labels)
def _get_boxes(flat: list) -> tv_tensors.BoundingBoxes:
    try:
        return next(x for x in flat if isinstance(x, tv_tensors.BoundingBoxes))
    except StopIteration:
        raise ValueError("No bounding boxes were found in the sample") from None


class ClampBoundingBoxes(Transform):
    def _needs_transform(self, inpt) -> bool:
        return isinstance(inpt, tv_tensors.BoundingBoxes)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.clamp_bounding_boxes(inpt)


class ConvertBoundingBoxFormat(Transform):
    def __init__(self, format) -> None:
        super().__init__()
        self.format = tv_tensors.BoundingBoxFormat[format.upper()] if isinstance(format, str) else format

    def _needs_transform(self, inpt) -> bool:
        return isinstance(inpt, tv_tensors.BoundingBoxes)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.convert_bounding_box_format(inpt, new_format=self.format)


class SanitizeBoundingBoxes(Transform):
    """Drop boxes smaller than ``min_size``/``min_area`` or outside the canvas, with their labels and masks."""

    def __init__(self, min_size: float = 1.0, min_area: float = 1.0, labels_getter="default") -> None:
        super().__init__()
        if min_size < 1 or min_area < 1:
            raise ValueError(f"min_size and min_area must be >= 1, got {min_size} and {min_area}.")
        self.min_size, self.min_area, self.labels_getter = min_size, min_area, labels_getter
        self._labels_getter = (_default_labels if labels_getter == "default"
                               else (lambda _: None) if labels_getter is None else labels_getter)

    def forward(self, *inputs: Any) -> Any:
        inputs = inputs if len(inputs) > 1 else inputs[0]
        labels = self._labels_getter(inputs)
        labels = (labels,) if isinstance(labels, Tensor) else labels
        flat, spec = _flatten(inputs)
        boxes = _get_boxes(flat)
        xyxy = F.convert_bounding_box_format(boxes, new_format="XYXY").as_subclass(Tensor)
        h, w = boxes.canvas_size
        ws, hs = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
        valid = (ws >= self.min_size) & (hs >= self.min_size) & (xyxy >= 0).all(dim=-1) & (ws * hs >= self.min_area)
        valid = valid & (xyxy[:, 0] <= w) & (xyxy[:, 2] <= w) & (xyxy[:, 1] <= h) & (xyxy[:, 3] <= h)
        out = []
        for x in flat:
            is_label = labels is not None and any(x is label for label in labels)
            if is_label or isinstance(x, (tv_tensors.BoundingBoxes, tv_tensors.Mask)):
                kept = x.as_subclass(Tensor)[valid] if isinstance(x, tv_tensors.TVTensor) else x[valid]
                x = kept if is_label else tv_tensors.wrap(kept, like=x)
            out.append(x)
        return _unflatten(out, spec)


class RandomZoomOut(_RandomApplyTransform):
    """Place the image on a canvas ``side_range`` times larger, at a random offset, filled with ``fill``."""

    def __init__(self, fill=0, side_range: Sequence[float] = (1.0, 4.0), p: float = 0.5) -> None:
        super().__init__(p=p)
        if len(side_range) != 2 or side_range[0] < 1.0 or side_range[0] > side_range[1]:
            raise ValueError(f"Invalid side range provided {side_range}.")
        self.fill, self.side_range = fill, side_range

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        h, w = query_size(flat_inputs)
        r = self.side_range[0] + rand(1) * (self.side_range[1] - self.side_range[0])
        cw, ch = int(w * r), int(h * r)
        r = rand(2)
        left, top = int((cw - w) * r[0]), int((ch - h) * r[1])
        return dict(padding=[left, top, cw - (left + w), ch - (top + h)])

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.pad(inpt, params["padding"], _get_fill(self.fill, inpt))


class RandomIoUCrop(Transform):
    """SSD's crop: a random window keeping some box centres, with a minimum IoU drawn from ``sampler_options``."""

    def __init__(self, min_scale: float = 0.3, max_scale: float = 1.0, min_aspect_ratio: float = 0.5,
                 max_aspect_ratio: float = 2.0, sampler_options: list[float] | None = None, trials: int = 40) -> None:
        super().__init__()
        self.min_scale, self.max_scale = min_scale, max_scale
        self.min_aspect_ratio, self.max_aspect_ratio = min_aspect_ratio, max_aspect_ratio
        self.options = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0] if sampler_options is None else sampler_options
        self.trials = trials

    def check_inputs(self, flat_inputs: list) -> None:
        if not (any(isinstance(x, tv_tensors.BoundingBoxes) for x in flat_inputs)
                and any(_is_image(x) for x in flat_inputs)):
            raise TypeError(f"{type(self).__name__}() requires input sample to contain tensor or PIL images "
                            "and bounding boxes. Sample can also contain masks.")

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        from ...ops import box_iou
        orig_h, orig_w = query_size(flat_inputs)
        boxes = _get_boxes(flat_inputs)
        while True:
            min_iou = self.options[int(randint(0, len(self.options), size=(1,)).item())]
            if min_iou >= 1.0:
                return dict()
            for _ in range(self.trials):
                r = self.min_scale + (self.max_scale - self.min_scale) * rand(2)
                new_w, new_h = int(orig_w * r[0]), int(orig_h * r[1])
                if new_h == 0 or not self.min_aspect_ratio <= new_w / new_h <= self.max_aspect_ratio:
                    continue
                r = rand(2)
                left, top = int((orig_w - new_w) * r[0]), int((orig_h - new_h) * r[1])
                right, bottom = left + new_w, top + new_h
                if left == right or top == bottom:
                    continue
                xyxy = F.convert_bounding_box_format(boxes, new_format="XYXY").as_subclass(Tensor)
                cx, cy = 0.5 * (xyxy[..., 0] + xyxy[..., 2]), 0.5 * (xyxy[..., 1] + xyxy[..., 3])
                inside = (left < cx) & (cx < right) & (top < cy) & (cy < bottom)
                if not inside.any():
                    continue
                ious = box_iou(xyxy[inside], as_tensor([[left, top, right, bottom]], dtype=xyxy.dtype))
                if ious.max() < min_iou:
                    continue
                return dict(top=top, left=left, height=new_h, width=new_w, inside=inside)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not params:
            return inpt
        out = F.crop(inpt, params["top"], params["left"], params["height"], params["width"])
        if isinstance(out, tv_tensors.BoundingBoxes):
            out[~params["inside"]] = 0
        return out


class RandomPhotometricDistort(Transform):
    """SSD's colour distortion: each of brightness, contrast (before or after), saturation, hue and a channel
    permutation with probability ``p``."""

    def __init__(self, brightness=(0.875, 1.125), contrast=(0.5, 1.5), saturation=(0.5, 1.5), hue=(-0.05, 0.05),
                 p: float = 0.5) -> None:
        super().__init__()
        self.brightness = _jitter_range(brightness, "brightness")
        self.contrast = _jitter_range(contrast, "contrast")
        self.hue = _jitter_range(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)
        self.saturation = _jitter_range(saturation, "saturation")
        self.p = p

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        channels = query_chw(flat_inputs)[0]
        params = {key: _uniform(r[0], r[1]) if rand(1).item() < self.p else None
                  for key, r in (("brightness", self.brightness), ("contrast", self.contrast),
                                 ("saturation", self.saturation), ("hue", self.hue))}
        params["contrast_before"] = bool(rand(()).item() < 0.5)
        params["permutation"] = randperm(channels).tolist() if rand(1).item() < self.p else None
        return params

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if params["brightness"] is not None:
            inpt = F.adjust_brightness(inpt, params["brightness"])
        if params["contrast"] is not None and params["contrast_before"]:
            inpt = F.adjust_contrast(inpt, params["contrast"])
        if params["saturation"] is not None:
            inpt = F.adjust_saturation(inpt, params["saturation"])
        if params["hue"] is not None:
            inpt = F.adjust_hue(inpt, params["hue"])
        if params["contrast"] is not None and not params["contrast_before"]:
            inpt = F.adjust_contrast(inpt, params["contrast"])
        if params["permutation"] is not None:
            inpt = F.permute_channels(inpt, params["permutation"])
        return inpt


class RandomChannelPermutation(Transform):
    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        return dict(permutation=randperm(query_chw(flat_inputs)[0]).tolist())

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.permute_channels(inpt, params["permutation"])


class _RandomSize(Transform):
    def __init__(self, interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        super().__init__()
        self.interpolation, self.antialias = interpolation, antialias

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.resize(inpt, params["size"], self.interpolation, antialias=self.antialias)


class ScaleJitter(_RandomSize):
    def __init__(self, target_size: tuple[int, int], scale_range: tuple[float, float] = (0.1, 2.0),
                 interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        super().__init__(interpolation, antialias)
        self.target_size, self.scale_range = target_size, scale_range

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        h, w = query_size(flat_inputs)
        scale = self.scale_range[0] + rand(1) * (self.scale_range[1] - self.scale_range[0])
        r = min(self.target_size[1] / h, self.target_size[0] / w) * scale
        return dict(size=(int(w * r), int(h * r))[::-1])


class RandomShortestSize(_RandomSize):
    def __init__(self, min_size, max_size: int | None = None, interpolation=InterpolationMode.BILINEAR,
                 antialias: bool | None = True) -> None:
        super().__init__(interpolation, antialias)
        self.min_size = [min_size] if isinstance(min_size, int) else list(min_size)
        self.max_size = max_size

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        h, w = query_size(flat_inputs)
        min_size = self.min_size[int(randint(0, len(self.min_size), size=()).item())]
        r = min_size / min(h, w)
        if self.max_size is not None:
            r = min(r, self.max_size / max(h, w))
        return dict(size=(int(h * r), int(w * r)))


class RandomResize(_RandomSize):
    def __init__(self, min_size: int, max_size: int, interpolation=InterpolationMode.BILINEAR,
                 antialias: bool | None = True) -> None:
        super().__init__(interpolation, antialias)
        self.min_size, self.max_size = min_size, max_size

    def make_params(self, flat_inputs: list) -> dict[str, Any]:
        return dict(size=[int(randint(self.min_size, self.max_size, size=()).item())])

