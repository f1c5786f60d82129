"""``tapelab.linalg``: all of ``torch.linalg``, batched, with gradients (engine/ops/linalg_api.py, over the
factorisation ops of engine/ops/linalg.py and engine/ops/linalg_decomp.py)."""
from __future__ import annotations

from .ops.linalg_api import LINALG
from .ops.linalg_api import (  # noqa: F401
    CholeskyExResult, EigResult, EighResult, InvExResult, LDLFactorExResult, LDLFactorResult,
    LUFactorExResult, LUFactorResult, LUResult, LinAlgError, LstsqResult, SVDResult, SlogdetResult,
    SolveExResult, TOPLEVEL, cholesky, cholesky_ex, cholesky_inverse, cholesky_solve, cond, cross, det,
    diagonal, eig, eigh, eigvals, eigvalsh, householder_product, inv, inv_ex, ldl_factor, ldl_factor_ex,
    ldl_solve, lstsq, lu, lu_factor, lu_factor_ex, lu_solve, lu_unpack, matmul, matrix_exp, matrix_norm,
    matrix_power, matrix_rank, multi_dot, norm, pinv, qr, slogdet, solve, solve_ex, solve_triangular, svd,
    svdvals, tensorinv, tensorsolve, triangular_solve, vander, vecdot, vector_norm)

from .ops.out import LINALG_OUT_FUNCTIONS, out_variants

__all__ = list(LINALG)
globals().update(out_variants(globals(), LINALG_OUT_FUNCTIONS))
