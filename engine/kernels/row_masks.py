"""Loops over the first ``n`` entries of a float32 row as 8-float vectors, a lane mask cutting the last
block at ``n``: the attention softmax's rows (``rowwise.attention_softmax``), whose causal lengths 1..S
numba's own loops ran through their scalar remainder (LLVM's vector loop steps several vectors at a time,
and a constant 16-float inner loop is unrolled, then vectorised across blocks: 3x slower). Written as LLVM
vector IR, one vector op a block whatever ``n``; the row's last ``size % 8`` entries go one at a time.
256-bit, not 512: with 16-float vectors here the whole softmax of 4096 x 64 took 296 us, not 155 (the
exps between them are numba's 256-bit loop; the core pays for switching widths)."""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .lanes import _loop, _splat

__all__ = ["scaled_max", "scale_first"]

_W = 8
_I32 = ir.IntType(32)
_VI = ir.VectorType(_I32, _W)
_VF = ir.VectorType(ir.FloatType(), _W)


def _splat_i32(builder, value):
    one = builder.insert_element(ir.Constant(_VI, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(_VI, ir.Undefined), ir.Constant(_VI, [0] * _W))


def _row(context, builder, signature, values):
    """The row's data pointer, its length (whole vectors' end, end) and ``n`` as intp."""
    a = context.make_array(signature.args[0])(context, builder, values[0])
    intp = context.get_value_type(types.intp)
    size = builder.extract_value(a.shape, 0)
    whole = builder.sub(size, builder.srem(size, ir.Constant(intp, _W)))
    return a.data, whole, size, context.cast(builder, values[1], signature.args[1], types.intp)


def _live(builder, n, d):
    """The lanes of the block at ``d`` below ``n``."""
    lim = builder.trunc(builder.sub(n, d), _I32)
    return builder.icmp_signed("<", ir.Constant(_VI, list(range(_W))), _splat_i32(builder, lim))


def _key(builder, bits, low):
    """Order keys of float bits (as ``rowwise._row_max``): bits XOR their sign spread over the low 31."""
    shift = ir.Constant(bits.type, [31] * _W) if isinstance(bits.type, ir.VectorType) else ir.Constant(_I32, 31)
    return builder.xor(bits, builder.and_(builder.ashr(bits, shift), low))


def _smax(builder, a, b):
    return builder.select(builder.icmp_signed(">", a, b), a, b)


@intrinsic
def scaled_max(typingctx, row, n, scale):
    """The max of ``row[:n] * scale`` (a float32 row, ``n >= 1``), a nan above every number: the
    products' order keys compared as integers (``rowwise._row_max``), 8 lanes a step."""
    if not (isinstance(row, types.Array) and row.ndim == 1 and isinstance(n, types.Integer)):
        return None

    def codegen(context, builder, signature, values):
        data, whole, _, n = _row(context, builder, signature, values)
        intp = n.type
        sc = _splat(builder, values[2], _W)
        low, bottom = ir.Constant(_VI, [0x7FFFFFFF] * _W), ir.Constant(_VI, [-2147483648] * _W)
        up = builder.and_(builder.add(n, ir.Constant(intp, _W - 1)), ir.Constant(intp, -_W))
        stop = builder.select(builder.icmp_signed("<", up, whole), up, whole)   # the blocks holding row[:n]

        def block(accs, d):
            v = builder.load(builder.bitcast(builder.gep(data, [d]), _VF.as_pointer()), align=4)
            key = _key(builder, builder.bitcast(builder.fmul(v, sc), _VI), low)
            return [_smax(builder, builder.select(_live(builder, n, d), key, bottom), accs[0])]

        acc, = _loop(builder, "max", ir.Constant(intp, 0), stop, ir.Constant(intp, _W), [bottom], block)
        w = _W // 2
        while w >= 1:
            acc = _smax(builder, acc, builder.shuffle_vector(acc, acc, ir.Constant(_VI, [i ^ w for i in range(_W)])))
            w //= 2
        top = builder.extract_element(acc, ir.Constant(_I32, 0))

        def single(accs, d):
            v = builder.fmul(builder.load(builder.gep(data, [d]), align=4), values[2])
            return [_smax(builder, _key(builder, builder.bitcast(v, _I32), ir.Constant(_I32, 0x7FFFFFFF)), accs[0])]

        top, = _loop(builder, "max.rest", stop, n, ir.Constant(intp, 1), [top], single)
        return builder.bitcast(_key(builder, top, ir.Constant(_I32, 0x7FFFFFFF)), ir.FloatType())
    return types.float32(row, n, scale), codegen


@intrinsic
def scale_first(typingctx, row, n, factor):
    """``row[:n] *= factor``, the rest of the row set to 0."""
    if not (isinstance(row, types.Array) and row.ndim == 1 and isinstance(n, types.Integer)):
        return None

    def codegen(context, builder, signature, values):
        data, whole, size, n = _row(context, builder, signature, values)
        intp = n.type
        f = _splat(builder, values[2], _W)
        zero = ir.Constant(_VF, [0.0] * _W)

        def block(accs, d):
            p = builder.bitcast(builder.gep(data, [d]), _VF.as_pointer())
            v = builder.fmul(builder.load(p, align=4), f)
            builder.store(builder.select(_live(builder, n, d), v, zero), p, align=4)
            return []

        _loop(builder, "scale", ir.Constant(intp, 0), whole, ir.Constant(intp, _W), [], block)

        def single(accs, d):
            p = builder.gep(data, [d])
            v = builder.fmul(builder.load(p, align=4), values[2])
            builder.store(builder.select(builder.icmp_signed("<", d, n), v, ir.Constant(ir.FloatType(), 0.0)), p,
                          align=4)
            return []

        _loop(builder, "scale.rest", whole, size, ir.Constant(intp, 1), [], single)
        return context.get_dummy_value()
    return types.none(row, n, factor), codegen
