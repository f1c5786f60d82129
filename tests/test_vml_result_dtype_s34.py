"""A VML forward's result is an array numpy allocated (issue 17, session 34): numba's allocations carry a
dtype object of their own, and the op after a VML ``tanh`` then failed the dispatcher's identity test
(``y.dtype is x.dtype``) and left the compiled path. Values stay PyTorch's."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab.core import dispatch
from tapelab.kernels import vml

pytestmark = pytest.mark.skipif(not vml.available(), reason="MKL's VML not loaded")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64,), (32, 64), (2, 3, 40), (5, 13)])
@pytest.mark.parametrize("name", ["tanh", "exp", "sqrt"])
def test_vml_result_is_numpys_array_with_torchs_values(name, shape, dtype):
    a = np.abs(np.random.default_rng(0).standard_normal(shape)).astype(dtype) + 0.1
    out = getattr(tapelab, name)(tapelab.tensor(a))._data
    assert out.dtype is np.dtype(dtype)
    assert out.flags.owndata and out.flags.c_contiguous and out.base is None
    np.testing.assert_array_equal(out, getattr(torch, name)(torch.tensor(a)).numpy())


@pytest.mark.parametrize("writeable", [True, False])
def test_vml_read_only_and_unaligned_inputs(writeable):
    raw = np.zeros(4 * 100 + 1, np.uint8)
    a = np.frombuffer(raw.data, np.float32, 100, offset=1) if writeable else np.linspace(0.1, 2, 100, dtype=np.float32)
    a = a.copy() if not writeable else a
    if not writeable:
        a.flags.writeable = False
    else:
        a = np.ndarray((100,), np.float32, raw.data, offset=1)
        a[:] = np.linspace(0.1, 2, 100)
    out = vml.unary("tanh", lambda xp, x: xp.tanh(x))(np, a)
    assert out.dtype is np.dtype(np.float32)
    np.testing.assert_array_equal(out, torch.tanh(torch.tensor(np.array(a))).numpy())


def test_op_after_vml_tanh_stays_on_the_compiled_path(monkeypatch):
    x = tapelab.randn(32, 64, requires_grad=True)
    z = tapelab.randn(32, 64, requires_grad=True)
    h = x.tanh()
    z * z   # the op's compiled path is made at its first call (which runs eager)
    taken = []
    monkeypatch.setattr(dispatch, "eager", lambda *a, **k: taken.append(a[0].name))
    y = z * h
    assert taken == [] and y.grad_fn.name() == "MulBackward0"
    monkeypatch.undo()
    y.sum().backward()
    tx, tz = torch.tensor(x.detach().numpy(), requires_grad=True), torch.tensor(z.detach().numpy(), requires_grad=True)
    (tz * tx.tanh()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(z.grad.numpy(), tx.tanh().detach().numpy())
