"""``torch.utils.hooks``: the hook handle libraries import to manage hook dicts of their own."""
from __future__ import annotations

from ..core.hooks import RemovableHandle

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


def unserializable_hook(f):
    """Mark a tensor hook as not to be serialised (PyTorch warns about the others when pickling)."""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor) -> None:
    """Nothing to warn about: tapelab's pickled tensors carry no hooks."""
