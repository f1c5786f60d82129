"""Gaps found in session 22 (lead), each against PyTorch 2.13."""
import gc

import numpy as np
import pytest
import torch

import tapelab
from tapelab.base.dispatch_state import STATE
from tapelab.ops.elementwise import _tanh_bw_fwd


def _np(t):
    return t.detach().numpy()


def test_a_basic_key_write_is_copyslices_while_another_subclass_lives():
    """``x[0] = w * 3`` on plain tensors is a view's ``copy_`` (grad_fn CopySlices) as in PyTorch, also
    while some Tensor subclass elsewhere keeps the functions hook installed (a MONAI dataset's tensors);
    tapelab recorded IndexPutBackward0 then, so a test's node names depended on garbage collection."""
    class Tagged(tapelab.Tensor):   # a program's subclass (MONAI's MetaTensor pattern): while its class
        @staticmethod               # lives, the functions hook stays installed for every op
        def __new__(cls, x):
            return tapelab.as_tensor(x).as_subclass(cls)

    alive = Tagged(tapelab.arange(3.0))
    assert STATE.functions is not None
    seen = []
    for m in (torch, tapelab):
        w = m.ones(4, requires_grad=True)
        x = m.zeros(3, 4, requires_grad=True).clone()
        x[0] = w * 3
        names = [x.grad_fn.name()]
        x[:, 1] = 2.
        names.append(x.grad_fn.name())
        (x * m.arange(12.).reshape(3, 4)).sum().backward()
        seen.append((names, _np(w.grad), _np(x)))
    assert seen[0][0] == seen[1][0] == ["torch::autograd::CopySlices"] * 2
    np.testing.assert_array_equal(seen[0][1], seen[1][1])
    np.testing.assert_array_equal(seen[0][2], seen[1][2])
    assert type(alive) is Tagged
    del alive, Tagged
    gc.collect()   # the class's cycles: the hook goes with it, as later tests expect


def test_autograd_grad_walks_as_backward_does():
    """``autograd.grad`` takes the plain walk while nobody watches: its gradients, ``allow_unused``,
    ``create_graph`` and the hooks that run on the way equal PyTorch's."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    got = []
    for m in (torch, tapelab):
        x, w, u = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True), m.ones(2, requires_grad=True)
        ran = []
        h = (x * w).tanh()
        side = (w * 2).exp()
        side.register_hook(lambda g: ran.append("side"))
        y = (h * x).sigmoid().sum() + side.sum()
        gx, gu = m.autograd.grad(y, (x, u), allow_unused=True, retain_graph=True)
        (gw,) = m.autograd.grad(y, (w,), create_graph=True)
        (ggw,) = m.autograd.grad(gw.sum(), (w,))
        got.append((_np(gx), gu, _np(gw), _np(ggw), ran))
    for t, l in zip(got[0], got[1]):
        if isinstance(t, np.ndarray):
            np.testing.assert_allclose(l, t, rtol=1e-6, atol=1e-7)
        else:
            assert t == l


def test_nll_loss_of_class_rows_sums_as_atens_cascade():
    """``nll_loss``'s mean or summed (N, C) float32 loss is one loop (target entry, class weight, ATen's
    cascade sums): bit for bit PyTorch's with class weights (one of them 0), ignored targets, an
    ignore_index that is a class, every target ignored (nan), and N past the cascade's first levels;
    a target outside the classes raises PyTorch's IndexError."""
    rng = np.random.default_rng(3)
    for n, c in [(1, 3), (17, 10), (300, 7), (70000, 5)]:
        logp = np.log(rng.dirichlet(np.ones(c), n)).astype(np.float32)
        y = rng.integers(0, c, n)
        y[rng.random(n) < 0.1] = -100
        w = rng.random(c).astype(np.float32)
        w[0] = 0
        for target, kw in [(y, {}), (y, {"reduction": "sum"}), (y, {"weight": w}),
                           (y, {"weight": w, "reduction": "sum"}), (np.where(y < 0, 2, y), {"ignore_index": 2}),
                           (np.full(n, -100), {})]:
            got = []
            for m in (torch, tapelab):
                extra = {k: (m.tensor(v) if k == "weight" else v) for k, v in kw.items()}
                got.append(m.nn.functional.nll_loss(m.tensor(logp), m.tensor(target), **extra).numpy())
            np.testing.assert_array_equal(got[1], got[0])
    for m in (torch, tapelab):
        with pytest.raises(IndexError, match="Target 9 is out of bounds"):
            m.nn.functional.nll_loss(m.tensor(logp), m.tensor(np.full(n, 9)))


@pytest.mark.parametrize("n", [1, 7, 8, 9, 16, 31, 100, 50176])
def test_small_kernels_keep_pytorchs_floats(n):
    """The float32 tanh backward's loop from one element up (given the same forward output), and the
    2-norm's lanes in one vector register, give PyTorch's numbers bit for bit."""
    rng = np.random.default_rng(n)
    y = np.tanh(rng.standard_normal(n)).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    want = torch.ops.aten.tanh_backward(torch.tensor(g), torch.tensor(y)).numpy()
    np.testing.assert_array_equal(_tanh_bw_fwd(np, g, y), want)
    rows = (rng.standard_normal((3, n)) * 3).astype(np.float32)
    np.testing.assert_array_equal(tapelab.tensor(rows).norm(dim=1).numpy(), torch.tensor(rows).norm(dim=1).numpy())
