"""A reflected operator with a Python number first (``2 * t``, ``1 + t``, ``2 ** t``) takes ``eager``'s hot path
(an arithmetic ufunc's number as a 0-d array of the tensor's dtype) instead of ``_general``; the operators'
compiled calls share one empty params dict, and ``t.sum()`` one params dict: values, dtypes, layouts and
gradients as PyTorch's, bit for bit where its kernels round as numpy's."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tapelab as tl  # noqa: E402

REFLECTED = {
    "radd": lambda c, t: c + t,
    "rmul": lambda c, t: c * t,
    "rpow": lambda c, t: c ** t,
    "rmod": lambda c, t: c % t,
    "rfloordiv": lambda c, t: c // t,
}


def _pair(shape, dtype, seed, layout="contiguous"):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 2.5).astype(dtype)   # positive: 2 ** t, c % t and c // t are smooth there
    if layout == "transposed":
        a = a.T
    return a


def _same(tl_t, torch_t) -> None:
    a, b = tl_t.detach().numpy(), torch_t.detach().numpy()
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.strides == b.strides
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["radd", "rmul"])
@pytest.mark.parametrize("number", [2, 0.1, -3.5, 0, 1e30])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,layout", [((16,), "contiguous"), ((), "contiguous"), ((3, 5), "transposed"),
                                          ((4, 1, 3), "contiguous")])
def test_number_first_is_torchs(name, number, dtype, shape, layout):
    a = _pair(shape, dtype, 7, layout)
    f = REFLECTED[name]
    x, tx = tl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    if layout == "transposed":
        x, tx = x.t(), tx.t()
        x.retain_grad()
        tx.retain_grad()
    y, ty = f(number, x), f(number, tx)
    _same(y, ty)
    assert y.requires_grad and y.grad_fn is not None
    g = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    y.backward(tl.tensor(g))
    ty.backward(torch.tensor(g))
    _same(x.grad, tx.grad)


@pytest.mark.parametrize("name", ["rpow", "rmod", "rfloordiv"])
@pytest.mark.parametrize("number", [2, 1.5])
def test_number_first_other_operators(name, number):
    a = _pair((6,), np.float64, 3)
    f = REFLECTED[name]
    x, tx = tl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = f(number, x), f(number, tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-15)
    assert y.dtype == tl.float64
    if name == "rpow":
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14)


def test_number_first_gradcheck():
    x = tl.tensor(np.random.default_rng(0).standard_normal(5) + 2, requires_grad=True)
    assert tl.autograd.gradcheck(lambda t: (2.5 * t + 1) * t + 0.5 ** t, (x,))


def test_number_first_without_grad_and_under_no_grad():
    x = tl.tensor(np.arange(4, dtype=np.float32), requires_grad=True)
    with tl.no_grad():
        y = 3 * x
    assert not y.requires_grad and y.grad_fn is None
    z = 3 * tl.tensor(np.arange(4, dtype=np.float32))
    assert not z.requires_grad
    np.testing.assert_array_equal(z.numpy(), (3 * torch.arange(4, dtype=torch.float32)).numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64", "int32", "complex64"])
def test_number_first_other_dtypes_as_torch(dtype):
    tx = torch.arange(1, 7).to(getattr(torch, dtype))
    x = tl.arange(1, 7).to(getattr(tl, dtype))
    for number in (2, 0.1):
        for f in (REFLECTED["radd"], REFLECTED["rmul"]):
            y, ty = f(number, x), f(number, tx)
            assert str(y.dtype) == str(ty.dtype).replace("torch.", "tapelab.")
            np.testing.assert_array_equal(y.to(tl.float64).numpy() if "complex" not in dtype else y.numpy(),
                                          ty.to(torch.float64).numpy() if "complex" not in dtype else ty.numpy())


def test_number_first_bool_and_refusals():
    x = tl.tensor([1.0, 2.0])
    np.testing.assert_array_equal((True * x).numpy(), [1.0, 2.0])
    with pytest.raises(TypeError):
        [1, 2] * x   # list.__mul__ refuses, then the tensor's reflected operator: NotImplemented
    with pytest.raises(TypeError):
        (1, 2) + x
    # a float tensor's bitwise operator: PyTorch's refusal, as before (number first, not an arithmetic ufunc)
    with pytest.raises(RuntimeError):
        torch.tensor([1.0]).__rand__(1)
    with pytest.raises(RuntimeError):
        x.__rand__(1)


def test_number_first_into_the_array_walk_and_versions():
    """``2 * x`` records the tensor's version (its node is ``_result``'s); an in-place write after it does not
    concern mul's gradient of ``x`` (the number's value is what it reads), as PyTorch."""
    x = tl.tensor(np.arange(1, 5, dtype=np.float32), requires_grad=True)
    w = tl.tensor(np.arange(2, 6, dtype=np.float32), requires_grad=True)
    loss = ((2 * x) * (0.5 * w) + (1 + x)).sum()
    loss.backward()
    tx = torch.arange(1, 5, dtype=torch.float32, requires_grad=True)
    tw = torch.arange(2, 6, dtype=torch.float32, requires_grad=True)
    ((2 * tx) * (0.5 * tw) + (1 + tx)).sum().backward()
    _same(x.grad, tx.grad)
    _same(w.grad, tw.grad)


def test_shared_empty_params_are_left_empty():
    """The compiled calls of operators and unary functions share one params dict: no op's forward or
    backward may write it (a write would reach every later call)."""
    from tapelab.core import dispatch
    x = tl.tensor(np.linspace(-2, 2, 16, dtype=np.float32), requires_grad=True)
    y = ((x * x + 1).tanh() * x).sigmoid() * x.exp() + (x.abs() + 1)
    assert y.grad_fn.params is dispatch._NO_PARAMS
    assert y.grad_fn.next_functions[0][0].params is dispatch._NO_PARAMS
    y.sum().backward()
    assert dispatch._NO_PARAMS == {}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(16,), (3, 4), ()])
def test_sum_of_everything_is_torchs(keepdim, dtype, shape):
    a = np.random.default_rng(5).standard_normal(shape).astype(dtype)
    x, tx = tl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    if keepdim:   # (PyTorch's sum takes keepdim only with dims)
        s, ts = x.sum(keepdim=True), tx.sum(dim=tuple(range(tx.ndim)), keepdim=True) if shape else tx.sum()
    else:
        s, ts = x.sum(), tx.sum()
    _same(s, ts)
    s.backward(tl.ones_like(s) * 3)
    ts.backward(torch.ones_like(ts) * 3)
    _same(x.grad, tx.grad)
    from tapelab.ops import reduce
    assert reduce._SUM_ALL == {"dims": None, "keepdim": False, "dtype": None}


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("n", [1, 2, 7, 16, 17, 100, 1000, 4097])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_of_a_vector_is_torchs(n, dtype, keepdim):
    """A vector's mean by the sum's short way and the float quotient rounded once: PyTorch's bits (its sum,
    then the division), values wide and small; the gradient too."""
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * np.where(rng.integers(0, 2, n) == 0, 1e-3, 1e3)).astype(dtype)
    x, tx = tl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    m = x.mean(keepdim=True) if keepdim else x.mean()
    tm = tx.mean(dim=0, keepdim=True) if keepdim else tx.mean()
    assert m.shape == tuple(tm.shape) and m.dtype == x.dtype
    assert np.array_equal(_bits(m.detach().numpy()), _bits(tm.detach().numpy()))
    m.sum().backward()
    tm.sum().backward()
    assert np.array_equal(_bits(x.grad.numpy()), _bits(tx.grad.numpy()))


def test_mean_off_the_short_way_as_before():
    """Strided, 2-D, float16, empty and dtype= means keep the general path: PyTorch's values."""
    a = np.random.default_rng(0).standard_normal(40).astype(np.float32)
    for x, tx in [(tl.tensor(a)[::2], torch.tensor(a)[::2]), (tl.tensor(a.reshape(5, 8)), torch.tensor(a.reshape(5, 8))),
                  (tl.tensor(a).half(), torch.tensor(a).half())]:
        np.testing.assert_array_equal(x.mean().numpy(), tx.mean().numpy())
    np.testing.assert_array_equal(tl.tensor(a).mean(dtype=tl.float64).numpy(), torch.tensor(a).mean(dtype=torch.float64).numpy())
    with np.errstate(invalid="ignore"):
        assert np.isnan(tl.tensor(np.zeros(0, np.float32)).mean().item())


@pytest.mark.parametrize("shape", [(16,), (4, 8), (64, 512), (3, 0), (1,), (2, 3, 5)])
def test_small_relu_is_torchs(shape):
    """relu's small call (the loop's compiled code itself) on 1-D and n-D float32: PyTorch's bits, NaN and
    infinities as its kernel gives them; the result a new C-contiguous array; the gradient."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(np.float32)
    flat = a.reshape(-1)
    if flat.size >= 4:
        flat[:4] = [np.nan, 0.0, np.inf, -np.inf]   # (-0.0: the loop gives +0.0, PyTorch -0.0, before this branch too)
    x, tx = tl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = x.relu(), tx.relu()
    out = y.detach().numpy()
    assert out.flags.c_contiguous and not np.shares_memory(out, a)
    assert np.array_equal(_bits(y.detach().numpy()), _bits(ty.detach().numpy()))
    g = rng.standard_normal(shape).astype(np.float32)
    y.backward(tl.tensor(g))
    ty.backward(torch.tensor(g))
    assert np.array_equal(_bits(x.grad.numpy()), _bits(tx.grad.numpy()))


def test_relu_of_read_only_strided_and_float64_arrays():
    a = np.random.default_rng(4).standard_normal(32).astype(np.float32)
    ro = a.copy()
    ro.flags.writeable = False
    for x, tx in [(tl.from_numpy(ro), torch.tensor(ro)), (tl.tensor(a)[::2], torch.tensor(a)[::2]),
                  (tl.tensor(a.astype(np.float64)), torch.tensor(a.astype(np.float64)))]:
        np.testing.assert_array_equal(x.relu().numpy(), tx.relu().numpy())
    np.testing.assert_array_equal(tl.tensor(a).relu().numpy(), torch.tensor(a).relu().numpy())   # after them


@pytest.mark.parametrize("number", [1, 0.3, -2.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_number_first_sub_and_div_are_torchs(number, dtype):
    """``1 - t`` (rsub: the number first, into the same hot path) and ``1 / t``: PyTorch's bits and gradients."""
    a = _pair((3, 5), dtype, 11)   # (transposed, 1 / t: a gradient of other strides than torch's, at the base too)
    for f in (lambda c, t: c - t, lambda c, t: c / t):
        x, tx = tl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, ty = f(number, x), f(number, tx)
        _same(y, ty)
        y.sum().backward()
        ty.sum().backward()
        _same(x.grad, tx.grad)
