"""Gaps Keras 3's own op tests (keras/src/ops/*_test.py on its torch backend) found: each test writes
the torch call pattern Keras's backend makes and compares tapelab with PyTorch directly."""
import itertools

import numpy as np
import pytest
import torch

import tapelab

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _both(fn):
    """fn(m) under torch and tapelab: (dtype name, values) or (exception type, None)."""
    out = []
    for m in (torch, tapelab):
        try:
            r = fn(m)
        except Exception as e:   # noqa: BLE001 - the exception type is compared
            out.append((type(e), None))
        else:
            out.append((str(r.dtype).split(".")[1], np.asarray(r.detach().double().tolist())))
    return out


# ---------------------------------------------------------------- einsum: size-1 labels
EINSUM_CASES = [("ijk,lkj->il", (1, 1, 1), (1, 1, 1)),     # Keras's dtype test: every label size 1
                ("ijk,lkj->il", (1, 2, 1), (1, 2, 1)),     # j and k size 1 on one side: summed first
                ("ijk,lkj->il", (1, 2, 2), (1, 2, 2)),     # a real contraction: one batched GEMM
                ("ij,j->i", (2, 3), (1,)),
                ("ij,j->j", (1, 2), (2,)),                 # a lone label of size 1: not summed
                ("ij,jk->ik", (3, 1), (1, 2)),
                ("ij,jk->ik", (2, 3), (3, 2))]


@pytest.mark.parametrize("eq,s1,s2", EINSUM_CASES)
@pytest.mark.parametrize("d1,d2", list(itertools.combinations(DTYPES, 2)) + [("int8", "int8"), ("bool", "bool")])
def test_einsum_dtype_with_size_one_labels(eq, s1, s2, d1, d2):
    """ATen sums a label the other operand holds at size 1 (an integer sum is int64) and multiplies
    when no label is left that both hold at a size above 1 (which promotes); only a real contraction
    is a batched GEMM that refuses mixed dtypes."""
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, s1).astype(np.float64), rng.integers(0, 3, s2).astype(np.float64)
    (tt, tv), (lt, lv) = _both(lambda m: m.einsum(eq, m.tensor(a).to(getattr(m, d1)), m.tensor(b).to(getattr(m, d2))))
    assert lt == tt
    if tv is not None:
        np.testing.assert_allclose(lv, tv, rtol=1e-2)


def test_einsum_size_one_contraction_gradient():
    a = np.arange(6.0).reshape(2, 3, 1)
    b = np.arange(2.0).reshape(2, 1, 1)
    grads = []
    for m in (torch, tapelab):
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        (m.einsum("ijk,lkj->il", x, y) * m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64)).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0])
    np.testing.assert_allclose(grads[1][1], grads[0][1])


# ---------------------------------------------------------------- swapaxes / swapdims / transpose
@pytest.mark.parametrize("name", ["swapaxes", "swapdims", "transpose"])
@pytest.mark.parametrize("names", [("axis0", "axis1"), ("dim0", "dim1")])
@pytest.mark.parametrize("form", ["function", "method", "inplace"])
def test_swap_keyword_names(name, names, form):
    """swapaxes takes numpy's keyword names (axis0, axis1), swapdims and transpose dim0/dim1."""
    kw = dict(zip(names, (0, -1)))
    res = []
    for m in (torch, tapelab):
        x = m.arange(6.0).reshape(2, 3)
        f = {"function": lambda: getattr(m, name)(x, **kw), "method": lambda: getattr(x, name)(**kw),
             "inplace": lambda: getattr(x, name + "_")(**kw)}[form]
        try:
            res.append(f().tolist())
        except TypeError:
            res.append(TypeError)
    assert res[1] == res[0]
    assert (res[0] is TypeError) == ((name == "swapaxes") != (names == ("axis0", "axis1")))


# ---------------------------------------------------------------- cumsum / cumprod with dtype=
@pytest.mark.parametrize("fn", ["cumsum", "cumprod"])
@pytest.mark.parametrize("src", ["bool", "int8", "uint8", "int16", "int32", "float32"])
@pytest.mark.parametrize("dtype", [None, "bool", "uint8", "int8", "int16", "int32", "float16", "float64"])
def test_scan_in_the_dtype_asked_for(fn, src, dtype):
    """A scan runs in dtype= (small integers wrap there; numpy's scan would widen them to int64) and
    refuses bool as PyTorch's CPU kernel does."""
    x = np.array([[100, 0, 2, 3], [1, 5, 7, 120]])
    res = _both(lambda m: getattr(m, fn)(m.tensor(x).to(getattr(m, src)), 1,
                                         dtype=None if dtype is None else getattr(m, dtype)))
    assert res[1][0] == res[0][0]
    if res[0][1] is not None:
        np.testing.assert_array_equal(res[1][1], res[0][1])


# ---------------------------------------------------------------- quantile with a 0-d tensor q
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("q", [0.5, "0-d", "1-d"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (-1, False), (0, True)])
def test_quantile_q_shape(fn, q, dim, keepdim):
    """A 0-d tensor q gives no quantile dim, as a number does (Keras's median is quantile(x, tensor(0.5)))."""
    x = np.array([[1.0, 2.0, np.nan], [3.0, 2.0, 1.0]]) if fn == "nanquantile" else np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])

    def call(m):
        qq = {"0-d": m.tensor(0.5, dtype=m.float64), "1-d": m.tensor([0.5, 0.25], dtype=m.float64)}.get(q, q)
        return getattr(m, fn)(m.tensor(x), qq, dim=dim, keepdim=keepdim)
    (tt, tv), (lt, lv) = _both(call)
    assert lt == tt
    assert lv.shape == tv.shape
    np.testing.assert_allclose(lv, tv)


# ---------------------------------------------------------------- int arguments of factories
@pytest.mark.parametrize("call", [
    lambda m: m.eye(3.0), lambda m: m.eye(3, 2.0), lambda m: m.eye(m.tensor(3.0)), lambda m: m.eye(True),
    lambda m: m.eye(np.float64(3)), lambda m: m.eye(m.tensor(3)), lambda m: m.eye(np.int64(3), 2),
    lambda m: m.eye(-1), lambda m: m.eye(2, -1), lambda m: m.linspace(0, 1, 3.0), lambda m: m.logspace(0, 1, 3.0),
    lambda m: m.linspace(0, 1, np.int32(3)), lambda m: m.randperm(3.0), lambda m: m.tril_indices(3.0, 3),
    lambda m: m.triu_indices(3, 3.0), lambda m: m.tril_indices(3, 3, 1.0), lambda m: m.triu_indices(3, 4, -1)])
def test_factory_int_arguments(call):
    """A float, bool or float tensor where PyTorch's parser wants an int is its TypeError (Keras's
    eye test passes 3.0), not a kernel error; integers of any kind are taken."""
    res = []
    for m in (torch, tapelab):
        try:
            r = call(m)
        except (TypeError, RuntimeError) as e:
            res.append(type(e))
        else:
            res.append((tuple(r.shape), str(r.dtype).split(".")[1]))
    assert res[1] == res[0]


# ---------------------------------------------------------------- unique keeps NaNs apart
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("sorted_", [True, False])
def test_unique_nans_are_distinct(dtype, sorted_):
    """The flat unique keeps each NaN (NaN != NaN), sorted last, with its own inverse index and count."""
    x = np.array([[1.0, np.nan, 2.0], [np.nan, 1.0, np.nan]])
    res = []
    for m in (torch, tapelab):
        v, inv, cnt = m.unique(m.tensor(x).to(getattr(m, dtype)), sorted=sorted_, return_inverse=True,
                               return_counts=True)
        res.append((v.double().numpy(), inv.numpy(), cnt.numpy(), str(v.dtype).split(".")[1]))
    np.testing.assert_array_equal(res[1][0], res[0][0])
    np.testing.assert_array_equal(res[1][1], res[0][1])
    np.testing.assert_array_equal(res[1][2], res[0][2])
    assert res[1][3] == res[0][3]
    assert len(res[0][0]) == 5


# ---------------------------------------------------------------- scatter_reduce's "min" / "max"
@pytest.mark.parametrize("reduce", ["min", "max", "amin", "amax", "foo"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("form", ["function", "method", "inplace"])
def test_scatter_reduce_min_max_names(reduce, include_self, form):
    """ATen takes "min"/"max" as "amin"/"amax" (Keras's unique(return_index=True) uses "min")."""
    def call(m):
        x, idx, src = m.full((3,), 2, dtype=m.int64), m.tensor([0, 1, 0, 2]), m.tensor([5, -1, 3, 4])
        f = {"function": lambda: m.scatter_reduce(x, 0, idx, src, reduce=reduce, include_self=include_self),
             "method": lambda: x.scatter_reduce(0, idx, src, reduce=reduce, include_self=include_self),
             "inplace": lambda: x.scatter_reduce_(0, idx, src, reduce=reduce, include_self=include_self)}[form]
        return f()
    (tt, tv), (lt, lv) = _both(call)
    assert lt == tt
    if tv is not None:
        np.testing.assert_array_equal(lv, tv)


@pytest.mark.parametrize("reduce", ["min", "max", "amin", "amax"])
def test_scatter_reduce_min_max_backward(reduce):
    """ATen's backward takes only amax/amin: "min"/"max" record but refuse to differentiate."""
    res = []
    for m in (torch, tapelab):
        x = m.tensor([1.0, 5.0, 2.0], requires_grad=True)
        y = m.zeros(3).scatter_reduce(0, m.tensor([0, 1, 0, 2]), x[[0, 1, 2, 2]], reduce=reduce, include_self=False)
        try:
            y.sum().backward()
        except RuntimeError:
            res.append((y.tolist(), RuntimeError))
        else:
            res.append((y.tolist(), x.grad.tolist()))
    assert res[1] == res[0]
    assert (res[0][1] is RuntimeError) == (reduce in ("min", "max"))
