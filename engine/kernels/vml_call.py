"""One numba function that calls a C function of VML's shape, ``f(n, in, out, mode)``, by its address: the
address is an argument, so the compiled call is cached on disk like the other loops (``kernels/vml.py``
finds the addresses in MKL)."""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["vml_call", "vml_rows"]


@intrinsic
def _indirect(typingctx, address, n, src, dst, mode):
    """``((void (*)(int64, void*, void*, int64)) address)(n, src, dst, mode)``."""
    if not all(isinstance(t, types.Integer) for t in (address, n, src, dst, mode)):
        return None

    def codegen(context, builder, signature, args):
        i64, ptr = ir.IntType(64), ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i64, ptr, ptr, i64])
        a, k, s, d, m = (context.cast(builder, v, t, types.int64) for v, t in zip(args, signature.args))
        fn = builder.inttoptr(a, fnty.as_pointer())
        builder.call(fn, [k, builder.inttoptr(s, ptr), builder.inttoptr(d, ptr), m])
        return context.get_dummy_value()
    return types.void(address, n, src, dst, mode), codegen


@njit(cache=True, nogil=True)
def vml_call(address, src, dst, mode):
    """VML's function at ``address`` over all of C-contiguous ``src`` into ``dst``."""
    _indirect(address, src.size, src.ctypes.data, dst.ctypes.data, mode)


@njit(cache=True, nogil=True)
def vml_rows(src, dst, address, mode):
    """``vml_call`` with the arrays first, so ``kernels.parallel`` cuts them into blocks over the threads."""
    _indirect(address, src.size, src.ctypes.data, dst.ctypes.data, mode)
