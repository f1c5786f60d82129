"""The name PyTorch's C++ argument parser gives a Python object's type in its messages: CPython's
``tp_name``, which is the bare class name for builtins and for classes defined in Python, and
``module.name`` for other extension types (``numpy.ndarray``, ``numpy.float32``,
``collections.OrderedDict``), as in ``expected Tensor as element 0 in argument 0, but got
numpy.ndarray``."""
from __future__ import annotations

__all__ = ["tp_name", "defined_in"]

_HEAPTYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE: a class made by a class statement, whose tp_name is its __name__


def tp_name(obj) -> str:
    """``Py_TYPE(obj)->tp_name`` of ``obj``."""
    cls = type(obj)
    if cls.__module__ == "builtins" or cls.__flags__ & _HEAPTYPE:
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def defined_in(cls: type, package: str) -> bool:
    """Whether tapelab's subpackage ``package`` (``"nn"``, ``"ao.nn"``) defines ``cls``: its module is
    ``tapelab.<package>`` or below, or ``torch.<package>`` or below, as ``install_aliases`` names tapelab's
    classes while it serves ``torch``."""
    module = cls.__module__
    for top in ("tapelab.", "torch."):
        head = top + package
        if module == head or module.startswith(head + "."):
            return True
    return False
