"""The scatter-add loops (engine/kernels/scatter.py) behind every index backward and index/scatter
add: the same sums as ``np.add.at`` bit for bit, values and gradients as PyTorch's, on the loops and
on the numpy path; a bad index raises before anything is written."""
import numpy as np
import pytest
import torch

import tapelab

pytest.importorskip("numba")   # the [jit] extra: without it the loops are off and the numpy path is the only one


def _rng(*seed):
    return np.random.default_rng(list(seed))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dim", [((50, 33), 0), ((4, 50, 3), 1), ((6, 50), 1), ((50,), 0)])
def test_index_backward_equals_add_at_and_torch(loops, dtype, shape, dim):
    """``x[..., idx]``'s gradient with repeated and negative indices."""
    rng = _rng(len(shape), dim)
    x = rng.standard_normal(shape).astype(dtype)
    idx = rng.integers(-shape[dim], shape[dim], 400)
    key = (slice(None),) * dim + (idx,)
    g = rng.standard_normal(x[key].shape).astype(dtype)
    want = np.zeros_like(x)
    np.add.at(want, key, g)
    tx = tapelab.tensor(x, requires_grad=True)
    tx[(slice(None),) * dim + (tapelab.tensor(idx),)].backward(tapelab.tensor(g))
    px = torch.tensor(x, requires_grad=True)
    px[(slice(None),) * dim + (torch.tensor(idx),)].backward(torch.tensor(g))
    assert np.array_equal(tx.grad.numpy(), want)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_and_index_select_match_torch(loops, dim):
    rng = _rng(7, dim)
    base = rng.standard_normal((30, 40)).astype(np.float32)
    idx = rng.integers(0, base.shape[dim], 300)
    src = rng.standard_normal((300, 40) if dim == 0 else (30, 300)).astype(np.float32)
    got = tapelab.tensor(base).index_add_(dim, tapelab.tensor(idx), tapelab.tensor(src), alpha=0.5).numpy()
    want = torch.tensor(base).index_add_(dim, torch.tensor(idx), torch.tensor(src), alpha=0.5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ref = base.copy()
    np.add.at(ref, (slice(None),) * dim + (idx,), src * np.float32(0.5))
    assert np.array_equal(got, ref)
    tx = tapelab.tensor(base, requires_grad=True)
    px = torch.tensor(base, requires_grad=True)
    tx.index_select(dim, tapelab.tensor(idx)).backward(tapelab.tensor(src))
    px.index_select(dim, torch.tensor(idx)).backward(torch.tensor(src))
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("expanded", [True, False], ids=["expanded_index", "index_per_element"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add_and_gather_backward_match_torch(loops, expanded, dim):
    """scatter_add_ with an index expanded along the rows (torch_scatter's message passing) and with
    an index per element, on a self larger than the index off ``dim`` too; gather's gradient."""
    rng = _rng(11, dim, expanded)
    n, f = 500, 24
    shape = (n, f) if dim == 0 else (f, n)
    if expanded and dim == 0:
        ti = tapelab.tensor(rng.integers(0, 40, n))[:, None].expand(n, f)
    else:
        ti = tapelab.tensor(rng.integers(0, 40, shape))
    src = rng.standard_normal(shape).astype(np.float32)
    out_shape = (40, f) if dim == 0 else (f, 40)
    got = tapelab.zeros(out_shape).scatter_add_(dim, ti, tapelab.tensor(src)).numpy()
    pi = torch.tensor(ti.numpy())
    want = torch.zeros(out_shape).scatter_add_(dim, pi, torch.tensor(src)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    wide = (45, f + 3) if dim == 0 else (f + 3, 45)   # self bigger than the index off dim: numpy's ufunc.at
    got = tapelab.zeros(wide).scatter_add_(dim, ti, tapelab.tensor(src)).numpy()
    want = torch.zeros(wide).scatter_add_(dim, pi, torch.tensor(src)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    x = rng.standard_normal(out_shape).astype(np.float32)
    tx, px = tapelab.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    tx.gather(dim, ti).backward(tapelab.tensor(src))
    px.gather(dim, pi).backward(torch.tensor(src))
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch(loops, reduce, include_self):
    """scatter_reduce (PyG's sum, mean and max aggregations) in the loops, the mean's counts and
    the identity written for include_self=False too; values as torch's, gradients where tapelab
    has them, and the same results as numpy's ufunc.at bit for bit."""
    rng = _rng(13, include_self)
    x = rng.standard_normal((30, 16)).astype(np.float32)
    idx = rng.integers(0, 30, 400)
    src = rng.standard_normal((400, 16)).astype(np.float32)
    res = []
    for m in (tapelab, torch):
        tx, ts = m.tensor(x, requires_grad=True), m.tensor(src, requires_grad=True)
        out = tx.scatter_reduce(0, m.tensor(idx)[:, None].expand(400, 16), ts, reduce, include_self=include_self)
        if reduce != "prod":
            out.backward(m.tensor(x))
        res.append([out.detach().numpy()] + ([tx.grad.numpy(), ts.grad.numpy()] if reduce != "prod" else []))
    for got, want in zip(*res):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if reduce in ("amax", "amin", "prod"):
        ref = x.copy()
        if not include_self:
            ref[idx] = {"amax": -np.inf, "amin": np.inf, "prod": 1.0}[reduce]
        {"amax": np.maximum, "amin": np.minimum, "prod": np.multiply}[reduce].at(ref, idx, src)
        assert np.array_equal(res[0][0], ref)


def test_scatter_multiply_and_nan_in_max_match_ufunc_at(loops):
    """scatter(reduce="multiply") and a nan reaching amax: numpy's multiply.at / maximum.at exactly."""
    rng = _rng(21)
    x = rng.standard_normal((10, 6)).astype(np.float32)
    idx = rng.integers(0, 10, (30, 6))
    src = rng.standard_normal((30, 6)).astype(np.float32)
    src[4, 2] = np.nan
    got = tapelab.tensor(x).scatter(0, tapelab.tensor(idx), tapelab.tensor(src), reduce="multiply").numpy()
    ref = x.copy()
    np.multiply.at(ref, (idx, np.arange(6)[None, :]), src)
    np.testing.assert_array_equal(got, ref)
    got = tapelab.tensor(x).scatter_reduce(0, tapelab.tensor(idx), tapelab.tensor(src), "amax").numpy()
    ref = x.copy()
    np.maximum.at(ref, (idx, np.arange(6)[None, :]), src)
    np.testing.assert_array_equal(got, ref)
    assert np.isnan(got[idx[4, 2], 2])


def test_index_put_accumulate_matches_torch(loops):
    """One index (the loop) and two (numpy's ufunc.at) accumulating into the same tensor."""
    rng = _rng(5)
    base = rng.standard_normal((20, 6, 8)).astype(np.float32)
    rows, cols = rng.integers(0, 20, 50), rng.integers(0, 6, 50)
    v1 = rng.standard_normal((50, 6, 8)).astype(np.float32)
    v2 = rng.standard_normal((50, 8)).astype(np.float32)
    res = []
    for m in (tapelab, torch):
        t = m.tensor(base).index_put_((m.tensor(rows),), m.tensor(v1), accumulate=True)
        res.append(t.index_put_((m.tensor(rows), m.tensor(cols)), m.tensor(v2), accumulate=True).numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-5, atol=1e-5)


def test_out_of_range_index_raises_and_writes_nothing(loops):
    base = tapelab.zeros(5, 3)
    with pytest.raises(RuntimeError, match="out of bounds"):
        base.index_add_(0, tapelab.tensor([0, 1, 5]), tapelab.ones(3, 3))
    with pytest.raises(RuntimeError, match="out of bounds"):
        base.scatter_add_(0, tapelab.tensor([[0, 1, 7]]), tapelab.ones(1, 3))
    assert not base.numpy().any()


@pytest.mark.parametrize("op", ["getitem", "scatter_add", "index_add"])
def test_gradcheck_float64_through_the_loops(loops, op):
    rng = _rng(3)
    idx = tapelab.tensor(rng.integers(0, 6, 15))
    x = tapelab.tensor(rng.standard_normal((6, 4)), requires_grad=True)
    src = tapelab.tensor(rng.standard_normal((15, 4)), requires_grad=True)
    if op == "getitem":
        fn, args = (lambda x: x[idx] * x[idx]), (x,)
    elif op == "scatter_add":
        fn, args = (lambda x, s: x.scatter_add(0, idx[:, None].expand(15, 4), s * s)), (x, src)
    else:
        fn, args = (lambda x, s: x.index_add(0, idx, s * s)), (x, src)
    assert tapelab.autograd.gradcheck(fn, args)
    assert tapelab.autograd.gradgradcheck(fn, args)
