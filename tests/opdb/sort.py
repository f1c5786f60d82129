"""OpInfos for sorting and order statistics."""
from __future__ import annotations

import numpy as np

from .core import ErrorInput, OpInfo, Sample, arr

TIES = np.array([[1.0, 3.0, 3.0, -1.0, 3.0], [2.0, 2.0, 0.5, 2.0, 0.5]])
INTS = np.array([[3, 1, 3, 2], [0, 2, 2, 1], [3, 1, 3, 2]])
MODE = np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 5.0], [2.0, 2.0, 7.0, 7.0, 0.0, 1.0], [1.0, 3.0, 3.0, 1.0, 3.0, 1.0]])
WITH_NAN = np.array([[1.0, np.nan, -2.0, 0.5], [np.nan, 3.0, 1.0, 2.0]])


def _dim_error(*extra):
    return lambda: [ErrorInput(Sample((arr(2, 3), *extra), {"dim": 2}), IndexError, "Dimension out of range")]


SORT = [Sample((arr(3, 5),), name="last"), Sample((arr(3, 5),), {"dim": 0}, name="dim0"),
        Sample((arr(2, 3, 4),), {"dim": -2, "descending": True}, name="negdim_desc"),
        Sample((arr(),), name="0d"), Sample((arr(0, 3),), {"dim": 0}, name="empty"),
        Sample((arr(4, 3),), {"dim": 0}, noncontig=True, name="noncontig")]
ORDER_STAT = [Sample((arr(3, 5),), name="last"), Sample((arr(4, 3),), {"dim": 0, "keepdim": True}, name="dim0_keep"),
              Sample((arr(2, 3, 4),), {"dim": -2}, name="negdim"), Sample((arr(),), {"dim": 0}, name="0d"),
              Sample((arr(4, 3),), {"dim": 1}, noncontig=True, name="noncontig")]

OPS = [
    OpInfo("sort", lambda m, a, **kw: m.sort(a, **kw), lambda: SORT, errors=_dim_error()),
    OpInfo("sort_stable_ties", lambda m, a, **kw: a.sort(stable=True, **kw),
           lambda: [Sample((TIES,)), Sample((TIES,), {"descending": True}, name="desc"),
                    Sample((TIES,), {"dim": 0, "descending": True}, name="dim0_desc")], gradcheck=False),
    OpInfo("sort_fields", lambda m, a: (m.sort(a).values, m.sort(a).indices, m.sort(a, 0)[1]),
           lambda: [Sample((arr(3, 4),))]),
    OpInfo("sort_int", lambda m, a, **kw: m.sort(a, **kw),
           lambda: [Sample((INTS,), {"stable": True}), Sample((INTS,), {"descending": True, "stable": True}, name="desc")],
           grad=False),
    OpInfo("sort_nan", lambda m, a, **kw: m.sort(a, **kw),
           lambda: [Sample((WITH_NAN,)), Sample((WITH_NAN,), {"descending": True}, name="desc")], grad=False),
    OpInfo("argsort", lambda m, a, **kw: m.argsort(a, **kw),
           lambda: [Sample((arr(3, 5),)), Sample((TIES,), {"dim": 1, "descending": True, "stable": True}, name="ties"),
                    Sample((arr(),), name="0d")], grad=False, errors=_dim_error()),
    OpInfo("msort", lambda m, a: m.msort(a), lambda: [Sample((arr(4, 3),))]),
    OpInfo("topk", lambda m, a, k, **kw: m.topk(a, k, **kw),
           lambda: [Sample((arr(3, 5), 2), name="largest"), Sample((arr(3, 5), 3), {"largest": False}, name="smallest"),
                    Sample((arr(4, 3), 2), {"dim": 0}, name="dim0"), Sample((arr(3, 5), 0), name="k0"),
                    Sample((arr(2, 3, 4), 4), {"dim": -1}, name="all"), Sample((arr(), 1), name="0d"),
                    Sample((arr(4, 3), 2), {"dim": 0}, noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(3, 4), 7)), RuntimeError, "selected index k out of range"),
                           ErrorInput(Sample((arr(3, 4), 2), {"dim": 3}), IndexError, "Dimension out of range")]),
    OpInfo("topk_method", lambda m, a: a.topk(2, largest=False).values, lambda: [Sample((arr(3, 5),))]),
    OpInfo("kthvalue", lambda m, a, k, **kw: m.kthvalue(a, k, **kw),
           lambda: [Sample((s.args[0], 1 + i % 2), s.kwargs, s.noncontig, s.name)
                    for i, s in enumerate(ORDER_STAT) if s.name != "0d"] + [Sample((arr(), 1), name="0d")],
           errors=lambda: [ErrorInput(Sample((arr(3, 4), 7)), RuntimeError, "selected number k out of range")]),
    OpInfo("median", lambda m, a, **kw: m.median(a, **kw),
           lambda: ORDER_STAT + [Sample((arr(3, 4),), name="all_even"), Sample((arr(3, 5),), name="all_odd"),
                                 Sample((arr(0, 3),), name="all_empty")],
           errors=lambda: [ErrorInput(Sample((arr(0, 3),), {"dim": 0}), IndexError, "non-zero size")]),
    OpInfo("median_method", lambda m, a: a.median(1).values, lambda: [Sample((arr(3, 5),))]),
    OpInfo("mode", lambda m, a, **kw: m.mode(a, **kw),
           lambda: [Sample((MODE,)), Sample((MODE,), {"dim": 0, "keepdim": True}, name="dim0_keep"),
                    Sample((MODE.T.copy(),), {"dim": 0}, name="transposed"), Sample((arr(),), name="0d"),
                    Sample((arr(3, 4),), name="distinct"), Sample((INTS,), {"dim": 0}, name="int")],
           gradcheck=False),
    OpInfo("unique", lambda m, a, **kw: m.unique(a, **kw),
           lambda: [Sample((INTS,)), Sample((INTS,), {"return_inverse": True}, name="inverse"),
                    Sample((INTS,), {"return_counts": True, "return_inverse": True}, name="inverse_counts"),
                    Sample((INTS,), {"return_counts": True}, name="counts"),
                    Sample((INTS,), {"dim": 0, "return_inverse": True, "return_counts": True}, name="dim0"),
                    Sample((TIES,), {"sorted": True}, name="float")], grad=False, meta_error=NotImplementedError),
    OpInfo("searchsorted", lambda m, s, v, **kw: m.searchsorted(s, v, **kw),
           lambda: [Sample((np.array([1.0, 2.0, 3.0, 5.0]), np.array([[2.5, 2.0], [0.0, 9.0]])), name="1d_seq"),
                    Sample((np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0])), {"right": True}, name="right"),
                    Sample((np.array([[1.0, 2.0, 3.0], [0.0, 5.0, 6.0]]), np.array([[2.5, 2.0], [5.0, 7.0]])),
                           {"side": "right"}, name="nd"),
                    Sample((np.array([1.0, 2.0, 3.0]), np.array([2.0])), {"out_int32": True}, name="int32"),
                    Sample((np.array([3.0, 1.0, 2.0]), np.array([2.5])), {"sorter": np.array([1, 2, 0])}, name="sorter")],
           grad=False,
           errors=lambda: [ErrorInput(Sample((np.array([[1.0, 2.0, 3.0], [0.0, 5.0, 6.0]]), np.array([2.5, 2.0]))),
                                      RuntimeError, "boundaries tensor should be 1 dimension")]),
    OpInfo("searchsorted_scalar", lambda m, s: m.searchsorted(s, 2.0), lambda: [Sample((np.array([1.0, 2.0, 3.0]),))],
           grad=False),
]
