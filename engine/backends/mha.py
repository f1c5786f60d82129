"""``torch.backends.mha``: the switch of ``MultiheadAttention``/``TransformerEncoder``'s inference
fast path. tapelab's layers have one path, so it is kept (read back as set) and changes nothing."""
from __future__ import annotations

__all__ = ["get_fastpath_enabled", "set_fastpath_enabled"]

_is_fastpath_enabled: bool = True


def get_fastpath_enabled() -> bool:
    """Whether the fast path is enabled (True unless set off)."""
    return _is_fastpath_enabled


def set_fastpath_enabled(value: bool) -> None:
    global _is_fastpath_enabled
    _is_fastpath_enabled = value
