"""torchvision.models: classification architectures with torchvision's module names, each builder
registered for ``get_model(name, **kwargs)`` and ``list_models()``.

Every builder takes ``weights=None`` (nothing is downloaded); load a torchvision checkpoint with
``model.load_state_dict(tapelab.load(path))``.
"""
from ._api import get_model, get_model_builder, list_models  # noqa: F401
from .alexnet import *  # noqa: F401,F403
from .convnext import *  # noqa: F401,F403
from .densenet import *  # noqa: F401,F403
from .efficientnet import *  # noqa: F401,F403
from .googlenet import *  # noqa: F401,F403
from .inception import *  # noqa: F401,F403
from .mnasnet import *  # noqa: F401,F403
from .mobilenetv2 import *  # noqa: F401,F403
from .mobilenetv3 import *  # noqa: F401,F403
from .regnet import *  # noqa: F401,F403
from .resnet import *  # noqa: F401,F403
from .shufflenetv2 import *  # noqa: F401,F403
from .squeezenet import *  # noqa: F401,F403
from .vgg import *  # noqa: F401,F403
from .vision_transformer import *  # noqa: F401,F403
