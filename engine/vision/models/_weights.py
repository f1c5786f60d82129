"""torchvision's weights API: ``WeightsEnum``, ``Weights``, ``get_weight`` and the
``<Model>_Weights`` enums, rebuilt from ``_weights_meta.json``.

The urls, meta (num_params, min_size, ImageNet categories, metrics) and transform presets are
data generated from torchvision by ``scripts/gen_vision_weights_meta.py``; the file is read and
an enum class made only when a name first asks for it. ``builder_with_weights`` gives every
registered builder torchvision's ``weights=`` handling: verify, set ``num_classes`` from the
categories, build, then load the state_dict through ``tapelab.hub.load_state_dict_from_url``
(PyTorch's cache, so a checkpoint torch already downloaded loads offline).
"""
from __future__ import annotations

import enum
import functools
import json
import pathlib
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from ... import hub

__all__ = ["Weights", "WeightsEnum", "get_weight", "weights_enum", "enum_names", "builder_enum_name",
           "builder_with_weights"]

_META = pathlib.Path(__file__).with_name("_weights_meta.json")


@dataclass
class Weights:
    """One pretrained checkpoint: where it lives, the preset its inputs need, what it was trained on."""
    url: str
    transforms: Callable
    meta: dict[str, Any] = field(default_factory=dict)

    def __eq__(self, other: Any) -> bool:
        # transforms are partials: compare what they build, as torchvision does
        if not isinstance(other, Weights):
            return NotImplemented
        if self.url != other.url or self.meta != other.meta:
            return False
        a, b = self.transforms, other.transforms
        if isinstance(a, functools.partial) and isinstance(b, functools.partial):
            return a.func == b.func and a.args == b.args and a.keywords == b.keywords
        return a == b


class WeightsEnum(enum.Enum):
    """Base of the ``<Model>_Weights`` enums: each member's value is a ``Weights``."""

    @classmethod
    def verify(cls, obj: Any) -> Any:
        """``obj`` as a member: a member, its name (``"IMAGENET1K_V1"`` or ``"ResNet18_Weights.IMAGENET1K_V1"``) or None."""
        if obj is not None:
            if type(obj) is str:
                obj = cls[obj.replace(cls.__name__ + ".", "")]
            elif not isinstance(obj, cls):
                raise TypeError(
                    f"Invalid Weight class provided; expected {cls.__name__} but received {obj.__class__.__name__}.")
        return obj

    def get_state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return hub.load_state_dict_from_url(self.url, *args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}.{self._name_}"

    @property
    def url(self) -> str:
        return self.value.url

    @property
    def transforms(self) -> Callable:
        return self.value.transforms

    @property
    def meta(self) -> dict[str, Any]:
        return self.value.meta


@functools.cache
def _data() -> dict[str, Any]:
    return json.loads(_META.read_text())


def enum_names() -> list[str]:
    """The names of all ``<Model>_Weights`` enums (without reading more than the data file)."""
    return list(_data()["enums"])


def _weights(entry: dict[str, Any], categories: dict[str, list[str]]) -> Weights:
    from ..transforms import _presets
    from ..transforms.functional import InterpolationMode

    preset = dict(entry["transforms"])
    cls = getattr(_presets, preset.pop("name"))
    if "interpolation" in preset:
        preset["interpolation"] = InterpolationMode[preset["interpolation"]]
    meta = dict(entry["meta"])
    if isinstance(meta.get("categories"), str):
        meta["categories"] = list(categories[meta["categories"]])
    if "min_size" in meta:
        meta["min_size"] = tuple(meta["min_size"])
    return Weights(url=entry["url"], transforms=functools.partial(cls, **preset), meta=meta)


@functools.cache
def weights_enum(name: str) -> type[WeightsEnum]:
    """The enum class ``name`` (e.g. ``"ResNet50_Weights"``), made once; KeyError if unknown."""
    data = _data()
    entry = data["enums"][name]
    members = {k: _weights(v, data["categories"]) for k, v in entry["members"].items()}
    return WeightsEnum(name, [*members.items(), ("DEFAULT", members[entry["DEFAULT"]])],
                       module=__name__.rsplit(".", 1)[0], qualname=name)


@functools.cache
def _enum_of_builder() -> dict[str, str]:
    return {b: name for name, entry in _data()["enums"].items() for b in entry["builders"]}


def builder_enum_name(builder: str) -> str | None:
    """The name of the weights enum of a torchvision builder (``"resnet18"`` -> ``"ResNet18_Weights"``)."""
    return _enum_of_builder().get(builder)


def get_weight(name: str) -> WeightsEnum:
    """The member named ``"<Enum>.<MEMBER>"``, e.g. ``get_weight("ResNet50_Weights.IMAGENET1K_V2")``."""
    try:
        enum_name, value_name = name.split(".")
    except ValueError:
        raise ValueError(f"Invalid weight name provided: '{name}'.") from None
    if enum_name not in _data()["enums"]:
        raise ValueError(f"The weight enum '{enum_name}' for the specific method couldn't be retrieved.")
    return weights_enum(enum_name)[value_name]


def _overwrite(kwargs: dict[str, Any], param: str, value: Any) -> None:
    """Set ``kwargs[param]``; an explicit different value raises (torchvision's ``_ovewrite_named_param``)."""
    if param in kwargs:
        if kwargs[param] != value:
            raise ValueError(f"The parameter '{param}' expected value {value} but got {kwargs[param]} instead.")
    else:
        kwargs[param] = value


def _legacy_pretrained(builder: str, cls: type[WeightsEnum], weights: Any, kwargs: dict[str, Any]) -> Any:
    """torchvision's ``handle_legacy_interface``: ``pretrained=`` warns and means IMAGENET1K_V1 or None."""
    if "pretrained" not in kwargs:
        return weights
    pretrained = kwargs.pop("pretrained")
    if isinstance(weights, WeightsEnum) or (isinstance(weights, str) and weights != "legacy"):
        return weights
    default = cls.__members__.get("IMAGENET1K_V1") if pretrained else None
    if pretrained and default is None:
        raise ValueError(f"No weights available for model {builder}")
    warnings.warn("The parameter 'pretrained' is deprecated since 0.13 and may be removed in the future, "
                  "please use 'weights' instead.")
    msg = ("Arguments other than a weight enum or `None` for 'weights' are deprecated since 0.13 and may be "
           f"removed in the future. The current behavior is equivalent to passing `weights={default}`.")
    if pretrained:
        msg += f" You can also use `weights={cls.__name__}.DEFAULT` to get the most up-to-date weights."
    warnings.warn(msg)
    return default


# checkpoints of torchvision's first DenseNets name a dense layer's modules "norm.1", "conv.2", ...
_DENSENET_OLD_NAME = re.compile(r"\.(norm|relu|conv)\.([12])\.")


def _prepare(builder: str, weights: WeightsEnum, kwargs: dict[str, Any]) -> None:
    """The builder arguments a checkpoint fixes, as torchvision's builders set them."""
    if builder in ("googlenet", "inception_v3"):
        kwargs.setdefault("transform_input", True)
        _overwrite(kwargs, "aux_logits", True)
        _overwrite(kwargs, "init_weights", False)
    if builder.startswith("vgg"):   # the checkpoint replaces the init: skipping it leaves the RNG where
        kwargs["init_weights"] = False   # torchvision's does (SRGAN's data order follows vgg19(pretrained=True))
    if builder.startswith("vit_"):
        _overwrite(kwargs, "image_size", weights.meta["min_size"][0])
    if builder == "maxvit_t":     # its relative-position tables are sized for the checkpoint's input
        _overwrite(kwargs, "input_size", tuple(weights.meta["min_size"]))
    if weights.meta.get("categories") is not None:   # VGG16's IMAGENET1K_FEATURES has none
        _overwrite(kwargs, "num_classes", len(weights.meta["categories"]))


def _load(builder: str, model: Any, weights: WeightsEnum, progress: bool, keep_aux: bool) -> None:
    state = weights.get_state_dict(progress=progress, check_hash=True)
    if builder.startswith("densenet"):
        state = {_DENSENET_OLD_NAME.sub(r".\1\2.", k): v for k, v in state.items()}
    model.load_state_dict(state)
    if builder in ("googlenet", "inception_v3") and not keep_aux:
        model.aux_logits = False
        if builder == "googlenet":
            model.aux1 = model.aux2 = None
        else:
            model.AuxLogits = None


def builder_with_weights(name: str, fn: Callable) -> Callable:
    """``fn`` (which builds with random weights) taking torchvision's ``weights=``/``pretrained=``."""
    @functools.wraps(fn)
    def builder(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> Any:
        enum_name = builder_enum_name(name)
        if enum_name is None:   # a builder registered from outside: its own weights handling
            return fn(weights=weights, progress=progress, **kwargs)
        cls = weights_enum(enum_name)
        weights = cls.verify(_legacy_pretrained(name, cls, weights, kwargs))
        keep_aux = kwargs.get("aux_logits", name == "inception_v3")   # each builder's own default
        if weights is not None:
            _prepare(name, weights, kwargs)
        model = fn(progress=progress, **kwargs)
        if weights is not None:
            _load(name, model, weights, progress, keep_aux)
        return model

    builder.__annotations__ = {**fn.__annotations__, "weights": Optional[WeightsEnum]}
    return builder

