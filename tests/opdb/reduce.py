"""OpInfos for reductions, extrema, statistics, norms and scans."""
from __future__ import annotations

import numpy as np

from tapelab.ops import reduce as _reduce

from .core import ErrorInput, OpInfo, Sample, arr, pos

RED = [Sample((arr(3, 4),), name="all"), Sample((arr(3, 4),), {"dim": 1}, name="dim1"),
       Sample((arr(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, name="dims_keep"),
       Sample((arr(2, 3),), {"dim": -1}, name="negdim"), Sample((arr(),), name="0d"),
       Sample((arr(),), {"dim": 0}, name="0d_dim"), Sample((arr(0, 3),), {"dim": 1}, name="empty"),
       Sample((arr(4, 3),), {"dim": 0}, noncontig=True, name="noncontig")]
ONE_DIM = [Sample((arr(3, 4),), name="all"), Sample((arr(3, 4),), {"dim": 1}, name="dim1"),
           Sample((arr(2, 3, 4),), {"dim": -2, "keepdim": True}, name="negdim_keep"),
           Sample((arr(),), name="0d"), Sample((arr(),), {"dim": 0}, name="0d_dim"),
           Sample((arr(4, 3),), {"dim": 0}, noncontig=True, name="noncontig")]
TIES = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 0.5], [0.0, -4.0, 1.5, -4.0]])
ZEROS = [Sample((np.array([[1.5, 0.0, -2.0], [0.5, 1.2, 2.0]]),), name="one_zero"),
         Sample((np.array([[1.5, 0.0, -2.0], [0.0, 1.2, 2.0]]),), name="two_zeros"),
         Sample((np.array([[1.5, 0.0, -2.0, 0.0], [0.7, 1.2, 0.0, 2.0]]),), {"dim": 1}, name="dim_zeros"),
         Sample((np.array([[1.5, 0.0], [0.0, 1.2], [0.3, 2.0]]),), {"dim": 0, "keepdim": True},
                name="dim0_zeros")]
SCAN = [Sample((arr(3, 4), 1), name="dim1"), Sample((arr(2, 3, 4), -3), name="negdim"),
        Sample((arr(), 0), name="0d"), Sample((arr(0, 3), 1), name="empty"),
        Sample((arr(4, 3), 0), noncontig=True, name="noncontig")]
VAR = [Sample((arr(3, 4),), name="all"), Sample((arr(3, 4),), {"dim": 1}, name="dim1"),
       Sample((arr(2, 3, 4),), {"dim": (0, -1), "keepdim": True, "correction": 0}, name="dims_keep_c0"),
       Sample((arr(5, 3),), {"dim": 0, "correction": 2}, name="correction2"),
       Sample((arr(3, 4),), {"dim": 1, "unbiased": False}, name="unbiased_false"),
       Sample((arr(4, 3),), {"dim": 0}, noncontig=True, name="noncontig")]
INTS = np.array([[3, -1, 2], [0, 5, 2]])


def _vector_norm(m):
    return getattr(m, "linalg", _reduce).vector_norm


def _dim_error():
    return [ErrorInput(Sample((arr(2, 3),), {"dim": 2}), IndexError, "Dimension out of range")]


def _empty_errors():
    return [ErrorInput(Sample((arr(0, 3),)), RuntimeError, "Expected reduction dim to be specified"),
            ErrorInput(Sample((arr(0, 3),), {"dim": 0}), IndexError, "reduction dim 0 to have non-zero size"),
            ErrorInput(Sample((arr(2, 3),), {"dim": -3}), IndexError, "Dimension out of range")]


def _max_samples():
    return ONE_DIM + [Sample((arr(0, 3),), {"dim": 1}, name="empty_other_dim")]


OPS = [
    OpInfo("sum", lambda m, a, **kw: m.sum(a, **kw), lambda: RED, errors=_dim_error),
    OpInfo("sum_method", lambda m, a, **kw: a.sum(**kw), lambda: RED[:4]),
    OpInfo("sum_int", lambda m, a, **kw: m.sum(a, **kw),
           lambda: [Sample((INTS,)), Sample((INTS,), {"dim": 0}, name="dim0"),
                    Sample((INTS > 0,), {"dim": 1}, name="bool")], grad=False),
    OpInfo("sum_dtype", lambda m, a: m.sum(a, dtype=m.float64), lambda: [Sample((arr(3, 4),))]),
    OpInfo("mean", lambda m, a, **kw: a.mean(**kw), lambda: RED),
    OpInfo("prod", lambda m, a, **kw: m.prod(a, **kw),
           lambda: ONE_DIM + ZEROS + [Sample((arr(0, 3),), {"dim": 1}, name="empty")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3),), {"dim": 2}), IndexError, "Dimension out of range"),
                           ErrorInput(Sample((arr(2, 3),), {"dim": (0, 1)}), TypeError, "must be int")]),
    OpInfo("prod_int", lambda m, a, **kw: a.prod(**kw), lambda: [Sample((INTS,)), Sample((INTS,), {"dim": 1})],
           grad=False),
    OpInfo("max", lambda m, a, **kw: m.max(a, **kw), _max_samples, errors=_empty_errors),
    OpInfo("min", lambda m, a, **kw: a.min(**kw), _max_samples, errors=_empty_errors),
    OpInfo("max_ties", lambda m, a, **kw: m.max(a, **kw),
           lambda: [Sample((TIES,)), Sample((TIES,), {"dim": 1}, name="dim1"),
                    Sample((TIES,), {"dim": 0, "keepdim": True}, name="dim0_keep")], gradcheck=False),
    OpInfo("min_ties", lambda m, a, **kw: m.min(a, **kw),
           lambda: [Sample((TIES,)), Sample((TIES,), {"dim": 1}, name="dim1")], gradcheck=False),
    OpInfo("max_fields", lambda m, a: (m.max(a, 1).values, m.max(a, 1).indices, m.max(a, dim=0)[1]),
           lambda: [Sample((arr(3, 4),))]),
    OpInfo("amax", lambda m, a, **kw: m.amax(a, **kw), lambda: [s for s in RED if s.name != "empty"],
           errors=_empty_errors),
    OpInfo("amin", lambda m, a, **kw: a.amin(**kw), lambda: [s for s in RED if s.name != "empty"]),
    OpInfo("amax_ties", lambda m, a, **kw: m.amax(a, **kw),
           lambda: [Sample((TIES,)), Sample((TIES,), {"dim": 1}, name="dim1"),
                    Sample((TIES,), {"dim": (0, 1), "keepdim": True}, name="all_keep")], gradcheck=False),
    OpInfo("amin_ties", lambda m, a, **kw: m.amin(a, **kw),
           lambda: [Sample((TIES,)), Sample((TIES,), {"dim": 0}, name="dim0")], gradcheck=False),
    OpInfo("argmax", lambda m, a, **kw: m.argmax(a, **kw),
           lambda: ONE_DIM + [Sample((TIES,), {"dim": 1}, name="ties"),
                              Sample((arr(3, 4),), {"keepdim": True}, name="none_keep")],
           grad=False, errors=lambda: [ErrorInput(Sample((arr(0, 3),)), IndexError, "Expected reduction dim"),
                                       *_empty_errors()[1:]]),
    OpInfo("argmin", lambda m, a, **kw: a.argmin(**kw), lambda: ONE_DIM + [Sample((TIES,), {"dim": 0}, name="ties")],
           grad=False),
    OpInfo("var", lambda m, a, **kw: m.var(a, **kw), lambda: VAR,
           errors=lambda: [ErrorInput(Sample((INTS,)), RuntimeError, "floating point")]),
    OpInfo("std", lambda m, a, **kw: a.std(**kw), lambda: VAR),
    OpInfo("var_positional", lambda m, a: (a.var(1, False), a.var(False), m.var(a, 0, True, True)),
           lambda: [Sample((arr(3, 4),))]),
    OpInfo("std_constant", lambda m, a: m.std(a, 1), lambda: [Sample((np.array([[2.0, 2.0], [1.0, 3.0]]),))],
           gradcheck=False),
    OpInfo("var_mean", lambda m, a, **kw: m.var_mean(a, **kw), lambda: VAR[:3]),
    OpInfo("std_mean", lambda m, a, **kw: m.std_mean(a, **kw), lambda: VAR[:3]),
    OpInfo("logsumexp", lambda m, a, **kw: m.logsumexp(a, **kw),
           lambda: [Sample((arr(3, 4),), {"dim": 1}), Sample((arr(2, 3, 4),), {"dim": (0, 2), "keepdim": True},
                                                            name="dims_keep"),
                    Sample((arr(3, 4) * 50,), {"dim": -1}, name="large"), Sample((arr(),), {"dim": 0}, name="0d"),
                    Sample((arr(4, 3),), {"dim": 0}, noncontig=True, name="noncontig")]),
    OpInfo("logsumexp_int", lambda m, a: m.logsumexp(a, 1), lambda: [Sample((INTS,))], grad=False),
    OpInfo("norm", lambda m, a, *args, **kw: m.norm(a, *args, **kw),
           lambda: [Sample((arr(3, 4),)), Sample((arr(3, 4), "fro"), name="fro"),
                    Sample((arr(3, 4), 1), {"dim": 1}, name="p1"),
                    Sample((arr(3, 4), float("inf")), {"dim": 0, "keepdim": True}, name="inf"),
                    Sample((arr(2, 3, 4), 3), {"dim": (0, 2)}, name="p3"), Sample((arr(),), name="0d"),
                    Sample((arr(4, 3), 2), {"dim": 1}, noncontig=True, name="noncontig")]),
    OpInfo("norm_method", lambda m, a, **kw: a.norm(**kw),
           lambda: [Sample((arr(3, 4),), {"p": 2, "dim": -1}), Sample((arr(3, 4),), {"p": 0.5}, name="half")]),
    OpInfo("norm_zero", lambda m, a: m.norm(a, dim=1), lambda: [Sample((np.array([[0.0, 0.0], [3.0, -4.0]]),))],
           gradcheck=False),
    OpInfo("vector_norm", lambda m, a, **kw: _vector_norm(m)(a, **kw),
           lambda: [Sample((arr(3, 4),)), Sample((arr(3, 4),), {"ord": -float("inf"), "dim": 1}, name="neg_inf"),
                    Sample((arr(3, 4),), {"ord": 0, "dim": 1}, name="ord0"),
                    Sample((arr(3, 4),), {"ord": 4, "dim": (0, 1), "keepdim": True}, name="ord4")],
           errors=lambda: [ErrorInput(Sample((INTS,)), RuntimeError, "floating point")]),
    OpInfo("cumsum", lambda m, a, d: m.cumsum(a, d), lambda: SCAN,
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 2)), IndexError, "Dimension out of range")]),
    OpInfo("cumsum_int", lambda m, a, d: a.cumsum(d), lambda: [Sample((INTS, 1)), Sample((INTS > 0, 0), name="bool")],
           grad=False),
    OpInfo("cumprod", lambda m, a, d: m.cumprod(a, d),
           lambda: SCAN + [Sample((s.args[0], s.kwargs.get("dim", 1)), name=s.name) for s in ZEROS]),
    OpInfo("cumprod_method", lambda m, a: a.cumprod(dim=-1), lambda: [Sample((pos(3, 4),))]),
    OpInfo("all", lambda m, a, **kw: m.all(a, **kw),
           lambda: [Sample((INTS,)), Sample((INTS,), {"dim": 1}, name="dim1"),
                    Sample((INTS > 0,), {"dim": 0, "keepdim": True}, name="bool_keep"),
                    Sample((INTS.astype(np.uint8),), name="uint8"), Sample((arr(0, 2),), {"dim": 1}, name="empty")],
           grad=False),
    OpInfo("any", lambda m, a, **kw: a.any(**kw),
           lambda: [Sample((INTS,)), Sample((INTS * 0,), {"dim": -1}, name="zeros"),
                    Sample((arr(3, 4),), {"dim": 0}, name="float")], grad=False),
    OpInfo("count_nonzero", lambda m, a, **kw: m.count_nonzero(a, **kw),
           lambda: [Sample((INTS,)), Sample((INTS,), {"dim": 0}, name="dim0"),
                    Sample((TIES,), {"dim": (0, 1)}, name="dims")], grad=False),
]
