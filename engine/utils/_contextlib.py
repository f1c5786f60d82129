"""``torch.utils._contextlib``: served from ``base/contextlib.py``, below the grad modes that use it."""
from ..base.contextlib import _DecoratorContextManager, _NoParamDecoratorContextManager, context_decorator  # noqa: F401

__all__ = ["context_decorator", "_DecoratorContextManager", "_NoParamDecoratorContextManager"]
