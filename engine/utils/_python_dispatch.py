"""``torch.utils._python_dispatch``: ``TorchDispatchMode``, the op-level interpreter researchers write
to count ops, trace them or measure memory. It is a dispatcher ``Mode`` (``core/dispatch.py``) whose
``dispatch`` hook hands each op to ``__torch_dispatch__(func, types, args, kwargs)`` with the mode
off the stack, as PyTorch runs the handler; ``func`` is the op as a callable (``OpFunction``: calling
it applies the op, ``func.overloadpacket`` is itself and its ``__name__`` the op's, ``mul`` where
PyTorch passes ``aten.mul.Tensor``). One difference: tapelab's modes run where autograd records,
PyTorch's below it, so what a handler computes on a result that requires grad is recorded too and
the handler sees ``requires_grad`` as the caller will."""
from __future__ import annotations

import contextlib

from ..base.dispatch_state import LOCAL
from ..core.dispatch import Mode
from ..core.overrides import function_of
from ..core.tensor import Tensor

__all__ = ["TorchDispatchMode", "is_traceable_wrapper_subclass", "_get_current_dispatch_mode",
           "_get_current_dispatch_mode_stack", "_disable_current_modes"]


class TorchDispatchMode(Mode):
    """Override ``__torch_dispatch__(self, func, types, args=(), kwargs=None)``; enter with ``with``.

    Sees every op (factories, views, the ops of a backward) below the ``__torch_function__`` level;
    ``func(*args, **(kwargs or {}))`` runs the op with this mode off the stack.
    """

    def __init__(self, _dispatch_key=None) -> None:
        pass

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{type(self).__name__}.__torch_dispatch__ is not implemented")

    def dispatch(self, op, args: tuple, params: dict):
        with self.aside():            # the handler's own ops go to the modes below, as PyTorch's
            types = tuple(dict.fromkeys(type(a) for a in args if isinstance(a, Tensor) and type(a) is not Tensor))
            return self.__torch_dispatch__(function_of(op), types, args, dict(params) if params else {})


def is_traceable_wrapper_subclass(t) -> bool:
    """False: tapelab has no wrapper subclasses with ``__tensor_flatten__``."""
    return False


def _get_current_dispatch_mode():
    modes = [m for m in LOCAL.modes if isinstance(m, TorchDispatchMode)]
    return modes[-1] if modes else None


def _get_current_dispatch_mode_stack() -> list:
    return [m for m in LOCAL.modes if isinstance(m, TorchDispatchMode)]


@contextlib.contextmanager
def _disable_current_modes():
    """The thread's dispatch modes off for the block (handed back, outermost first)."""
    modes = [m for m in LOCAL.modes if isinstance(m, TorchDispatchMode)]
    for m in reversed(modes):
        m.__exit__(None, None, None)
    try:
        yield modes
    finally:
        for m in modes:
            m.__enter__()
