"""``torch.utils.model_zoo``, PyTorch's old path of ``torch.hub.load_state_dict_from_url`` (as
``load_url``), which model code still imports (MONAI's EfficientNet, older torchvision-style
model files). It lives above ``hub`` in the engine's layers; ``install_aliases`` serves it at
``torch.utils.model_zoo``."""
from __future__ import annotations

from .hub import load_state_dict_from_url as load_url

__all__ = ["load_url"]
