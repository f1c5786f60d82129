"""``torch.fx.experimental.proxy_tensor``: tapelab traces without a proxy dispatch mode."""
from __future__ import annotations

from typing import Callable


def get_proxy_mode():
    """The active ProxyTorchDispatchMode: none, in tapelab (kornia asks before reading values)."""
    return None


def make_fx(f: Callable, decomposition_table=None, tracing_mode: str = "real", _allow_non_fake_inputs: bool = False,
            **options) -> Callable:
    """``make_fx(f)(*args)``: the graph of the ops one run of ``f`` on ``args`` performs. tapelab records it from
    an eager run (``trace_from_tape``): its nodes are tapelab's primitives, not ATen's, and its branches are the
    example's; ``tracing_mode`` and the decompositions change nothing (no fake or symbolic tensors)."""
    def traced(*args):
        from ..trace_from_tape import trace_from_tape
        return trace_from_tape(f, *args)
    return traced
