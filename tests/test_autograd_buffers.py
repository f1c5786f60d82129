"""The backward walk sums the gradients that meet at a node in place when it alone holds the
running sum (issue 17: one dispatch fewer per extra use of a value); these check that no
gradient anyone else can see is ever written, against PyTorch's values."""
import numpy as np
import pytest
import torch

import tapelab as T
from tapelab.dispatch import Mode


def _pair(data, requires_grad=True):
    return T.tensor(data, requires_grad=requires_grad), torch.tensor(data, requires_grad=requires_grad)


def _chain(m, x, w):
    return ((x * w + 1).tanh() * x).sigmoid().sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_value_used_twice_gets_the_sum_of_both_gradients(dtype):
    data = np.random.default_rng(0).standard_normal((2, 16)).astype(dtype)
    x, tx = _pair(data[0])
    w, tw = _pair(data[1])
    for _ in range(2):    # the second step accumulates into the existing .grad
        _chain(T, x, w).backward()
        _chain(torch, tx, tw).backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_gradient_a_hook_kept_is_not_written_by_a_later_sum():
    data = np.arange(1.0, 5.0)
    x, tx = _pair(data)
    seen, tseen = [], []
    y, ty = x * 3, tx * 3
    # the node of z's first use hands its gradient on to y's buffer; its post-hook keeps it
    z1, tz1 = y * 2, ty * 2
    z1.grad_fn.register_hook(lambda gin, gout: seen.append(gin[0]))
    tz1.grad_fn.register_hook(lambda gin, gout: tseen.append(gin[0].clone()))
    loss, tloss = (z1 + y * 5).sum(), (tz1 + ty * 5).sum()
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(seen[0].numpy(), tseen[0].numpy())   # still 2, not 2 + 5
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_a_tensor_hook_sees_the_full_sum_and_what_it_keeps_stays():
    x, tx = _pair(np.linspace(-1.0, 1.0, 6))
    kept, tkept = [], []
    y, ty = x.exp(), tx.exp()
    y.register_hook(lambda g: kept.append(g))
    ty.register_hook(lambda g: tkept.append(g.clone()))
    (y * y + y.sin() + y).sum().backward(retain_graph=True)
    (ty * ty + ty.sin() + ty).sum().backward(retain_graph=True)
    np.testing.assert_allclose(kept[0].numpy(), tkept[0].numpy(), rtol=1e-12)
    before = kept[0].numpy().copy()
    (y * 2).sum().backward()      # a second walk through y: its hook's earlier gradient is untouched
    np.testing.assert_array_equal(kept[0].numpy(), before)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy() + 2 * tx.exp().detach().numpy(), rtol=1e-12)


def test_a_broadcast_gradient_is_summed_into_new_memory():
    # sum's gradient is a read-only broadcast of one value: the sum with it must not write there
    x, tx = _pair(np.arange(12.0).reshape(3, 4))
    loss = x.sum() + (x * x).sum() + x.mean()
    tloss = tx.sum() + (tx * tx).sum() + tx.mean()
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_create_graph_keeps_the_sum_differentiable():
    x, tx = _pair(np.array([0.3, -1.2, 2.0]))
    (g,) = T.autograd.grad((x * x * x + x.sin() * x).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((tx * tx * tx + tx.sin() * tx).sum(), tx, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12)
    g.sum().backward()
    tg.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


class _Names(Mode):
    def __init__(self):
        self.names = []

    def dispatch(self, op, args, params):
        self.names.append(op.name)
        return super().dispatch(op, args, params)


def test_a_watching_mode_sees_the_sum_as_an_add():
    x = T.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * x).sum()
    with _Names() as m:
        loss.backward()
    assert "add" in m.names   # x's two gradients meet at its leaf: summed by a dispatched add
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))


def test_leaves_given_the_same_gradient_tensor_get_separate_grads():
    # add's vjp hands the same tensor to both inputs: the first leaf may own it only if nothing
    # else holds it, or a second backward would accumulate into both leaves' shared .grad
    for build in (lambda m, x, y: x + y, lambda m, x, y: x + (y + 1)):
        x, tx = _pair(np.array([1.0, 2.0]))
        y, ty = _pair(np.array([3.0, 4.0]))
        build(T, x, y).sum().backward()
        build(torch, tx, ty).sum().backward()
        assert x.grad is not y.grad
        (x * 2).sum().backward()
        (tx * 2).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
        np.testing.assert_array_equal(y.grad.numpy(), ty.grad.numpy())
