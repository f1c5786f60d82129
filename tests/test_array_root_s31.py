"""``loss.backward()``'s implicit root gradient as a bare array for the array walk (session 31): the walk that
``backward()`` makes holds the ones as the array ``_ones`` makes, with no tensor around it, where the array walk
will run; every other walk (``backward_steps``, ``grad``, a watched one) holds a tensor, and a walk that meets a
watcher after it was made turns its arrays into tensors before the tensor loop reads them. Gradients are
PyTorch's, and no ``.grad`` aliases another's."""
import numpy as np
import pytest
import torch

import tapelab
from _chain16 import chain as _chain, pair as _pair, pairs
from tapelab.autograd import engine


@pytest.fixture
def xw():
    return pairs(31)


def _root(walk):
    (buf,) = walk.buffers.values()
    return buf[0]


def test_backward_walk_holds_an_array_root(xw):
    (x, _), (w, _) = xw
    loss = _chain(x, w)
    assert type(_root(engine._Walk(loss, None, True, False, None, None, False, True))) is np.ndarray
    # backward_steps' walk (the tensor loop reads it): a tensor
    assert type(_root(engine._Walk(loss, None, True, False, None, None, False))) is tapelab.Tensor
    # create_graph: no array walk, so a tensor
    assert type(_root(engine._Walk(loss, None, True, True, None, None, False, True))) is tapelab.Tensor


def test_chain_gradients_equal_the_tensor_walk_and_torch(xw):
    """The array walk from an array root gives the tensor walk's floats (``backward_steps``), bit for bit,
    and PyTorch's gradients."""
    (x, tx), (w, tw) = xw
    x2, w2 = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    for _ in range(3):   # .grad set, then accumulated in place
        _chain(x, w).backward()
        for _ in tapelab.autograd.backward_steps(_chain(x2, w2)):
            pass
        _chain(tx, tw).backward()
        np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())
        np.testing.assert_array_equal(w.grad.numpy(), w2.grad.numpy())
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=2e-6, atol=1e-7)


def test_watcher_after_the_walk_was_made(xw):
    """A ``backward_step`` subscriber that came between the walk's making and its run (another thread's):
    the tensor loop runs it, on tensors, with PyTorch's gradients."""
    (x, tx), (w, tw) = xw
    loss = _chain(x, w)
    walk = engine._Walk(loss, None, None, False, None, None, False, True)
    assert type(_root(walk)) is np.ndarray
    seen = []
    sub = tapelab.events.subscribe("backward_step", lambda step: seen.append(step.grad_outputs))
    try:
        engine._run_plain(walk)
    finally:
        sub.unsubscribe()
    _chain(tx, tw).backward()
    assert seen and all(isinstance(g, tapelab.Tensor) for grads in seen for g in grads if g is not None)
    assert isinstance(seen[0][0], tapelab.Tensor) and seen[0][0].item() == 1.0
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=2e-6, atol=1e-7)


def test_root_retained_by_a_hook(xw):
    """A root node with a hook (``retain_grad``) hands the walk to the tensor loop at once: the loss's
    ``.grad`` is a tensor of one, and the leaves' gradients are PyTorch's."""
    (x, tx), (w, tw) = xw
    loss, tloss = _chain(x, w), _chain(tx, tw)
    loss.retain_grad()
    tloss.retain_grad()
    loss.backward()
    tloss.backward()
    assert isinstance(loss.grad, tapelab.Tensor) and loss.grad.item() == tloss.grad.item() == 1.0
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-6, atol=1e-7)


def test_root_passed_on_to_a_leaf_is_not_shared():
    """add passes the root's array on to a leaf and to mul's node: the leaf's ``.grad`` is its own array, so
    accumulating into it later leaves the other gradient alone."""
    (a, ta), (b, tb) = _pair(2.0), _pair(3.0)
    for _ in range(2):
        (a * 2 + b).backward()
        (ta * 2 + tb).backward()
        assert a.grad.item() == ta.grad.item() and b.grad.item() == tb.grad.item()
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    assert (a.grad.item(), b.grad.item()) == (4.0, 2.0)


def test_backward_steps_yield_tensors(xw):
    (x, _), (w, _) = xw
    steps = list(tapelab.autograd.backward_steps(_chain(x, w)))
    assert isinstance(steps[0].grad_outputs[0], tapelab.Tensor)
    assert steps[0].grad_outputs[0].item() == 1.0


def test_float64_and_second_backward(xw):
    """A float64 loss's root (its own cached one), and a retained graph walked twice: the same gradients as
    PyTorch's."""
    rng = np.random.default_rng(7)
    v = rng.standard_normal(16)
    x, tx = tapelab.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    loss, tloss = (x * x).tanh().sum(), (tx * tx).tanh().sum()
    loss.backward(retain_graph=True)
    loss.backward()
    tloss.backward(retain_graph=True)
    tloss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-15)
