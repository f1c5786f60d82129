"""``torch.return_types``: the named tuples ops return (``max(x, dim)`` gives a ``max``, ``sort`` a
``sort``, ``linalg.qr`` a ``linalg_qr`` ...), one class per result kind, defined here once, so
``isinstance(torch.max(x, 1), torch.return_types.max)`` holds and results pickle by reference.

Below every layer that returns them (it imports only ``base.dtype``'s package name). Each is a
``namedtuple`` subclass with PyTorch's field names and repr (``torch.return_types.max(...)`` under
``install_aliases``); PyTorch's ``_out`` variants are the same classes.
"""
from __future__ import annotations

from collections import namedtuple

from .base.dtype import package_name

_FIELDS = {
    "aminmax": ("min", "max"), "cummax": ("values", "indices"), "cummin": ("values", "indices"),
    "frexp": ("mantissa", "exponent"), "geqrf": ("a", "tau"), "histogram": ("hist", "bin_edges"),
    "histogramdd": ("hist", "bin_edges"), "kthvalue": ("values", "indices"),
    "linalg_cholesky_ex": ("L", "info"), "linalg_eig": ("eigenvalues", "eigenvectors"),
    "linalg_eigh": ("eigenvalues", "eigenvectors"), "linalg_inv_ex": ("inverse", "info"),
    "linalg_ldl_factor": ("LD", "pivots"), "linalg_ldl_factor_ex": ("LD", "pivots", "info"),
    "linalg_lstsq": ("solution", "residuals", "rank", "singular_values"), "linalg_lu": ("P", "L", "U"),
    "linalg_lu_factor": ("LU", "pivots"), "linalg_lu_factor_ex": ("LU", "pivots", "info"),
    "linalg_qr": ("Q", "R"), "linalg_slogdet": ("sign", "logabsdet"), "linalg_solve_ex": ("result", "info"),
    "linalg_svd": ("U", "S", "Vh"), "lu_unpack": ("P", "L", "U"), "max": ("values", "indices"),
    "median": ("values", "indices"), "min": ("values", "indices"), "mode": ("values", "indices"),
    "nanmedian": ("values", "indices"), "qr": ("Q", "R"), "slogdet": ("sign", "logabsdet"),
    "sort": ("values", "indices"), "svd": ("U", "S", "V"), "topk": ("values", "indices"),
    "triangular_solve": ("solution", "cloned_coefficient"),
}


def _repr(self) -> str:
    fields = ",\n".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
    return f"{package_name()}.return_types.{type(self).__name__}(\n{fields})"


def _define(name: str, fields: tuple) -> type:
    return type(name, (namedtuple(name, fields),), {"__slots__": (), "__repr__": _repr, "__module__": __name__,
                                                    "__qualname__": name})


globals().update({name: _define(name, fields) for name, fields in _FIELDS.items()})
globals().update({name + "_out": globals()[name] for name in _FIELDS if name != "histogramdd"})

all_return_types = [globals()[name] for name in _FIELDS]

__all__ = [*_FIELDS, *(name + "_out" for name in _FIELDS if name != "histogramdd"), "all_return_types"]
