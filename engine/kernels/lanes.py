"""ATen's vectorised partial sums as LLVM vector IR: ``lanes`` float32 sums kept in one vector register,
one vector add a step, in exactly ATen's order (``vec::reduce_all``, ``map2_reduce_all``). numba compiles
the same loop written with scalars as that many scalar chains, half the speed; softmax's row sums
(``rowwise``) and the 2-norm's (``vecnorm``) read these."""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["lane_loop", "welford_lanes"]


def lane_loop(lanes: int, dot: bool, fold: bool = True):
    """An intrinsic: ``vec::reduce_all`` of ``+`` over a row of ``C >= lanes`` floats (or ``map2_reduce_all``
    of ``g * y``), ATen's order written as LLVM vector IR: ``lanes`` partial sums from the first vector,
    one vector add a step over the full vectors (the products rounded: no FMA), the tail's values added
    (fused with their products for ``dot``) into the first lanes, then lane l ^ w added into lane l for
    w = lanes/2, ..., 1 (ATen's shuffles), lane 0. (As numba code, 16 scalar chains and a scalar fold: 2x.)
    Without ``fold``: the ``lanes`` partial sums of the full vectors alone, as a tuple (the caller adds
    the tail and the lanes in its own order: ``vecnorm``)."""
    def typer(typingctx, *args):
        def codegen(context, builder, signature, values):
            arrs = [context.make_array(t)(context, builder, v) for t, v in zip(signature.args[:-1], values[:-1])]
            intp = context.get_value_type(types.intp)
            n = context.cast(builder, values[-1], signature.args[-1], types.intp)
            f32, i32 = ir.FloatType(), ir.IntType(32)
            vf = ir.VectorType(f32, lanes)
            step = ir.Constant(intp, lanes)
            fma32 = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32] * 3), "llvm.fma.f32")

            def load(d):
                v = [builder.load(builder.bitcast(builder.gep(a.data, [d]), vf.as_pointer()), align=4) for a in arrs]
                return builder.fmul(v[0], v[1]) if dot else v[0]

            def loop(name, start, stop, acc0, step_fn, stride):
                pre = builder.block
                head = builder.append_basic_block(name + ".head")
                body = builder.append_basic_block(name + ".body")
                done = builder.append_basic_block(name + ".done")
                builder.branch(head)
                builder.position_at_end(head)
                d = builder.phi(intp)
                acc = builder.phi(vf)
                d.add_incoming(start, pre)
                acc.add_incoming(acc0, pre)
                builder.cbranch(builder.icmp_signed("<", d, stop), body, done)
                builder.position_at_end(body)
                acc.add_incoming(step_fn(acc, d), builder.block)
                d.add_incoming(builder.add(d, stride), builder.block)
                builder.branch(head)
                builder.position_at_end(done)
                return acc

            m = builder.sub(n, builder.srem(n, step))
            acc = loop("lanes", step, m, load(ir.Constant(intp, 0)), lambda acc, d: builder.fadd(acc, load(d)), step)
            if not fold:
                lane = [builder.extract_element(acc, ir.Constant(i32, i)) for i in range(lanes)]
                return context.make_tuple(builder, signature.return_type, lane)

            def tail(acc, d):                       # d runs over m .. C - 1: lane d - m
                lane = builder.trunc(builder.sub(d, m), i32)
                v = [builder.load(builder.gep(a.data, [d]), align=4) for a in arrs]
                old = builder.extract_element(acc, lane)
                new = builder.call(fma32, [v[0], v[1], old]) if dot else builder.fadd(old, v[0])
                return builder.insert_element(acc, new, lane)

            acc = loop("tail", m, n, acc, tail, ir.Constant(intp, 1))
            w = lanes // 2
            while w >= 1:
                mask = ir.Constant(ir.VectorType(i32, lanes), [i ^ w for i in range(lanes)])
                acc = builder.fadd(acc, builder.shuffle_vector(acc, acc, mask))
                w //= 2
            return builder.extract_element(acc, ir.Constant(i32, 0))
        return (types.float32 if fold else types.UniTuple(types.float32, lanes))(*args), codegen
    if dot:
        return intrinsic(lambda typingctx, g, y, C: typer(typingctx, g, y, C))
    return intrinsic(lambda typingctx, a, C: typer(typingctx, a, C))


@intrinsic
def welford_lanes(typingctx, row, inv, base, k):
    """ATen's ``UpdateMomentsVec`` over one chunk of a row: 8 lanes (one 256-bit vector) of Welford's
    update, ``k`` steps, step j reading ``row[base + 8 j : base + 8 j + 8]`` with weight ``inv[j]``
    (``1 / (j + 1)``): ``delta = v - m1; m1 = fma(delta, c, m1); m2 = fma(delta, v - m1, m2)``, from zeros.
    Returns the lanes' means then their sums of squares (16 floats). As numba code the lanes are 8
    scalar chains (layer_norm's moments at ~2 cycles an element); as one vector, a vector op a step."""
    if not (isinstance(row, types.Array) and isinstance(inv, types.Array)
            and isinstance(base, types.Integer) and isinstance(k, types.Integer)):
        return None

    def codegen(context, builder, signature, values):
        ra = context.make_array(signature.args[0])(context, builder, values[0])
        ia = context.make_array(signature.args[1])(context, builder, values[1])
        intp = context.get_value_type(types.intp)
        start = context.cast(builder, values[2], signature.args[2], types.intp)
        count = context.cast(builder, values[3], signature.args[3], types.intp)
        f32, i32 = ir.FloatType(), ir.IntType(32)
        vf = ir.VectorType(f32, 8)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vf, [vf] * 3), "llvm.fma.v8f32")
        zero = ir.Constant(vf, [0.0] * 8)
        splat = ir.Constant(ir.VectorType(i32, 8), [0] * 8)
        pre = builder.block
        head = builder.append_basic_block("welford.head")
        body = builder.append_basic_block("welford.body")
        done = builder.append_basic_block("welford.done")
        builder.branch(head)
        builder.position_at_end(head)
        j = builder.phi(intp)
        m1 = builder.phi(vf)
        m2 = builder.phi(vf)
        j.add_incoming(ir.Constant(intp, 0), pre)
        m1.add_incoming(zero, pre)
        m2.add_incoming(zero, pre)
        builder.cbranch(builder.icmp_signed("<", j, count), body, done)
        builder.position_at_end(body)
        offset = builder.add(start, builder.mul(j, ir.Constant(intp, 8)))
        v = builder.load(builder.bitcast(builder.gep(ra.data, [offset]), vf.as_pointer()), align=4)
        c = builder.load(builder.gep(ia.data, [j]), align=4)
        cv = builder.shuffle_vector(builder.insert_element(ir.Constant(vf, ir.Undefined), c, ir.Constant(i32, 0)),
                                    ir.Constant(vf, ir.Undefined), splat)
        delta = builder.fsub(v, m1)
        new1 = builder.call(fma, [delta, cv, m1])
        new2 = builder.call(fma, [delta, builder.fsub(v, new1), m2])
        m1.add_incoming(new1, builder.block)
        m2.add_incoming(new2, builder.block)
        j.add_incoming(builder.add(j, ir.Constant(intp, 1)), builder.block)
        builder.branch(head)
        builder.position_at_end(done)
        lanes = [builder.extract_element(m1, ir.Constant(i32, i)) for i in range(8)]
        lanes += [builder.extract_element(m2, ir.Constant(i32, i)) for i in range(8)]
        return context.make_tuple(builder, signature.return_type, lanes)
    return types.UniTuple(types.float32, 16)(row, inv, base, k), codegen
