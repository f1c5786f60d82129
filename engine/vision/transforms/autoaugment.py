"""torchvision.transforms.autoaugment (v1): AutoAugment, RandAugment, TrivialAugmentWide.

The ops are v1's functional ones; the draws follow v1, which differs from v2: AutoAugment draws its
sub-policy, both probabilities and both signs up front; RandAugment and TrivialAugmentWide draw a
sign with ``randint(2)``; Solarize thresholds run 255 -> 0.
"""
from __future__ import annotations

import math

from ... import nn
from ...core.creation import arange, as_tensor, linspace, rand, randint
from ...core.tensor import Tensor
from ...distributions.gamma import sample_dirichlet
from . import functional as F
from .functional import InterpolationMode
from .v2._transforms import _POLICIES, AutoAugmentPolicy

__all__ = ["AutoAugmentPolicy", "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix"]


def _apply_op(img, op: str, magnitude: float, interpolation, fill):
    if op == "ShearX":
        return F.affine(img, 0.0, [0, 0], 1.0, [math.degrees(math.atan(magnitude)), 0.0], interpolation, fill, [0, 0])
    if op == "ShearY":
        return F.affine(img, 0.0, [0, 0], 1.0, [0.0, math.degrees(math.atan(magnitude))], interpolation, fill, [0, 0])
    if op == "TranslateX":
        return F.affine(img, 0.0, [int(magnitude), 0], 1.0, [0.0, 0.0], interpolation, fill)
    if op == "TranslateY":
        return F.affine(img, 0.0, [0, int(magnitude)], 1.0, [0.0, 0.0], interpolation, fill)
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
        return F.solarize(img, magnitude)
    if op == "AutoContrast":
        return F.autocontrast(img)
    if op == "Equalize":
        return F.equalize(img)
    if op == "Invert":
        return F.invert(img)
    if op == "Identity":
        return img
    raise ValueError(f"The provided operator {op} is not recognized.")


def _space(bins: int, h: int, w: int, wide: bool = False, identity: bool = True, invert: bool = False) -> dict:
    """op -> (magnitudes, signed); None stands for torchvision's 0-d tensor (an op without magnitude)."""
    top = 0.99 if wide else 0.9
    space = {"Identity": (None, False)} if identity else {}
    space |= {
        "ShearX": (linspace(0.0, 0.99 if wide else 0.3, bins), True),
        "ShearY": (linspace(0.0, 0.99 if wide else 0.3, bins), True),
        "TranslateX": (linspace(0.0, 32.0 if wide else 150.0 / 331.0 * w, bins), True),
        "TranslateY": (linspace(0.0, 32.0 if wide else 150.0 / 331.0 * h, bins), True),
        "Rotate": (linspace(0.0, 135.0 if wide else 30.0, bins), True),
        "Brightness": (linspace(0.0, top, bins), True), "Color": (linspace(0.0, top, bins), True),
        "Contrast": (linspace(0.0, top, bins), True), "Sharpness": (linspace(0.0, top, bins), True),
        "Posterize": (8 - (arange(bins) / ((bins - 1) / (6 if wide else 4))).round().int(), False),
        "Solarize": (linspace(255.0, 0.0, bins), False),
        "AutoContrast": (None, False), "Equalize": (None, False),
    }
    if invert:
        space["Invert"] = (None, False)
    return space


def _fill(img, fill):
    if not isinstance(img, Tensor) or fill is None:
        return fill
    return [float(fill)] * F.get_image_num_channels(img) if isinstance(fill, (int, float)) else [float(f) for f in fill]


class AutoAugment(nn.Module):
    def __init__(self, policy: AutoAugmentPolicy = AutoAugmentPolicy.IMAGENET,
                 interpolation=InterpolationMode.NEAREST, fill=None) -> None:
        super().__init__()
        if policy not in _POLICIES:
            raise ValueError(f"The provided policy {policy} is not recognized.")
        self.policy, self.interpolation, self.fill = policy, interpolation, fill
        self.policies = _POLICIES[policy]

    @staticmethod
    def get_params(transform_num: int) -> tuple[int, Tensor, Tensor]:
        policy_id = int(randint(0, transform_num, size=(1,)).item())
        return policy_id, rand((2,)), randint(0, 2, size=(2,))

    def forward(self, img):
        fill = _fill(img, self.fill)
        _, h, w = F.get_dimensions(img)
        policy_id, probs, signs = self.get_params(len(self.policies))
        space = _space(10, h, w, identity=False, invert=True)
        for i, (op, p, magnitude_id) in enumerate(self.policies[policy_id]):
            if probs[i].item() <= p:
                magnitudes, signed = space[op]
                magnitude = float(magnitudes[magnitude_id].item()) if magnitude_id is not None else 0.0
                if signed and signs[i].item() == 0:
                    magnitude *= -1.0
                img = _apply_op(img, op, magnitude, self.interpolation, fill)
        return img

    def __repr__(self) -> str:
        return f"{type(self).__name__}(policy={self.policy}, fill={self.fill})"


class RandAugment(nn.Module):
    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation=InterpolationMode.NEAREST, fill=None) -> None:
        super().__init__()
        self.num_ops, self.magnitude, self.num_magnitude_bins = num_ops, magnitude, num_magnitude_bins
        self.interpolation, self.fill = interpolation, fill

    def forward(self, img):
        fill = _fill(img, self.fill)
        _, h, w = F.get_dimensions(img)
        for _ in range(self.num_ops):
            space = _space(self.num_magnitude_bins, h, w)
            op = list(space)[int(randint(0, len(space), size=(1,)).item())]
            magnitudes, signed = space[op]
            magnitude = float(magnitudes[self.magnitude].item()) if magnitudes is not None else 0.0
            if signed and randint(0, 2, size=(1,)).item():
                magnitude *= -1.0
            img = _apply_op(img, op, magnitude, self.interpolation, fill)
        return img

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_ops={self.num_ops}, magnitude={self.magnitude}, "
                f"num_magnitude_bins={self.num_magnitude_bins}, interpolation={self.interpolation}, fill={self.fill})")


class TrivialAugmentWide(nn.Module):
    def __init__(self, num_magnitude_bins: int = 31, interpolation=InterpolationMode.NEAREST, fill=None) -> None:
        super().__init__()
        self.num_magnitude_bins, self.interpolation, self.fill = num_magnitude_bins, interpolation, fill

    def forward(self, img):
        fill = _fill(img, self.fill)
        space = _space(self.num_magnitude_bins, 0, 0, wide=True)
        op = list(space)[int(randint(0, len(space), size=(1,)).item())]
        magnitudes, signed = space[op]
        magnitude = 0.0
        if magnitudes is not None:
            magnitude = float(magnitudes[int(randint(0, len(magnitudes), size=(1,)).item())].item())
        if signed and randint(0, 2, size=(1,)).item():
            magnitude *= -1.0
        return _apply_op(img, op, magnitude, self.interpolation, fill)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_magnitude_bins={self.num_magnitude_bins}, "
                f"interpolation={self.interpolation}, fill={self.fill})")


class AugMix(nn.Module):
    """AugMix with v1's draws (a sign is ``randint(2)``; Solarize thresholds 255 -> 0)."""

    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1, alpha: float = 1.0,
                 all_ops: bool = True, interpolation=InterpolationMode.BILINEAR, fill=None) -> None:
        super().__init__()
        if not 1 <= severity <= 10:
            raise ValueError(f"The severity must be between [1, 10]. Got {severity} instead.")
        self.severity, self.mixture_width, self.chain_depth = severity, mixture_width, chain_depth
        self.alpha, self.all_ops, self.interpolation, self.fill = alpha, all_ops, interpolation, fill

    def _space(self, h: int, w: int) -> dict:
        space = {"ShearX": (linspace(0.0, 0.3, 10), True), "ShearY": (linspace(0.0, 0.3, 10), True),
                 "TranslateX": (linspace(0.0, w / 3.0, 10), True), "TranslateY": (linspace(0.0, h / 3.0, 10), True),
                 "Rotate": (linspace(0.0, 30.0, 10), True),
                 "Posterize": (4 - (arange(10) / ((10 - 1) / 4)).round().int(), False),
                 "Solarize": (linspace(255.0, 0.0, 10), False), "AutoContrast": (None, False),
                 "Equalize": (None, False)}
        if self.all_ops:
            space |= {k: (linspace(0.0, 0.9, 10), True) for k in ("Brightness", "Color", "Contrast", "Sharpness")}
        return space

    def forward(self, orig_img):
        fill = _fill(orig_img, self.fill)
        _, h, w = F.get_dimensions(orig_img)
        img = orig_img if isinstance(orig_img, Tensor) else F.pil_to_tensor(orig_img)
        space = self._space(h, w)
        dims = list(img.shape)
        batch = img.reshape([1] * max(4 - img.ndim, 0) + dims)
        bdims = [batch.shape[0]] + [1] * (batch.ndim - 1)
        m = sample_dirichlet(as_tensor([self.alpha, self.alpha]).expand(bdims[0], -1))
        weights = sample_dirichlet(as_tensor([self.alpha] * self.mixture_width).expand(bdims[0], -1)) \
            * m[:, 1].reshape(bdims[0], -1)
        mix = m[:, 0].reshape(bdims) * batch
        for i in range(self.mixture_width):
            aug = batch
            depth = self.chain_depth if self.chain_depth > 0 else int(randint(1, 4, size=(1,)).item())
            for _ in range(depth):
                op = list(space)[int(randint(0, len(space), size=(1,)).item())]
                magnitudes, signed = space[op]
                magnitude = 0.0
                if magnitudes is not None:
                    magnitude = float(magnitudes[int(randint(0, self.severity, size=(1,)).item())].item())
                if signed and randint(0, 2, size=(1,)).item():
                    magnitude *= -1.0
                aug = _apply_op(aug, op, magnitude, self.interpolation, fill)
            mix = mix + weights[:, i].reshape(bdims) * aug
        mix = mix.reshape(dims).to(img.dtype)
        return mix if isinstance(orig_img, Tensor) else F.to_pil_image(mix)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(severity={self.severity}, mixture_width={self.mixture_width}, "
                f"chain_depth={self.chain_depth}, alpha={self.alpha}, all_ops={self.all_ops}, "
                f"interpolation={self.interpolation}, fill={self.fill})")
