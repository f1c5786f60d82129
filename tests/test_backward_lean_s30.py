"""The array walk's leaner node step (session 30): a leaf's node taken first, the shared all-zero versions
(``dispatch._V01``, ``_OUT``) tested by their counters alone, the pass-on test only for a tensor gradient, and
``_run_plain``'s tensor loop set up only when the array walk leaves nodes. Each must keep what the walk did:
PyTorch's errors for a saved value written in place, PyTorch's gradients, no gradient aliased between leaves,
and the hand-over to the tensor loop."""
import numpy as np
import pytest

import tapelab
from _chain16 import chain as _chain, pair as _pair, pairs


@pytest.fixture
def xw():
    return pairs(30)


def test_chain_gradients_equal_torch(xw):
    (x, tx), (w, tw) = xw
    for _ in range(3):   # a repeated step: .grad set, then accumulated in place
        _chain(x, w).backward()
        _chain(tx, tw).backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("which", ["x", "w"])
def test_mul_input_written_in_place_raises(xw, which):
    """mul saved both inputs at version 0 (``_V01``): writing either before the backward is PyTorch's error."""
    (x, tx), (w, tw) = xw
    a, b = x * 1, w * 1   # non-leaves, so they can be written in place
    ta, tb = tx * 1, tw * 1
    loss, tloss = (a * b).sum(), (ta * tb).sum()
    (a if which == "x" else b).add_(1)
    (ta if which == "x" else tb).add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as mine:
        loss.backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tloss.backward()
    assert "is at version 1; expected version 0" in str(mine.value)


def test_output_written_in_place_raises(xw):
    """tanh saved its output at version 0 (``_OUT``)."""
    (x, tx), _ = xw
    y, ty = x.tanh(), tx.tanh()
    loss, tloss = (y * 1).sum(), (ty * 1).sum()
    y.mul_(2)
    ty.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as mine:
        loss.backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tloss.backward()
    assert "the output" in str(mine.value)


def test_nonzero_versions_at_record_time(xw):
    """An input written before the op read it saves version 1 (the general versions loop): the backward runs,
    and a second write after the op is the error."""
    (x, tx), (w, tw) = xw
    a, ta = x * 1, tx * 1
    a.add_(1)
    ta.add_(1)
    loss, tloss = (a * w).sum(), (ta * tw).sum()
    loss.backward(retain_graph=True)
    tloss.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
    a.add_(1)
    ta.add_(1)
    with pytest.raises(RuntimeError, match="is at version 2; expected version 1"):
        loss.backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tloss.backward()


def test_root_gradient_passed_to_two_leaves_not_aliased():
    """add passes the root's gradient (a tensor, not an array the walk made) on to both leaves: each .grad
    its own, as PyTorch's."""
    a, ta = _pair(2.0)
    b, tb = _pair(3.0)
    (a + b).backward()
    (ta + tb).backward()
    assert a.grad.item() == ta.grad.item() == 1.0 and b.grad.item() == tb.grad.item() == 1.0
    a.grad.add_(5)
    assert b.grad.item() == 1.0


def test_handed_over_to_the_tensor_loop(xw):
    """A node with a hook stops the array walk; the tensor loop (set up only then) runs the rest."""
    (x, tx), (w, tw) = xw
    seen = []
    for xx, ww, out in ((x, w, seen), (tx, tw, None)):
        h = (xx * ww + 1).tanh()
        if out is not None:
            h.register_hook(lambda g: out.append(g.numpy().copy()))
        (h * xx).sigmoid().sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=2e-6, atol=1e-7)


def test_multi_output_node_hands_over():
    """A split's node is not an op node the array walk runs: the tensor loop takes it, gradients as torch's."""
    x, tx = _pair(np.arange(8, dtype=np.float32) / 7)
    for xx in (x, tx):
        a, b = xx.split(4)
        (a * b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_grad_mode_restored_after_each_walk(xw):
    """The walk turns grad mode off while it runs and restores the caller's, whether the array walk ran it all
    or the tensor loop ran the rest."""
    (x, _), (w, _) = xw
    h = (x * w).tanh()
    h.register_hook(lambda g: g * 1)
    hooked = h.sum()
    for grad_on in (True, False):
        loss = _chain(x, w)
        with tapelab.set_grad_enabled(grad_on):
            loss.backward()                    # the array walk alone
            assert tapelab.is_grad_enabled() is grad_on
            hooked.backward(retain_graph=True)   # handed over at the hooked node
            assert tapelab.is_grad_enabled() is grad_on
