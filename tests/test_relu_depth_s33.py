"""relu is ATen's ``x < 0 ? 0 : x`` on every array: a sparse compressed array answers ``less`` and ``where``
on its stored entries (zero-preserving), and the compiler keeps a lone relu for its linear's epilogue by the op,
so -0.0 and NaN pass as in torch everywhere."""
import numpy as np
import pytest
import torch

import tapelab

VALUES = [-0.0, -1.5, float("nan"), 2.0, -float("inf"), 1e-40]


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def _compressed(m, layout: str, dtype: str):
    values = m.tensor(VALUES, dtype=getattr(m, dtype))
    if layout == "csr":
        return m.sparse_csr_tensor([0, 2, 4, 6], [0, 2, 1, 3, 0, 2], values, (3, 4))
    if layout == "csc":
        return m.sparse_csc_tensor([0, 2, 3, 5, 6], [0, 2, 1, 0, 2, 1], values, (3, 4))
    return m.sparse_bsr_tensor([0, 1, 2], [0, 1], values[:4].reshape(1, 2, 2).repeat(2, 1, 1) * 1, (4, 4))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("layout", ["csr", "csc", "bsr"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("inplace", [False, True])
def test_compressed_relu_keeps_negative_zero_and_nan_as_torch(layout, dtype, inplace):
    got, want = (_compressed(m, layout, dtype) for m in (tapelab, torch))
    got, want = (t.relu_() if inplace else t.relu() for t in (got, want))
    assert str(got.layout).split(".")[-1] == str(want.layout).split(".")[-1]
    _same_bits(got.values().numpy(), want.values().numpy())
    _same_bits(got.to_dense().numpy(), want.to_dense().numpy())


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_compressed_comparison_and_where_stay_refused_as_torch():
    """Only relu's forms act on the entries: ``x < 0`` on the tensor is torch's layout error, and a ``where``
    whose implicit entries would not be zero is refused at the array."""
    for m in (tapelab, torch):
        with pytest.raises(RuntimeError, match="unsupported tensor layout: SparseCsr"):
            _compressed(m, "csr", "float32") < 0
    a = _compressed(tapelab, "csr", "float32")._data
    mask = np.less(a, 0)
    _same_bits(mask.values, np.less(np.array(VALUES, np.float32), 0))
    with pytest.raises(NotImplementedError):
        np.where(mask, a, 1.0)            # the implicit entries would be 1
    other = _compressed(tapelab, "csc", "float32")._data
    with pytest.raises(NotImplementedError):
        np.where(mask, np.float32(0), other)    # another pattern


@pytest.mark.parametrize("n", [9, 4096])
def test_compiled_lone_relu_keeps_negative_zero(n):
    """A relu alone in its compiled graph (a kernel of its own or its eager loop, as timing decides) gives
    torch's bits."""
    x = np.resize(np.array(VALUES, np.float32), n)
    fn = tapelab.compile(lambda t: t.relu())
    for _ in range(3):
        _same_bits(fn(tapelab.from_numpy(x)).numpy(), torch.relu(torch.from_numpy(x)).numpy())


def test_compiled_linear_relu_keeps_the_linears_zeros():
    """The relu read from a linear only it reads (the one-node step's ``linear_relu``, tests/test_compile_s28.py)
    keeps the sign of the linear's zeros as eager does, bit for bit; the values are torch's."""
    w = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]], np.float32)
    x = np.array([[-0.0, -0.0], [3.0, -0.0], [-2.0, 2.0], [float("nan"), 1.0]], np.float32)
    lin = tapelab.nn.Linear(2, 3, bias=False)
    with tapelab.no_grad():
        lin.weight.copy_(tapelab.from_numpy(w))
    eager = tapelab.relu(lin(tapelab.from_numpy(x))).detach().numpy()
    np.testing.assert_array_equal(eager, torch.relu(torch.from_numpy(x) @ torch.from_numpy(w).T).numpy())
    fn = tapelab.compile(lambda t: tapelab.relu(lin(t)))
    for _ in range(3):
        _same_bits(fn(tapelab.from_numpy(x)).detach().numpy(), eager)


_FIRST_CALLS = r'''
import numpy as np, torch, tapelab
from tapelab import kernels
from tapelab.ops import elementwise
from tapelab.nn import _fused
def same(got, want):   # torch's bits; a NaN's payload aside (sigmoid's vector body differs there, as before)
    got, want = got.detach().numpy(), want.detach().numpy()
    both_nan = np.isnan(got) & np.isnan(want)
    return np.array_equal(np.where(both_nan, 0, got.view(np.uint32)), np.where(both_nan, 0, want.view(np.uint32)))
x = np.random.default_rng(1).uniform(-90, 90, 64).astype(np.float32)
x[:3] = [-0.0, float("nan"), 1e-40]
for n in (16, 64, 13):        # the first call of each is small: it makes the loop's compiled code
    a = x[:n].copy()
    t = tapelab.tensor(a, requires_grad=True)
    ref = torch.tensor(a, requires_grad=True)
    g = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    for name in ("relu", "log1p", "expm1", "sigmoid"):
        got, want = getattr(t, name)(), getattr(ref, name)()
        assert same(got, want), name
        got.sum().backward()
        want.sum().backward()
    u = tapelab.tensor(a, requires_grad=True)
    y = u.tanh()      # its backward from a contiguous gradient: tanh_backward's small loop
    y.backward(tapelab.tensor(g))
    want = torch.ops.aten.tanh_backward(torch.from_numpy(g), torch.from_numpy(y.detach().numpy()))
    assert same(u.grad, want), "tanh_backward"
    got, want = tapelab.nn.functional.silu(t), torch.nn.functional.silu(ref)
    assert same(got, want), "silu"
    np.testing.assert_allclose(t.grad.numpy(), ref.grad.numpy(), rtol=1e-5, atol=1e-6)
assert kernels.small_entry("relu") is elementwise._RELU_SMALL
assert kernels.small_entry("sigmoid") is elementwise._SIGMOID_SMALL and kernels.small_entry("silu") is _fused._SILU_SMALL
assert all(callable(kernels.small_entry(k).run) for k in ("relu", "log1p", "expm1", "sigmoid", "silu", "tanh_backward"))
print("ok")
'''


def test_small_entries_first_calls_are_torchs_in_a_fresh_process():
    """Each small float32 call's loop is one ``kernels.small_entry`` per loop, made at the process's first such
    call (which it computes): relu, log1p, expm1, sigmoid, silu and tanh's backward give torch's bits from it."""
    import os
    import subprocess
    import sys
    if not tapelab.kernels.enabled():
        pytest.skip("the loops are off")
    done = subprocess.run([sys.executable, "-c", _FIRST_CALLS], capture_output=True, text=True, env=dict(os.environ),
                          timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
