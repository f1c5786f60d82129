"""``torch._higher_order_ops.while_loop``: ``torch._higher_order_ops.while_loop.while_loop``."""
from .._torch_extra import while_loop

__all__ = ["while_loop"]
