"""ATen's vectorised partial sums as LLVM vector IR: ``lanes`` float32 sums kept in one vector register,
one vector add a step, in exactly ATen's order (``vec::reduce_all``, ``map2_reduce_all``). numba compiles
the same loop written with scalars as that many scalar chains, half the speed; softmax's row sums
(``rowwise``) and the 2-norm's (``vecnorm``) read these, layer_norm's moments (``welford_lanes``) and its
backward (``layer_norm_dots``, ``layer_norm_grad_row``) too."""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["lane_loop", "welford_lanes", "layer_norm_dots", "layer_norm_grad_row"]


def _loop(builder, name, start, stop, stride, inits, step_fn):
    """A counted loop ``d = start; d < stop; d += stride`` carrying the values ``inits`` (phis), each
    step ``step_fn(values, d)`` giving the next ones; returns their values at the end. The intrinsics'
    loops: written as IR, not numba loops, so the vectors stay vectors."""
    pre = builder.block
    head = builder.append_basic_block(name + ".head")
    body = builder.append_basic_block(name + ".body")
    done = builder.append_basic_block(name + ".done")
    builder.branch(head)
    builder.position_at_end(head)
    d = builder.phi(start.type)
    phis = [builder.phi(v.type) for v in inits]
    d.add_incoming(start, pre)
    for phi, v in zip(phis, inits):
        phi.add_incoming(v, pre)
    builder.cbranch(builder.icmp_signed("<", d, stop), body, done)
    builder.position_at_end(body)
    for phi, v in zip(phis, step_fn(phis, d)):
        phi.add_incoming(v, builder.block)
    d.add_incoming(builder.add(d, stride), builder.block)
    builder.branch(head)
    builder.position_at_end(done)
    return phis


def _fold(builder, acc, lanes):
    """Lane l ^ w added into lane l for w = lanes/2, ..., 1 (ATen's shuffles); lane 0."""
    i32 = ir.IntType(32)
    w = lanes // 2
    while w >= 1:
        mask = ir.Constant(ir.VectorType(i32, lanes), [i ^ w for i in range(lanes)])
        acc = builder.fadd(acc, builder.shuffle_vector(acc, acc, mask))
        w //= 2
    return builder.extract_element(acc, ir.Constant(i32, 0))


def _fma(builder, ty):
    """``llvm.fma`` for ``ty`` (float or a vector of floats)."""
    name = f"llvm.fma.v{ty.count}f32" if isinstance(ty, ir.VectorType) else "llvm.fma.f32"
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty] * 3), name)


def _splat(builder, value, lanes):
    """A vector of ``lanes`` copies of the float ``value``."""
    i32 = ir.IntType(32)
    vf = ir.VectorType(ir.FloatType(), lanes)
    one = builder.insert_element(ir.Constant(vf, ir.Undefined), value, ir.Constant(i32, 0))
    return builder.shuffle_vector(one, ir.Constant(vf, ir.Undefined), ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))


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
            i32 = ir.IntType(32)
            vf = ir.VectorType(ir.FloatType(), lanes)
            step = ir.Constant(intp, lanes)

            def load(d):
                v = [builder.load(builder.bitcast(builder.gep(a.data, [d]), vf.as_pointer()), align=4) for a in arrs]
                return builder.fmul(v[0], v[1]) if dot else v[0]

            m = builder.sub(n, builder.srem(n, step))
            acc, = _loop(builder, "lanes", step, m, step, [load(ir.Constant(intp, 0))],
                         lambda accs, d: [builder.fadd(accs[0], load(d))])
            if not fold:
                lane = [builder.extract_element(acc, ir.Constant(i32, i)) for i in range(lanes)]
                return context.make_tuple(builder, signature.return_type, lane)

            def tail(accs, d):                      # d runs over m .. C - 1: lane d - m
                lane = builder.trunc(builder.sub(d, m), i32)
                v = [builder.load(builder.gep(a.data, [d]), align=4) for a in arrs]
                old = builder.extract_element(accs[0], lane)
                new = builder.call(_fma(builder, old.type), [v[0], v[1], old]) if dot else builder.fadd(old, v[0])
                return [builder.insert_element(accs[0], new, lane)]

            acc, = _loop(builder, "tail", m, n, ir.Constant(intp, 1), [acc], tail)
            return _fold(builder, acc, lanes)
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
        i32 = ir.IntType(32)
        vf = ir.VectorType(ir.FloatType(), 8)
        fma = _fma(builder, vf)
        zero = ir.Constant(vf, [0.0] * 8)

        def step(m, j):
            offset = builder.add(start, builder.mul(j, ir.Constant(intp, 8)))
            v = builder.load(builder.bitcast(builder.gep(ra.data, [offset]), vf.as_pointer()), align=4)
            cv = _splat(builder, builder.load(builder.gep(ia.data, [j]), align=4), 8)
            delta = builder.fsub(v, m[0])
            new1 = builder.call(fma, [delta, cv, m[0]])
            return [new1, builder.call(fma, [delta, builder.fsub(v, new1), m[1]])]

        m1, m2 = _loop(builder, "welford", ir.Constant(intp, 0), count, ir.Constant(intp, 1), [zero, zero], step)
        lanes = [builder.extract_element(m1, ir.Constant(i32, i)) for i in range(8)]
        lanes += [builder.extract_element(m2, ir.Constant(i32, i)) for i in range(8)]
        return context.make_tuple(builder, signature.return_type, lanes)
    return types.UniTuple(types.float32, 16)(row, inv, base, k), codegen


def _arrays(context, builder, signature, values, count):
    """The data pointers of the first ``count`` array arguments."""
    return [context.make_array(t)(context, builder, v).data for t, v in zip(signature.args[:count], values[:count])]


def layer_norm_dots(weighted: bool, fused_tail: bool = True):
    """An intrinsic ``dots(g, x, w, C)`` (``dots(g, x, C)`` without ``weighted``): layer_norm backward's two
    row sums in one pass, in ATen's AVX2 order (8 lanes, each sum as ``lane_loop(8, ...)`` adds): ``ds`` =
    ``map3_reduce_all`` of ``(g x) w`` (the product ``g x`` rounded, the tail fused as ``fma(g x, w, acc)``)
    and ``db`` = ``map2_reduce_all`` of ``g w``; without a weight ``map2_reduce_all`` of ``g x`` and
    ``reduce_all`` of ``g``. ``C >= 8``. One pass reads each row once where the two sums (and the ``g x``
    row they summed) took three. Without ``fused_tail`` the tail's products are rounded before their
    add, as GCC compiled group norm's ``map2_reduce_all`` (its own translation unit)."""
    def codegen(context, builder, signature, values):
        ptrs = _arrays(context, builder, signature, values, len(values) - 1)
        intp = context.get_value_type(types.intp)
        n = context.cast(builder, values[-1], signature.args[-1], types.intp)
        vf = ir.VectorType(ir.FloatType(), 8)
        step = ir.Constant(intp, 8)

        def terms(d):
            v = [builder.load(builder.bitcast(builder.gep(p, [d]), vf.as_pointer()), align=4) for p in ptrs]
            gx = builder.fmul(v[0], v[1])
            return (builder.fmul(gx, v[2]), builder.fmul(v[0], v[2])) if weighted else (gx, v[0])

        def tail(accs, d):                          # d runs over m .. C - 1: lane d - m
            lane = builder.trunc(builder.sub(d, m), ir.IntType(32))
            v = [builder.load(builder.gep(p, [d]), align=4) for p in ptrs]
            fma = _fma(builder, v[0].type)
            ds, db = (builder.extract_element(a, lane) for a in accs)
            if weighted:
                new = builder.call(fma, [builder.fmul(v[0], v[1]), v[2], ds]), builder.call(fma, [v[0], v[2], db])
            elif fused_tail:
                new = builder.call(fma, [v[0], v[1], ds]), builder.fadd(db, v[0])
            else:
                new = builder.fadd(ds, builder.fmul(v[0], v[1])), builder.fadd(db, v[0])
            return [builder.insert_element(a, x, lane) for a, x in zip(accs, new)]

        m = builder.sub(n, builder.srem(n, step))
        accs = _loop(builder, "dots", step, m, step, list(terms(ir.Constant(intp, 0))),
                     lambda accs, d: [builder.fadd(a, t) for a, t in zip(accs, terms(d))])
        ds, db = _loop(builder, "dots.tail", m, n, ir.Constant(intp, 1), accs, tail)
        return context.make_tuple(builder, signature.return_type, [_fold(builder, ds, 8), _fold(builder, db, 8)])

    if weighted:
        return intrinsic(lambda typingctx, g, x, w, C: (types.UniTuple(types.float32, 2)(g, x, w, C), codegen))
    return intrinsic(lambda typingctx, g, x, C: (types.UniTuple(types.float32, 2)(g, x, C), codegen))


@intrinsic
def layer_norm_grad_row(typingctx, g, x, w, gw, gb, gx, coefs, C):
    """One row's elementwise pass of layer_norm's backward, with ``coefs = (a, -a mean, b, c)`` (``a`` the
    row's 1/std): ``gw = fma(g, fma(a, x, -a mean), gw)``, ``gb = gb + g`` (the rows' running sums) and
    ``gx = fma(b, x, (a g) w) + c``, 16 columns a step as vectors and the tail as scalars, the same
    operations (so the same floats) in both. One loop over the row where numba's two loops, each with
    its own alias checks, ran 1.5x longer."""
    def codegen(context, builder, signature, values):
        gp, xp, wp, gwp, gbp, gxp = _arrays(context, builder, signature, values, 6)
        coef = [builder.extract_value(values[6], i) for i in range(4)]
        intp = context.get_value_type(types.intp)
        n = context.cast(builder, values[7], signature.args[7], types.intp)
        f32 = ir.FloatType()

        def step(width):
            ty = ir.VectorType(f32, width) if width > 1 else f32
            fma = _fma(builder, ty)
            a, shift, b, c = (_splat(builder, v, width) if width > 1 else v for v in coef)

            def at(p, d):
                ptr = builder.gep(p, [d])
                return builder.bitcast(ptr, ty.as_pointer()) if width > 1 else ptr

            def run(accs, d):
                gv, xv, wv, gwv, gbv = (builder.load(at(p, d), align=4) for p in (gp, xp, wp, gwp, gbp))
                builder.store(builder.call(fma, [gv, builder.call(fma, [a, xv, shift]), gwv]), at(gwp, d), align=4)
                builder.store(builder.fadd(gbv, gv), at(gbp, d), align=4)
                prod = builder.fmul(builder.fmul(a, gv), wv)
                builder.store(builder.fadd(builder.call(fma, [b, xv, prod]), c), at(gxp, d), align=4)
                return []
            return run

        m = builder.sub(n, builder.srem(n, ir.Constant(intp, 16)))
        _loop(builder, "grad", ir.Constant(intp, 0), m, ir.Constant(intp, 16), [], step(16))
        _loop(builder, "grad.tail", m, n, ir.Constant(intp, 1), [], step(1))
        return context.get_dummy_value()
    return types.void(g, x, w, gw, gb, gx, coefs, C), codegen

