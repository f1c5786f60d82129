"""PyTorch's argument-parser refusal of a non-Tensor where a Tensor is required, built on the failure path.

PyTorch's C++ parser checks every argument before a kernel runs: ``torch.exp(np.ones(3))`` raises
``TypeError: exp(): argument 'input' (position 1) must be Tensor, not numpy.ndarray``. tapelab's public
functions take their arguments as plain Python parameters and check nothing up front (a check on every
call would cost every successful call): the dispatcher meets the stray object when it runs the op, and
a composite meets it when it first reads a Tensor attribute. Both then call ``not_tensor``, which names
the public function and the parameter from the call itself: the outermost engine frame (outside the
dispatcher and private helpers) that holds the object as a named positional parameter, which is the
public function the program called, its parameter name and position as PyTorch's parser counts them.
"""
from __future__ import annotations

import inspect
import operator
import os
import sys

from ..base.pytype import tp_name
from .tensor import Tensor

__all__ = ["not_tensor", "refuse_non_tensors", "caller_parameter", "int_argument"]

_ENGINE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DISPATCHER = os.path.join(_ENGINE, "core", "dispatch.py")
_HERE = os.path.abspath(__file__)
_NESTED = inspect.CO_NESTED


def caller_parameter(obj) -> tuple[str | None, str, int] | None:
    """``(function, parameter, position)`` of the public engine function the program called with ``obj`` as
    a positional argument: the outermost engine frame below the program's own whose named positional
    parameter is ``obj`` (by identity), leaving out the dispatcher, private helpers (``_`` names) and
    ``Module.forward`` (PyTorch's parser names the functional a layer calls, ``linear``); None when none
    is. ``function`` is None for a closure a factory made (its code's name is the factory's ``fn``)."""
    found = None
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        path = code.co_filename
        if not path.startswith(_ENGINE):
            break   # the program's own frame: the engine was entered below it
        name = code.co_name
        if path != _DISPATCHER and path != _HERE and name != "forward" and not name.startswith(("_", "<")):
            values = frame.f_locals
            for i, param in enumerate(code.co_varnames[:code.co_argcount]):
                if values.get(param) is obj:
                    # a function a factory made (``fn``, renamed through ``__name__``) is named by the raiser
                    found = (None if code.co_flags & _NESTED else name), param, i + 1
                    break
        frame = frame.f_back
    return found


def not_tensor(obj, function: str, position: int = 1, param: str | None = None) -> TypeError:
    """PyTorch's ``<function>(): argument '<param>' (position <k>) must be Tensor, not <type>`` for ``obj``.
    ``function``, ``position`` and ``param`` are what the raiser knows (an op's name and the operand's
    place); the public function the program called, when found (``caller_parameter``), names them instead."""
    found = caller_parameter(obj)
    if found is not None:
        function, (param, position) = found[0] or function, found[1:]
    elif param is None:
        param = "input" if position == 1 else "other"
    return TypeError(f"{function}(): argument '{param}' (position {position}) must be Tensor, not {tp_name(obj)}")


def refuse_non_tensors(function: str, *objs) -> None:
    """Raise ``not_tensor`` for the first of ``objs`` that is not a Tensor; return when all are. For the
    failure path of code that reads Tensor attributes of its arguments first::

        try:
            nd = A.ndim
        except AttributeError:
            refuse_non_tensors("linalg_det", A)
            raise   # a Tensor after all: the AttributeError is a defect of its own
    """
    for i, obj in enumerate(objs):
        if not isinstance(obj, Tensor):
            raise not_tensor(obj, function, i + 1) from None


def int_argument(value, function: str, param: str, position: int) -> int:
    """An ``int`` parameter as PyTorch's parser reads it: an int, a numpy integer or an integer
    one-element tensor (``__index__``); a float, a bool or a float tensor is its TypeError (a size
    computed in floating point fails here, not as a kernel error)."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except (TypeError, RuntimeError):
            pass
    raise TypeError(f"{function}(): argument '{param}' (position {position}) must be int, not {tp_name(value)}")
