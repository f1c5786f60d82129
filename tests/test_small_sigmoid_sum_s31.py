"""A small float32 vector's sigmoid calls ATen's loop's compiled code directly (``elementwise._sigmoid_fwd``'s
first branch), and ``sum()`` of everything takes the op's compiled path without ``apply``'s frame: the same
floats as PyTorch's, and the slow path (a watcher) still sees the sum."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")   # the exact loops exist only with numba (the [jit] extra)
torch = pytest.importorskip("torch")

from _threads import loops_at_one_thread  # noqa: E402
import tapelab as tl  # noqa: E402
from tapelab import kernels  # noqa: E402
from tapelab.ops import elementwise  # noqa: E402

PARALLEL_MIN = kernels.PARALLEL_MIN


_one_thread = loops_at_one_thread()


def _values(n: int, seed: int) -> np.ndarray:
    """Normal values and wide ones (past exp's overflow and underflow, where Sleef's and libm's differ)."""
    rng = np.random.default_rng(seed)
    x = np.where(rng.integers(0, 2, n) == 0, rng.standard_normal(n) * 4, rng.uniform(-110, 110, n))
    return x.astype(np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("n", [1, 7, 16, 17, 31, 33, 1000, PARALLEL_MIN, PARALLEL_MIN + 1])
def test_small_vector_sigmoid_is_torchs(n):
    x = _values(n, n)
    tl.tensor(x[:16]).sigmoid()   # the first small call makes the direct entry
    assert elementwise._SIGMOID_BLOCK   # the small vector's direct call is on
    t = tl.tensor(x, requires_grad=True)
    out = t.sigmoid()
    ref = torch.tensor(x, requires_grad=True)
    expected = torch.sigmoid(ref)
    _same_bits(out.detach().numpy(), expected.detach().numpy())
    assert out._data.flags.owndata   # the result owns its memory
    out.sum().backward()
    expected.sum().backward()
    _same_bits(t.grad.numpy(), ref.grad.numpy())


def test_vectors_the_direct_entry_refuses_are_torchs():
    """Read-only, unaligned, strided and 2-D arrays take the general loop: the same numbers."""
    x = _values(40, 3)
    tl.tensor(x[:16]).sigmoid()
    readonly = x.copy()
    readonly.setflags(write=False)
    raw = bytearray(x.nbytes + 1)
    unaligned = np.frombuffer(raw, np.float32, count=x.size, offset=1)
    unaligned[...] = x
    assert not unaligned.flags.aligned
    for arr in (readonly, unaligned, x[::2], x.reshape(5, 8)):
        got = elementwise._sigmoid_fwd(np, arr)
        want = torch.sigmoid(torch.tensor(np.ascontiguousarray(arr))).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_of_everything_is_torchs(keepdim):
    x = _values(16, 5)
    t = tl.tensor(x, requires_grad=True)
    ref = torch.tensor(x, requires_grad=True)
    out = t.sum(keepdim=keepdim)
    expected = ref.sum().reshape((1,) if keepdim else ())   # (torch's sum of everything takes no keepdim)
    _same_bits(out.detach().numpy(), expected.detach().numpy())
    assert out.grad_fn.name() == "SumBackward0"
    out.backward()
    expected.backward()
    _same_bits(t.grad.numpy(), ref.grad.numpy())


def test_a_watcher_sees_the_sum():
    """With an ``op`` subscriber the sum goes through ``apply``'s slow path and is told."""
    t = tl.tensor(_values(16, 6), requires_grad=True)
    seen = []
    with tl.events.subscribe("op", lambda rec: seen.append(rec.op)):
        out = t.sum()
    assert seen == ["sum"]
    assert out.grad_fn is not None


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_without_weights_is_torchs(reduction):
    """The fused loss's stand-in class weights are made once per class count and stay ones: at two class
    counts, with an ignored target, called twice each, the loss is PyTorch's bit for bit and the gradient
    is the one explicit ones as class weights give (bit for bit) and PyTorch's (to a few ulps: the
    backward's loop, not ATen's, as before the stand-ins)."""
    import tapelab.nn.functional as F
    rng = np.random.default_rng(7)
    for n_classes in (10, 7, 10):
        x = (rng.standard_normal((64, n_classes)) * 3).astype(np.float32)
        t = rng.integers(0, n_classes, 64)
        t[5] = -100
        xt, xr = tl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        loss = F.cross_entropy(xt, tl.tensor(t), reduction=reduction)
        ref = torch.nn.functional.cross_entropy(xr, torch.tensor(t), reduction=reduction)
        _same_bits(loss.detach().numpy(), ref.detach().numpy())
        loss.backward()
        ref.backward()
        xw = tl.tensor(x, requires_grad=True)
        F.cross_entropy(xw, tl.tensor(t), weight=tl.ones(n_classes), reduction=reduction).backward()
        _same_bits(xt.grad.numpy(), xw.grad.numpy())
        np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-5, atol=1e-8)
    from tapelab.nn import _fused
    for ones in _fused._NO_WEIGHTS.values():
        assert (ones == 1).all()
