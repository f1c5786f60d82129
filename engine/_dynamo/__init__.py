"""``torch._dynamo``: the few names libraries call outside ``torch.compile`` (Hugging Face marks its
static KV cache, allows functions in graphs, asks whether it is compiling). tapelab's compiler traces
by running eagerly, so these hints change nothing: each returns what it is given."""
from __future__ import annotations

from typing import Callable

from ..compiler import OptimizedModule, allow_in_graph, disable, explain, is_compiling, reset
from . import config, eval_frame, exc  # noqa: F401  (torch._dynamo.config/.eval_frame/.exc without an import)

__all__ = ["mark_static_address", "mark_dynamic", "mark_static", "allow_in_graph", "assume_constant_result",
           "is_compiling", "disable", "reset", "explain", "config", "OptimizedModule"]


def mark_static_address(t, guard: bool = True) -> None:
    """A hint that ``t`` keeps its address across calls (CUDA graphs); nothing to record here."""


def mark_dynamic(t, index, *, min=None, max=None) -> None:
    """A hint that dimension ``index`` of ``t`` varies between calls; tapelab's guards key on shapes anyway."""


def mark_static(t, index=None) -> None:
    """A hint that ``t``'s shape is fixed; tapelab's guards key on shapes anyway."""


def assume_constant_result(fn: Callable) -> Callable:
    """``fn`` unchanged: it runs at every call."""
    return fn
