"""``torch._higher_order_ops.cond``: ``torch.cond``."""
from .._torch_extra import cond

__all__ = ["cond"]
