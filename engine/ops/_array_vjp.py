"""What the ops' array vjps (``Op.array_vjp``) share: when a numpy expression on the gradient's array
gives exactly the array the dispatched op inside the Tensor vjp would (``core/dispatch.py``'s compiled
path, which these tests mirror), and the operand that path would hand numpy."""
from __future__ import annotations

import numpy as np

from ..base.device import CPU
from ..core.dispatch import _constant
from ..core.tensor import Tensor

__all__ = ["in_order", "in_row_order", "operand"]

_ndarray = np.ndarray
_HALF = np.dtype(np.float16)


def in_order(g) -> bool:
    """``g`` is a real float array whose elementwise results need no reordering: one dim, or C-contiguous
    with no dim of one (the compiled path reorders the rest as ATen's iterator). Not 0-d: a ufunc of 0-d
    arrays gives a numpy scalar, which the dispatcher makes an array again (the tensor vjp takes those)."""
    n = g.ndim
    return n != 0 and g.dtype.kind == "f" and (n == 1 or (g.flags.c_contiguous and 1 not in g.shape))


def in_row_order(g) -> bool:
    """``in_order(g)``, or ``g`` is a real float 2-D array of rows in order, each contiguous (a column slice of a
    wider gradient, as cat's and stack's backward hand out), with no dim of one: numpy's result of an
    elementwise op on it and operands not all laid out otherwise is then C-contiguous, as ATen's."""
    if g.ndim != 2:
        return in_order(g)
    rows, cols = g.shape
    step, item = g.strides
    return g.dtype.kind == "f" and item == g.itemsize and step >= cols * item and rows != 1 and cols != 1


def operand(b, g):
    """``b`` as the compiled path passes it to numpy beside ``g``: a cpu tensor of ``g``'s dtype and
    shape (its array), a float or int (a 0-d array of ``g``'s dtype; 0 and nan as they are); None for
    anything that path would promote, broadcast or send to ``eager``."""
    if isinstance(b, Tensor):
        d = b._data
        if (type(d) is _ndarray and d.dtype is g.dtype and d.shape == g.shape and b._device is CPU
                and (b.requires_grad or not b._vc[0] or b._base is None)):
            return d
        return None
    if (type(b) is float or type(b) is int) and g.dtype is not _HALF:
        return _constant(b, g.dtype) if b and b == b else b
    return None

