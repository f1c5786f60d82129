"""``tapelab.sparse``: PyTorch's ``torch.sparse`` functions over sparse COO tensors.

The tensors themselves and their ops are declared in ``ops/sparse.py`` (construction with
``tapelab.sparse_coo_tensor`` or ``Tensor.to_sparse``); this module is the public path.
"""
from __future__ import annotations

import warnings

from ..base import dtype as _dtype
from ..core.creation import CUDA_LEGACY, zeros
from ..core.tensor import Tensor
from ..ops.sparse import invariant_checks_enabled, set_invariant_checks, sparse_coo_tensor
from ..ops.sparse import sparse_mm as mm, sparse_sum as sum  # noqa: A004  (torch.sparse.sum)

__all__ = ["mm", "sum", "addmm", "check_sparse_tensor_invariants", *CUDA_LEGACY]


def addmm(mat: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` (``torch.sparse.addmm``)."""
    return beta * mat + alpha * mm(mat1, mat2)


class check_sparse_tensor_invariants:  # noqa: N801  (PyTorch's name)
    """PyTorch's switch for sparse invariant checks in constructors: ``enable()``/``disable()``/``is_enabled()``,
    a context manager (``with check_sparse_tensor_invariants(False):``) and a decorator. Setting it either
    way is the explicit opt-in or -out that silences the constructors' warning about the implicit default."""

    is_enabled = staticmethod(invariant_checks_enabled)

    @staticmethod
    def enable() -> None:
        set_invariant_checks(True)

    @staticmethod
    def disable() -> None:
        set_invariant_checks(False)

    def __init__(self, enable: bool = True) -> None:
        self.state = enable
        self.saved_state: bool | None = None

    def __enter__(self) -> None:
        if self.saved_state is not None:
            raise RuntimeError("This context manager instance is already activated."
                               " Use a different context manager instance for context nesting.")
        self.saved_state = invariant_checks_enabled()
        set_invariant_checks(self.state)

    def __exit__(self, *exc) -> None:
        set_invariant_checks(self.saved_state)
        self.saved_state = None

    def __call__(self, fn):
        def checked(*args, **kwargs):
            with type(self)(self.state):
                return fn(*args, **kwargs)
        return checked


# ---------------------------------------------------------------- legacy constructors (torch.sparse.FloatTensor, ...)
class _LegacySparseType(type):
    """``torch.sparse.FloatTensor`` and its kin, PyTorch's deprecated sparse constructors (linear_operator
    builds KISS-GP's interpolation matrices with them): ``T(indices, values[, size])`` is
    ``sparse_coo_tensor`` in the values' dtype, as PyTorch's, and ``T(*sizes)`` an empty sparse tensor
    of the type's dtype; ``isinstance`` tests for a sparse cpu tensor of that dtype."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.is_sparse and obj.device.type == "cpu" and obj.dtype is cls.dtype

    def __repr__(cls) -> str:
        return f"<class 'tapelab.sparse.{cls.__name__}'>"

    def __call__(cls, *args) -> Tensor:
        if len(args) in (2, 3) and isinstance(args[0], Tensor) and isinstance(args[1], Tensor):
            warnings.warn("torch.sparse.SparseTensor(indices, values, shape, *, device=) is deprecated.  Please use "
                          "torch.sparse_coo_tensor(indices, values, shape, dtype=, device=).", UserWarning, stacklevel=2)
            return sparse_coo_tensor(*args, check_invariants=False)  # PyTorch's never reads the setting
        if all(type(a) is int for a in args):
            size = args or (0,)
            return sparse_coo_tensor(zeros((len(size), 0), dtype=_dtype.int64), zeros(0, dtype=cls.dtype), size)
        raise TypeError(f"sparse.{cls.__name__}(): takes (indices, values), (indices, values, size) or sizes, got "
                        f"({', '.join(type(a).__name__ for a in args)})")


globals().update({name: _LegacySparseType(name, (), {"dtype": t.dtype, "__module__": "tapelab.sparse",
                                                     "__doc__": f"Legacy sparse constructor: {t.dtype} on cpu."})
                  for name, t in CUDA_LEGACY.items()})
