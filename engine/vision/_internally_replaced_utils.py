"""``torchvision._internally_replaced_utils``: the module older model code imports
``load_state_dict_from_url`` from (``torchvision.models.utils`` is gone); it is the hub's."""
from ..hub import load_state_dict_from_url  # noqa: F401

__all__ = ["load_state_dict_from_url"]
