"""torchvision.models: classification architectures with torchvision's module names, each builder
registered for ``get_model(name, **kwargs)`` and ``list_models()``.

Builders take torchvision's ``weights=`` (``ResNet18_Weights.DEFAULT``, ``"IMAGENET1K_V1"``, None)
and load the checkpoint through PyTorch's hub cache. The ``<Model>_Weights`` enums are made from
data on first access (module ``__getattr__``), so importing the package reads no weights metadata.
"""
from typing import Any as _Any

from . import _weights
from ._api import get_model, get_model_builder, get_model_weights, list_models  # noqa: F401
from ._weights import Weights, WeightsEnum, get_weight  # noqa: F401
from .alexnet import *  # noqa: F401,F403
from .convnext import *  # noqa: F401,F403
from .densenet import *  # noqa: F401,F403
from .efficientnet import *  # noqa: F401,F403
from .googlenet import *  # noqa: F401,F403
from .inception import *  # noqa: F401,F403
from .maxvit import *  # noqa: F401,F403
from .mnasnet import *  # noqa: F401,F403
from .mobilenetv2 import *  # noqa: F401,F403
from .mobilenetv3 import *  # noqa: F401,F403
from .regnet import *  # noqa: F401,F403
from .resnet import *  # noqa: F401,F403
from .shufflenetv2 import *  # noqa: F401,F403
from .squeezenet import *  # noqa: F401,F403
from .swin_transformer import *  # noqa: F401,F403
from .vgg import *  # noqa: F401,F403
from .vision_transformer import *  # noqa: F401,F403
from . import detection, segmentation  # noqa: F401,E402  (after the classifiers they build on)


def __getattr__(name: str) -> _Any:
    """``from torchvision.models import ResNet50_Weights``: the enum, made on first access."""
    if name.endswith("_Weights") and name in _weights.enum_names():
        return _weights.weights_enum(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_weights.enum_names()))
