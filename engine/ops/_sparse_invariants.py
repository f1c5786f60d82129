"""PyTorch's process-wide sparse invariant-check setting (``torch.sparse.check_sparse_tensor_invariants``),
read by the COO and the compressed constructors alike."""
from __future__ import annotations

import warnings

# PyTorch's process-wide invariant-check setting (torch.sparse.check_sparse_tensor_invariants): None until a
# program opts in or out; the first constructor that reads it unset warns, once per process, as ATen does
_invariant_checks: dict = {"enabled": None, "warned": False}
_IMPLICIT_CHECKS = ("Sparse invariant checks are implicitly disabled. Memory errors (e.g. SEGFAULT) will occur when "
                    "operating on a sparse tensor which violates the invariants, but checks incur performance "
                    "overhead. To silence this warning, explicitly opt in or out. See "
                    "`torch.sparse.check_sparse_tensor_invariants.__doc__` for guidance.")


def invariant_checks_enabled() -> bool:
    """The process-wide setting (False while unset)."""
    return bool(_invariant_checks["enabled"])


def set_invariant_checks(enabled: bool) -> None:
    """Opt in or out of sparse invariant checks for the whole process (silences the implicit-default warning)."""
    _invariant_checks["enabled"] = bool(enabled)


def _warn_if_checks_implicit(check_invariants) -> None:
    """PyTorch warns once when a constructor without ``check_invariants`` meets the unset setting."""
    if check_invariants is None and _invariant_checks["enabled"] is None and not _invariant_checks["warned"]:
        _invariant_checks["warned"] = True
        warnings.warn(_IMPLICIT_CHECKS, UserWarning, stacklevel=3)
