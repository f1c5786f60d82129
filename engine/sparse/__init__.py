"""``tapelab.sparse``: PyTorch's ``torch.sparse`` functions over sparse COO tensors.

The tensors themselves and their ops are declared in ``ops/sparse.py`` (construction with
``tapelab.sparse_coo_tensor`` or ``Tensor.to_sparse``); this module is the public path.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..base import dtype as _dtype
from ..core.creation import CUDA_LEGACY, tensor as _tensor, zeros
from ..core.dispatch import apply
from ..core.tensor import Tensor, _wrap_dim
from ..ops.sparse import _coo, _is_coo, invariant_checks_enabled, set_invariant_checks, sparse_coo_tensor
from ..ops.sparse import sparse_mm as mm, sparse_sum as sum  # noqa: A004  (torch.sparse.sum)
from ..ops.sparse_compressed import _construct, is_compressed, layout_name

__all__ = ["mm", "sum", "addmm", "softmax", "log_softmax", "sampled_addmm", "check_sparse_tensor_invariants",
           *CUDA_LEGACY]


def addmm(mat: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` (``torch.sparse.addmm``)."""
    return beta * mat + alpha * mm(mat1, mat2)


def _backend(t: Tensor) -> str:
    name = "SparseCsr" if is_compressed(t) else "Sparse" if _is_coo(t) else ""
    return f"{name}{'CPU' if t.device.type == 'cpu' else t.device.type.upper()}"


def _softmax(name: str, input: Tensor, dim: int, dtype, log: bool) -> Tensor:
    """Softmax over the specified entries of a sparse COO tensor along ``dim`` (the unspecified ones count
    as -inf, so they stay unspecified); over a dense dim it is the values' own softmax. A composite over
    coalesce, values, index_add and the constructor, so the gradient reaches the input's values."""
    if not _is_coo(input):
        raise NotImplementedError(f"Could not run 'aten::_sparse_{name}' with arguments from the "
                                  f"'{_backend(input)}' backend. torch.sparse.{name} takes a sparse COO tensor.")
    dim = _wrap_dim(dim, input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    c = input.coalesce()
    ix, v = c._indices(), c.values()
    sd = c.sparse_dim()
    if dim >= sd:                        # a dense dim: each entry's own values
        out = v.log_softmax(dim - sd + 1) if log else v.softmax(dim - sd + 1)
    elif not v.shape[0]:
        out = v
    else:
        host = ix.numpy()
        keep = [d for d in range(sd) if d != dim]
        key = np.ravel_multi_index(tuple(host[keep]), tuple(input.shape[d] for d in keep)) if keep \
            else np.zeros(host.shape[1], np.int64)
        _, group = np.unique(key, return_inverse=True)
        n_groups = int(group.max()) + 1
        vals = v.detach().numpy()
        top = np.full((n_groups,) + vals.shape[1:], -np.inf, vals.dtype)
        np.maximum.at(top, group, vals)            # the shift: constant, softmax does not depend on it
        group_t = _tensor(group.reshape(-1), dtype=_dtype.int64, device=v.device)
        shifted = v - _tensor(top, device=v.device)[group_t]
        e = shifted.exp()
        total = e.new_zeros((n_groups,) + tuple(v.shape[1:])).index_add(0, group_t, e)[group_t]
        out = shifted - total.log() if log else e / total
    return apply(_coo, ix, out, size=tuple(input.shape), coalesced=True)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """``torch.sparse.softmax``: softmax along ``dim`` over the specified entries of a sparse COO tensor."""
    return _softmax("softmax", input, dim, dtype, False)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """``torch.sparse.log_softmax``: log-softmax along ``dim`` over the specified entries of a sparse COO tensor."""
    return _softmax("log_softmax", input, dim, dtype, True)


def sampled_addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0, alpha: float = 1.0,
                  out=None) -> Tensor:
    """``torch.sparse.sampled_addmm``: ``beta * input + alpha * (mat1 @ mat2)`` at the entries a sparse CSR
    ``input`` stores (a CSR result with its pattern); only those dot products are computed."""
    if out is not None:
        raise NotImplementedError("sampled_addmm: tapelab does not write into out=")
    if not is_compressed(input) or input.layout.name != "sparse_csr":
        raise NotImplementedError(f"Could not run 'aten::sparse_sampled_addmm' with arguments from the "
                                  f"'{_backend(input)}' backend. torch.sparse.sampled_addmm takes a sparse CSR input.")
    if input.ndim != 2 or mat1.ndim != 2 or mat2.ndim != 2:
        raise NotImplementedError(f"sampled_addmm: tapelab takes 2-d operands (got {input.ndim}-d, {mat1.ndim}-d "
                                  f"and {mat2.ndim}-d; a batched {layout_name(input)} input is not supported)")
    if mat1.dtype is not mat2.dtype:
        raise RuntimeError(f"sampled_addmm: Expected mat1 and mat2 to have the same dtype, but got "
                           f"{mat1.dtype.scalar_type} and {mat2.dtype.scalar_type}")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"sampled_addmm: mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    if (mat1.shape[0], mat2.shape[1]) != tuple(input.shape):
        raise RuntimeError(f"sampled_addmm: Expected input to have shape {mat1.shape[0]}x{mat2.shape[1]}, but got "
                           f"{input.shape[0]}x{input.shape[1]}")
    if input.dtype is not mat1.dtype:
        raise RuntimeError(f"sampled_addmm: Expected mat1 to have the same dtype as input, but got "
                           f"{mat1.dtype.scalar_type} and {input.dtype.scalar_type}")
    crow, col = input.crow_indices(), input.col_indices()
    c = crow.numpy().astype(np.int64)
    rows = _tensor(np.repeat(np.arange(len(c) - 1), np.diff(c)), dtype=_dtype.int64, device=input.device)
    cols = col.to(_dtype.int64)
    dots = (mat1[rows] * mat2.t()[cols]).sum(-1)
    vals = dots * alpha if beta == 0 else input.values() * beta + dots * alpha
    return apply(_construct, crow, col, vals, size=tuple(input.shape), layout=input.layout)


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
