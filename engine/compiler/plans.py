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

import operator

import numpy as np

from ..base import pool, runtime
from ..kernels import blas, loops, mkl, parallel, use
from ..kernels.gemm import GEMM_PARALLEL_MIN, MKL_MIN, OWN_MIN_COLS, OWN_MIN_K, OWN_MIN_ROWS, _small
from ..ops.reduce import array_sum

__all__ = ["planned", "linear_relu", "epilogues", "cat_copying", "joined_copies", "written_into", "writing_into"]

_F32 = np.dtype(np.float32)
_ND = np.ndarray
_NO_TRANS, _TRANS = 111, 112
_LIMIT = 1 << 31       # MKL_INT (LP64)
_EMPTY = np.empty((0,), _F32)     # an unneeded gradient (``_bwd_fwd``'s empty array; nothing writes it)


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
        if (len(b) == 1 and x.ndim == 2 and w.ndim == 2 and x.size * w.shape[0] < MKL_MIN and xp is np
                and _plain(x) and _plain(w) and _plain(b[0]) and b[0].shape == w.shape[:1]):
            res = _small(x, w.T)     # ``gemm_bias``'s route under MKL_MIN, without ``_fwd``'s steps to it
            if res is not None:
                res += b[0]
                return res
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
        if (g.ndim == x.ndim == w.ndim == 2 and g.size * w.shape[1] < MKL_MIN and xp is np and _plain(g)
                and _plain(x) and _plain(w)):
            # ``gemms``' products under MKL_MIN are ``gemm``'s, which ``_small`` runs: its route, directly
            gx = _small(g, w) if needs[0] else _EMPTY
            gw = _small(g.T, x) if needs[1] else _EMPTY
            if gx is not None and gw is not None:
                return gx, gw, array_sum(xp, g, (0,)) if needs[2] else _EMPTY
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


def refined(a: tuple, b: tuple) -> tuple | None:
    """The shape that both ``a`` and ``b`` are made of by merging neighbouring dims (each of their
    dims a product of consecutive ones of it: (64, 32, 32) and (64, 8, 128) -> (64, 8, 4, 32)), or None
    where there is none ((4, 6) and (6, 4)); both arrays' reshapes to it split dims only."""
    if 0 in a or 0 in b or not a or not b:
        return None
    out, i, j, ra, rb = [], 0, 0, a[0], b[0]
    while True:
        if ra == rb:
            out.append(ra)
            i, j = i + 1, j + 1
            if i == len(a) or j == len(b):
                return tuple(out) if i == len(a) and j == len(b) else None
            ra, rb = a[i], b[j]
        elif ra % rb == 0:
            out.append(rb)
            ra, j = ra // rb, j + 1
            if j == len(b):
                return None
            rb = b[j]
        elif rb % ra == 0:
            out.append(ra)
            rb, i = rb // ra, i + 1
            if i == len(a):
                return None
            ra = a[i]
        else:
            return None


def cat_copying(cat_fwd, shapes: tuple):
    """``cat`` whose inputs ``i`` with ``shapes[i] = (reshape's shape, refined shape)`` are the sources of
    reshapes only the cat reads: each source is copied once, straight into its part of the output (seen
    through the refined shape, a view of both), where eager copied it into the reshape's new array and
    that into the cat's (attention's three head gradients into the qkv gradient: two copies each). The same
    elements, so the same values; anything else (another dtype, a view that would copy) is the ops' own."""
    def planned_cat(xp, *xs, dim, skip):
        if xp is np and not skip and all(type(x) is _ND and x.dtype is xs[0].dtype for x in xs):
            parts = [x.shape if s is None else s[0] for x, s in zip(xs, shapes)]
            d = dim % len(parts[0])
            total = sum(p[d] for p in parts)
            out = np.empty(parts[0][:d] + (total,) + parts[0][d + 1:], xs[0].dtype)
            at, lead = 0, (slice(None),) * d
            for x, part, s in zip(xs, parts, shapes):
                dst = out[lead + (slice(at, at + part[d]),)]
                at += part[d]
                if s is None:
                    np.copyto(dst, x)
                    continue
                view = dst.view()
                try:
                    view.shape = s[1]     # splits only: a view (numpy refuses where it would copy)
                except AttributeError:
                    break
                np.copyto(view, x.reshape(s[1]))
            else:
                return out
        return cat_fwd(xp, *[x if s is None else x.reshape(s[0]) for x, s in zip(xs, shapes)], dim=dim, skip=skip)
    return planned_cat


def joined_copies(nodes, name_of) -> dict:
    """``{cat node: its inputs' (reshape's shape, refined shape) or None}`` for each cat with an input
    made by a reshape that only the cat reads, whose source's shape and its own have a refined shape
    (``refined``): the generated step copies that source into the cat's output (``cat_copying``) and
    makes no reshape. ``name_of``: a node's registry name, or None."""
    def shape(n):
        m = n.meta.get("tensor_meta") if hasattr(n, "meta") else None
        return tuple(m.shape) if m is not None and type(m) is not tuple else None
    joins = {}
    for n in nodes:
        if n.op != "call_function" or name_of(n) != "cat" or n.kwargs.get("skip", True):
            continue
        parts = []
        for a in n.args:
            src = a.args[0] if getattr(a, "op", None) == "call_function" and name_of(a) == "reshape" else None
            if src is None or len(a.users) != 1 or len(a.args) != 1 or shape(src) is None or shape(a) is None:
                parts.append(None)
                continue
            fine = refined(shape(src), shape(a))
            parts.append(None if fine is None else (shape(a), fine))
        if any(p is not None for p in parts):
            joins[n] = tuple(parts)
    return joins


# ops whose declared forward takes ``into=``: arrays its first outputs are written into
_WRITES_INTO = {"scaled_dot_product_attention_backward": 3}
_VIEWS = {"reshape": lambda a, params: a.reshape(params["shape"]),
          "permute": lambda a, params: a.transpose(params["dims"])}


def written_into(nodes, name_of) -> dict:
    """``{cat node: (producer node, the chain's nodes, ((shape, offset, strides) per output))}`` for each cat
    whose inputs are exactly the first outputs of one op that can write them into given arrays
    (``_WRITES_INTO``: attention's backward, the joined qkv gradient), each through reshapes and permutes
    that only lead to the cat, and where each output's place in the cat's result is a strided view
    (offset and strides in elements): the generated step then has the op write into the cat's result and
    runs the chain and the cat only where it did not (``writing_into``)."""
    def shape(n):
        m = n.meta.get("tensor_meta") if hasattr(n, "meta") else None
        return tuple(m.shape) if m is not None and type(m) is not tuple else None
    found = {}
    for cat in nodes:
        if cat.op != "call_function" or name_of(cat) != "cat" or cat.kwargs.get("skip", True) or shape(cat) is None:
            continue
        chains, producer = [], None
        for a in cat.args:
            chain, n = [], a
            while getattr(n, "op", None) == "call_function" and name_of(n) in _VIEWS and len(n.users) == 1:
                chain.append(n)
                n = n.args[0]
            if not (getattr(n, "op", None) == "call_function" and n.target is operator.getitem
                    and len(n.users) == 1 and shape(n) is not None and (producer is None or n.args[0] is producer)):
                break
            producer = n.args[0]
            chains.append((n, chain[::-1]))
        else:
            count = _WRITES_INTO.get(name_of(producer)) if producer is not None else None
            if count is None or sorted(item.args[1] for item, _ in chains) != list(range(count)):
                continue
            places = _places(shape(cat), cat.kwargs["dim"], [(shape(item), [(name_of(v), v.kwargs) for v in chain],
                                                             shape(a)) for (item, chain), a in zip(chains, cat.args)])
            if places is not None:
                by_output = sorted(zip((item.args[1] for item, _ in chains), places))
                found[cat] = (producer, [n for item, chain in chains for n in (item, *chain)],
                              tuple(place for _, place in by_output))
    return found


def _places(cat_shape: tuple, dim: int, parts: list):
    """Each part's ``(source shape, offset, strides)`` in a C-contiguous array of ``cat_shape``, for parts
    ``(source shape, [(view op, params)], shape joined)``; None where one is not a strided view. Found by
    sending each source element's index through the views and reading where the cat puts it."""
    memory = np.arange(int(np.prod(cat_shape))).reshape(cat_shape)
    d, at, places = dim % len(cat_shape), 0, []
    for source, views, joined in parts:
        index = np.arange(int(np.prod(source))).reshape(source)
        for name, params in views:
            index = _VIEWS[name](index, params)
        where = memory[(slice(None),) * d + (slice(at, at + joined[d]),)]
        at += joined[d]
        if index.shape != where.shape or not index.size:
            return None
        place = np.empty(index.size, np.intp)
        place[index.reshape(-1)] = where.reshape(-1)
        place = place.reshape(source)
        offset, rank = int(place.flat[0]), len(source)
        strides = tuple(int(place[(0,) * k + (1,) + (0,) * (rank - k - 1)]) - offset if n > 1 else 0
                        for k, n in enumerate(source))
        grid = offset + sum(np.arange(n).reshape((n,) + (1,) * (rank - k - 1)) * st
                            for k, (n, st) in enumerate(zip(source, strides)))
        if not np.array_equal(place, np.broadcast_to(grid, source)):
            return None
        places.append((source, offset, strides))
    return places if at == cat_shape[d] else None


def writing_into(op_fwd, shape: tuple, dtype, places: tuple):
    """``op_fwd`` writing its first outputs into their places in one new array of ``shape`` (``places``
    from ``written_into``), returned after the op's results, or None there where the op made its own
    arrays (another dtype, a path that does not take them): the cat then joins them as before."""
    dtype = np.dtype(dtype)
    item = dtype.itemsize

    def planned_into(xp, *args, **params):
        if xp is np and args[0].dtype == dtype:
            out = np.empty(shape, dtype)
            into = tuple(np.ndarray(s, dtype, out, offset * item, tuple(st * item for st in strides))
                         for s, offset, strides in places)
            res = op_fwd(xp, *args, into=into, **params)
            return (*res, out if all(r is v for r, v in zip(res, into)) else None)
        return (*op_fwd(xp, *args, **params), None)
    return planned_into
