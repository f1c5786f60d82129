"""OpInfos for indexing: ``x[key]``, ``x[key] = v``, gather/scatter, masked and index_* ops."""
from __future__ import annotations

import re

import numpy as np

from .core import ErrorInput, OpInfo, Sample, arr, rng


def ints(*values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def mask(*shape) -> np.ndarray:
    return rng().uniform(size=shape) > 0.5


def _one_hot(m, a, *n):
    return m.nn.functional.one_hot(a, *n)


def _setitem(key):
    """x.clone()[key] = v as a function of (x, v): gradients reach both through the write."""
    def fn(m, a, v, *idx):
        out = a.clone()
        out[key(*idx)] = v
        return out
    return fn


SR_INDEX = ints(0, 2, 0, 1, 0, 2, 2, 1, 0, 0, 0, 0).reshape(3, 4)
TIES = np.array([[1.0, 1.0, 2.0, 2.0]])

GETITEM = [  # (name, input shape, key builder, index arrays)
    ("int", (3, 4), lambda: 1, ()), ("negint", (3, 4), lambda: -1, ()), ("ints", (3, 4), lambda: (1, -2), ()),
    ("slice", (3, 4), lambda: slice(1, None), ()), ("slices", (3, 4), lambda: (slice(None, None, 2), slice(1, 3)), ()),
    ("none_ellipsis", (3, 4), lambda: (None, Ellipsis, 0), ()), ("empty_slice", (3, 4), lambda: slice(2, 1), ()),
    ("int_tensor", (3, 4), lambda i: i, (ints(2, 0, 2),)), ("int_2d_tensor", (3, 4), lambda i: i, (ints(0, 1, 1, 2).reshape(2, 2),)),
    ("list", (3, 4), lambda: [0, 2, 0], ()), ("mask", (3, 4), lambda i: i, (mask(3, 4),)),
    ("row_mask", (3, 4), lambda i: (slice(None), i), (mask(4),)),
    ("int_slice_adv", (2, 3, 4), lambda i: (0, slice(None), i), (ints(1, 0, 1),)),
    ("adv_pair", (3, 4), lambda i, j: (i, j), (ints(0, 2, 2), ints(3, 3, 1))),
    ("adv_split", (2, 3, 4), lambda i, j: (i, slice(None), j), (ints(0, 1), ints(1, 0))),
    ("adv_none", (2, 3, 4), lambda i, j: (i, None, j), (ints(0, 1), ints(1, 0))),
    ("bool_scalar", (3, 4), lambda: (True, 0), ()),
    ("empty_index", (3, 4), lambda i: i, (ints(),)),
]


def _getitem_samples():
    out = [Sample((arr(*shape), *idx), {"key": key}, name=name, meta_error=NotImplementedError if any(getattr(i, "dtype", None) == bool for i in idx) else None)
           for name, shape, key, idx in GETITEM]
    return out + [Sample((arr(4, 3),), {"key": lambda: (slice(1, None), 0)}, noncontig=True, name="noncontig"),
                  Sample((arr(),), {"key": lambda: (None, Ellipsis)}, name="0d"),
                  Sample((arr(0, 3),), {"key": lambda: (slice(None), 1)}, name="empty")]


OPS = [
    OpInfo("getitem", lambda m, a, *idx, key: a[key(*idx)], _getitem_samples, differentiable_args=(0,),
           errors=lambda: [
               ErrorInput(Sample((arr(3, 4),), {"key": lambda: 3}), IndexError, "out of bounds"),
               ErrorInput(Sample((arr(3, 4), ints(0, 5)), {"key": lambda i: i}), IndexError, "out of bounds"),
               ErrorInput(Sample((arr(3, 4),), {"key": lambda: slice(None, None, -1)}), ValueError, "step must be greater than zero"),
               ErrorInput(Sample((arr(3, 4),), {"key": lambda: (0, 0, 0)}), IndexError, "too many indices"),
               ErrorInput(Sample((arr(3, 4), mask(4)), {"key": lambda i: i}), IndexError,
                          re.escape("The shape of the mask [4] at index 0 does not match the shape of the indexed "
                                    "tensor [3, 4] at index 0")),
               ErrorInput(Sample((arr(3, 4), arr(2)), {"key": lambda i: i}), IndexError, "tensors used as indices")]),
    OpInfo("setitem_slice", _setitem(lambda: (slice(1, None), 0)), lambda: [
        Sample((arr(3, 4), arr(2))), Sample((arr(3, 4), arr()), name="0d_value"),
        Sample((arr(3, 4), arr(1, 2)), name="lead1"), Sample((arr(3, 4), arr(2)), noncontig=True, name="noncontig")]),
    OpInfo("setitem_adv", _setitem(lambda i: (i, slice(1, 3))), lambda: [
        Sample((arr(3, 4), arr(2, 2), ints(2, 0))), Sample((arr(3, 4), arr(2), ints(0, 1)), name="bcast")]),
    OpInfo("setitem_mask", _setitem(lambda i: i), lambda: [Sample((arr(3, 4), arr(), mask(3, 4)))]),
    OpInfo("setitem_number", lambda m, a: _setitem(lambda: (Ellipsis, 1))(m, a, 2.5), lambda: [Sample((arr(3, 4),))]),
    OpInfo("index_put", lambda m, a, v, i, **kw: a.index_put((i,), v, **kw), lambda: [
        Sample((arr(3, 4), arr(2, 4), ints(2, 0))),
        Sample((arr(3, 4), arr(3, 4), ints(1, 1, 0)), {"accumulate": True}, name="accumulate"),
        Sample((arr(3, 4), arr(4), ints(1, 1)), {"accumulate": True}, name="bcast_accumulate")]),
    OpInfo("index_select", lambda m, a, d, i: a.index_select(d, i), lambda: [
        Sample((arr(3, 4), 0, ints(2, 0, 2))), Sample((arr(3, 4), -1, ints(3)), name="negdim"),
        Sample((arr(3, 4), 1, np.array(1)), name="0d_index"), Sample((arr(4, 3), 1, ints(0, 0)), noncontig=True, name="noncontig"),
        Sample((arr(3, 4), 0, ints()), name="empty")],
        errors=lambda: [ErrorInput(Sample((arr(3, 4), 0, ints(3))), IndexError, "index out of range in self"),
                        ErrorInput(Sample((arr(3, 4), 0, arr(1))), RuntimeError, "int32/int64"),
                        ErrorInput(Sample((arr(3, 4), 2, ints(0))), IndexError, "Dimension out of range")]),
    OpInfo("gather", lambda m, a, d, i: m.gather(a, d, i), lambda: [
        Sample((arr(3, 4), 0, ints(0, 2, 1, 0, 1, 1).reshape(2, 3))), Sample((arr(3, 4), -1, ints(3, 0, 0, 1).reshape(2, 2)), name="negdim"),
        Sample((arr(4, 3), 1, ints(2, 1, 0).reshape(3, 1)), noncontig=True, name="noncontig"),
        Sample((arr(), 0, np.array(0)), name="0d")],
        errors=lambda: [ErrorInput(Sample((arr(3, 4), 0, arr(2, 2))), RuntimeError, "int32/int64"),
                        ErrorInput(Sample((arr(3, 4), 0, ints(5).reshape(1, 1))), RuntimeError, "out of bounds"),
                        ErrorInput(Sample((arr(3, 4), 0, ints(0))), RuntimeError, "same number of dimensions"),
                        ErrorInput(Sample((arr(3, 4), 2, ints(0).reshape(1, 1))), IndexError, "Dimension out of range")]),
    OpInfo("scatter", lambda m, a, d, i, s: a.scatter(d, i, s), lambda: [
        Sample((arr(3, 4), 0, ints(0, 2, 1, 1, 0, 2).reshape(2, 3), arr(2, 3))),
        Sample((arr(3, 4), -1, ints(3, 0).reshape(2, 1), arr(2, 1)), name="negdim")],
        errors=lambda: [ErrorInput(Sample((arr(3, 4), 0, arr(1, 1), arr(1, 1))), RuntimeError, "int32/int64")]),
    OpInfo("scatter_value", lambda m, a, d, i: a.scatter(d, i, 1.5), lambda: [
        Sample((arr(3, 4), 1, ints(0, 2, 1, 1, 0, 2).reshape(2, 3)))]),
    OpInfo("scatter_add", lambda m, a, d, i, s: m.scatter_add(a, d, i, s), lambda: [
        Sample((arr(3, 4), 0, ints(0, 0, 1, 0, 0, 2).reshape(2, 3), arr(2, 3))),
        Sample((arr(3, 4), 1, ints(3, 3, 3).reshape(3, 1), arr(3, 1)), name="dups")]),
    OpInfo("scatter_reduce", lambda m, a, d, i, s, r, **kw: a.scatter_reduce(d, i, s, r, **kw), lambda: [
        Sample((arr(3, 4), 0, SR_INDEX, arr(3, 4), reduce), {"include_self": inc}, name=f"{reduce}_{inc}")
        for reduce in ("sum", "mean", "amax", "amin") for inc in (True, False)],
        errors=lambda: [ErrorInput(Sample((arr(3, 4), 0, SR_INDEX, arr(3, 4), "foo")), RuntimeError, "reduce argument")]),
    # ties split the gradient evenly, as torch does; finite differences cannot see that (kinks)
    OpInfo("scatter_reduce_ties", lambda m, a, d, i, s: a.scatter_reduce(d, i, s, "amax"), gradcheck=False, samples=lambda: [
        Sample((TIES, 1, ints(0, 0, 1, 1).reshape(1, 4), TIES.copy()))]),
    OpInfo("scatter_reduce_prod", lambda m, a, d, i, s, **kw: a.scatter_reduce(d, i, s, "prod", **kw), samples=lambda: [
        Sample((arr(3, 4), 0, SR_INDEX, arr(3, 4)), {"include_self": inc}, name=f"prod_{inc}") for inc in (True, False)]),
    OpInfo("index_add", lambda m, a, d, i, s, **kw: a.index_add(d, i, s, **kw), lambda: [
        Sample((arr(3, 4), 0, ints(2, 0, 2), arr(3, 4))), Sample((arr(3, 4), 1, ints(1, 1), arr(3, 2)), {"alpha": 2.0}, name="alpha")],
        errors=lambda: [ErrorInput(Sample((arr(2, 3), 1, ints(0), arr(2, 2))), RuntimeError, "Number of indices")]),
    OpInfo("index_fill", lambda m, a, d, i, v: a.index_fill(d, i, v), lambda: [
        Sample((arr(3, 4), 0, ints(2, 0), 1.5)), Sample((arr(3, 4), 1, ints(1, 3), arr()), name="tensor_value")]),
    OpInfo("index_copy", lambda m, a, d, i, s: a.index_copy(d, i, s), lambda: [Sample((arr(3, 4), 1, ints(2, 0), arr(3, 2)))]),
    OpInfo("masked_fill", lambda m, a, k, v: a.masked_fill(k, v), lambda: [
        Sample((arr(3, 4), mask(3, 4), 1.5)), Sample((arr(3, 4), mask(4), arr()), name="bcast_tensor_value"),
        Sample((arr(4), mask(3, 4), 0.0), name="bcast_self"), Sample((arr(4, 3), mask(4, 3), -1.0), noncontig=True, name="noncontig"),
        Sample((arr(), np.array(True), 2.0), name="0d")],
        errors=lambda: [ErrorInput(Sample((arr(3), arr(3), 1.0)), RuntimeError, "boolean masks"),
                        ErrorInput(Sample((arr(3), mask(3), arr(1))), RuntimeError, "0-dimensional value tensor")]),
    OpInfo("masked_select", lambda m, a, k: a.masked_select(k), lambda: [
        Sample((arr(3, 4), mask(3, 4))), Sample((arr(3, 4), mask(4)), name="bcast"), Sample((arr(4), mask(2, 4)), name="bcast_self")],
        errors=lambda: [ErrorInput(Sample((arr(3), arr(3))), RuntimeError, "BoolTensor")], meta_error=NotImplementedError),
    OpInfo("take", lambda m, a, i: m.take(a, i), lambda: [
        Sample((arr(3, 4), ints(0, 11, 5, 5).reshape(2, 2))), Sample((arr(4, 3), ints(-1, 2)), noncontig=True, name="noncontig")],
        errors=lambda: [ErrorInput(Sample((arr(2, 3), ints(6))), IndexError,
                                   "out of range: tried to access index 6 on a tensor of 6 elements")]),
    OpInfo("take_along_dim", lambda m, a, i, *d: m.take_along_dim(a, i, *d), lambda: [
        Sample((arr(3, 4), ints(0, 3, 1).reshape(3, 1), 1)), Sample((arr(3, 4), ints(2, 0).reshape(1, 2), 1), name="bcast"),
        Sample((arr(3, 4), ints(11, 0)), name="flat")],
        errors=lambda: [ErrorInput(Sample((arr(3, 4), ints(0), 1)), RuntimeError, "same number of dimensions")]),
    OpInfo("nonzero", lambda m, a: m.nonzero(a), lambda: [
        Sample((ints(0, 1, 2, 0).reshape(2, 2),)), Sample((np.array(3),), name="0d"), Sample((ints(),), name="empty")], grad=False,
        meta_error=NotImplementedError),
    OpInfo("nonzero_tuple", lambda m, a: a.nonzero(as_tuple=True), lambda: [
        Sample((ints(0, 1, 2, 0).reshape(2, 2),)), Sample((np.array(3),), name="0d")], grad=False,
        meta_error=NotImplementedError),
    OpInfo("argwhere", lambda m, a: m.argwhere(a), lambda: [Sample((mask(3, 4),))], grad=False,
           meta_error=NotImplementedError),
    OpInfo("one_hot", _one_hot, lambda: [Sample((ints(0, 3, 1),), meta_error=RuntimeError), Sample((ints(0, 1).reshape(2, 1), 4), name="classes")],
           grad=False, errors=lambda: [ErrorInput(Sample((ints(0, 3), 3)), RuntimeError, "smaller than num_classes"),
                                       ErrorInput(Sample((ints(0, -1),)), RuntimeError, "non-negative")]),
]
