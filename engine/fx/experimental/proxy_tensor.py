"""``torch.fx.experimental.proxy_tensor``: tapelab traces without a proxy dispatch mode."""
from __future__ import annotations


def get_proxy_mode():
    """The active ProxyTorchDispatchMode: none, in tapelab (kornia asks before reading values)."""
    return None
