"""Direct calls for the generated step's linear layers: MKL's GEMM entered without the route choosing.

A compiled step calls each op's declared forward on arrays; ``linear``'s (``nn/_fused_linear.py``) and
its backward's pass through ``kernels.gemm``'s choices (dtype and size checks, the operands' layout,
the thread count's route) before the one MKL call they end in: ~5-10 us of Python a GEMM, paid again
in every step, and more in a training step than alone, where the GEMMs before it left the
interpreter's data out of cache (a 16-256-256-10 MLP's step 273-296 -> 255 us with the relu epilogue;
mlp_b64's, 75% MKL, within its noise). The functions here take the same arrays,
see whether they are the plain case (float32, C-contiguous, MKL loaded and taking the product whole, as
``gemm`` and ``gemm_add`` would run it) and then make that same MKL call with the same arguments (the
same floats, bit for bit); anything else goes to the op's own forward.
"""
from __future__ import annotations

import numpy as np

from ..base import pool, runtime
from ..kernels import blas, loops, mkl, parallel, use
from ..kernels.gemm import GEMM_PARALLEL_MIN, MKL_MIN, OWN_MIN_COLS, OWN_MIN_K, OWN_MIN_ROWS
from ..ops.reduce import array_sum

__all__ = ["planned", "linear_relu", "epilogues"]

_F32 = np.dtype(np.float32)
_ND = np.ndarray
_NO_TRANS, _TRANS = 111, 112
_LIMIT = 1 << 31       # MKL_INT (LP64)


def _threads() -> int:
    """How many of MKL's threads ``kernels.gemm`` gives one whole float32 product it hands to MKL (of at
    least ``MKL_MIN`` multiply-adds): one, or the intra-op threads where MKL runs on OpenMP and no split's
    block is running; 0 where it takes another route (then the op's own forward runs)."""
    if not blas.available():
        return 0
    n = runtime.intra_op_threads()
    if n < 2:
        return 1
    return n if mkl.threaded() and not pool.in_block() else 0


def _plain(a) -> bool:
    return type(a) is _ND and a.dtype is _F32 and a.flags.c_contiguous


def _own_first(m: int, k: int, n: int) -> bool:
    """Whether ``kernels.gemm`` hands ``(m, k) @ (k, n)`` to numpy before MKL (too small for its own
    GEMM and for the pool)."""
    return ((m < OWN_MIN_ROWS or k < OWN_MIN_K or n < OWN_MIN_COLS)
            and m * k * n < GEMM_PARALLEL_MIN)


def _fits(*sizes: int) -> bool:
    """Every dimension at least 2 (a unit dimension changes how ``blas._operand`` passes an operand)
    and an MKL_INT."""
    return min(sizes) >= 2 and max(sizes) < _LIMIT


def linear(op_fwd):
    """``op_fwd`` (linear's declared forward) with its plain biased float32 case as ``gemm_add`` runs it:
    the bias filled into the output, then one MKL GEMM with beta 1."""
    address, call, _, local, _ = blas._calls(_F32)
    fill_rows = loops("pointwise").fill_rows

    def planned_linear(xp, x, w, *b):
        # the size first: a product MKL does not take costs no more than the op's own checks
        if len(b) == 1 and w.ndim == 2 and x.size * w.shape[0] >= MKL_MIN and xp is np and x.ndim >= 2 \
                and _plain(x) and _plain(w) and _plain(b[0]) and b[0].ndim == 1:
            n, k = w.shape
            m = x.size // k
            if x.shape[-1] == k and b[0].shape[0] == n and _fits(m, n, k):
                threads = _threads()
                if threads:
                    out = blas.empty((m, n), _F32, threads)
                    parallel(fill_rows, 1, out, b[0])
                    call(address, _NO_TRANS, _TRANS, m, n, k, x if x.ndim == 2 else x.reshape(m, k), k, w, k, 1.0,
                         out, n, local, threads)
                    return out.reshape(x.shape[:-1] + (n,)) if x.ndim > 2 else out
        return op_fwd(xp, x, w, *b)
    return planned_linear


def linear_backward(op_fwd):
    """``op_fwd`` (linear's backward) with its plain float32 case as ``gemms`` runs it: ``g W`` and
    ``gᵀ x`` each one whole MKL GEMM, the bias gradient ``array_sum``'s."""
    address, call, _, local, _ = blas._calls(_F32)

    def planned_linear_backward(xp, g, x, w, *, needs):
        if (needs[1] and w.ndim == 2 and g.size * w.shape[1] >= MKL_MIN and xp is np and g.ndim == x.ndim >= 2
                and _plain(g) and _plain(x) and _plain(w) and g.shape[:-1] == x.shape[:-1]):
            n, k = w.shape
            m = g.size // n
            if g.shape[-1] == n and x.shape[-1] == k and _fits(m, n, k) and not _own_first(n, m, k) \
                    and not (needs[0] and _own_first(m, n, k)):
                threads = _threads()
                if threads:
                    g2, x2 = (g, x) if g.ndim == 2 else (g.reshape(m, n), x.reshape(m, k))
                    empty = np.empty((0,), _F32)
                    gx = empty
                    if needs[0]:
                        gx = blas.empty((m, k), _F32, threads)
                        call(address, _NO_TRANS, _NO_TRANS, m, k, n, g2, n, w, k, 0.0, gx, k, local, threads)
                        gx = gx.reshape(x.shape)
                    gw = blas.empty((n, k), _F32, threads)
                    call(address, _TRANS, _NO_TRANS, n, k, m, g2, n, x2, k, 0.0, gw, k, local, threads)
                    return gx, gw, array_sum(xp, g2, (0,)) if needs[2] else empty
        return op_fwd(xp, g, x, w, needs=needs)
    return planned_linear_backward


def linear_relu(linear_fwd, relu_fwd):
    """``relu(linear(x, w, b))`` for a linear whose result only the relu reads: the planned linear's
    output rectified in place (relu's own loop, each element read and written at its index: the same
    floats as into a new array), one call and one array fewer; else the two ops' own forwards."""
    planned_linear = linear(linear_fwd)
    relu = loops("pointwise").relu

    def planned_linear_relu(xp, x, w, *b):
        out = planned_linear(xp, x, w, *b)
        if out.size and use(xp, out) and out.flags.writeable:    # where relu's own forward runs this loop
            flat = out.reshape(-1)
            parallel(relu, 2, flat, flat)
            return out
        return relu_fwd(xp, out)
    return planned_linear_relu


_PLANS = {"linear": linear, "linear_backward": linear_backward}


def planned(op):
    """What the generated step calls for ``op``: a planned forward where there is one and MKL's GEMM is
    loaded, else the op's declared forward."""
    make = _PLANS.get(op.name)
    return make(op.fwd) if make is not None and blas.available() else op.fwd


def epilogues(nodes, name_of) -> dict:
    """``{relu node: linear node}`` for each relu whose input is a linear node read by nothing else (its
    result is neither saved nor returned): the generated step makes both in one call (``linear_relu``).
    ``name_of``: a node's registry name, or None."""
    if not blas.available():
        return {}
    pairs = {}
    for n in nodes:
        if n.op == "call_function" and name_of(n) == "relu" and len(n.args) == 1 and not n.kwargs:
            src = n.args[0]
            if getattr(src, "op", None) == "call_function" and name_of(src) == "linear" and len(src.users) == 1:
                pairs[n] = src
    return pairs
