"""``torch.nn.parallel.parallel_apply``: each module on its own inputs (PyTorch runs them in threads, one
per device; tapelab calls them in turn, the same results). Without a GPU it refuses as PyTorch's does."""
from __future__ import annotations

from typing import Any, Sequence

from ...base import device as _devices
from ..modules.module import Module

__all__ = ["parallel_apply"]


def parallel_apply(modules: Sequence[Module], inputs: Sequence[Any], kwargs_tup: Sequence[dict] | None = None,
                   devices: Sequence | None = None) -> list:
    """``modules[i](*inputs[i], **kwargs_tup[i])`` for every i (an input that is not a tuple or list is the one argument)."""
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs {len(inputs)}")
    if not _devices.cuda_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")
    kwargs_tup = kwargs_tup if kwargs_tup is not None else ({},) * len(modules)
    return [module(*(args if isinstance(args, (list, tuple)) else (args,)), **kwargs)
            for module, args, kwargs in zip(modules, inputs, kwargs_tup)]
