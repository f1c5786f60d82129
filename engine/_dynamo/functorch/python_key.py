"""``torch._functorch.python_key``: ``make_fx`` (``functorch.make_fx``), from ``torch.fx.experimental.proxy_tensor``."""
from ...fx.experimental.proxy_tensor import make_fx

__all__ = ["make_fx"]
