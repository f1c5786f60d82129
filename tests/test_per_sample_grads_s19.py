"""A DP-SGD step (per-sample gradients by ``vmap(grad(...))``, their norms, clipping by ``einsum``,
noise from a seeded generator) as researchers write it, against torch: its values, the gradients'
layout (a transposed one made every later op copy: norms and einsum 7-10x slower than torch), and
the float32 2-norm in ATen's lane order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _model(lib):
    nn = lib.nn
    lib.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def _dp_step(lib):
    from importlib import import_module
    func = import_module(f"{lib.__name__}.func")
    F = lib.nn.functional
    model = _model(lib)
    x = lib.randn(8, 1, 8, 8)
    y = lib.randint(0, 3, (8,))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_fn(p, xx, yy):
        return F.cross_entropy(func.functional_call(model, p, (xx.unsqueeze(0),)), yy.unsqueeze(0))
    grads = func.vmap(func.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    norms = lib.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
    factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    gen = lib.Generator().manual_seed(3)
    noisy = {k: (lib.einsum("i,i...->...", factor, g) + lib.normal(0, 0.5, size=g.shape[1:], generator=gen)) / 8
             for k, g in grads.items()}
    return grads, norms, noisy


def test_a_dp_sgd_step_equals_torch_and_its_per_sample_gradients_are_laid_out_as_torchs():
    tg, tn, tnoisy = _dp_step(torch)
    lg, ln, lnoisy = _dp_step(tapelab)
    for k in tg:
        assert lg[k].stride() == tg[k].stride(), k   # contiguous, as torch's (were transposed)
        np.testing.assert_allclose(lg[k].numpy(), tg[k].numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(lnoisy[k].numpy(), tnoisy[k].numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ln.numpy(), tn.numpy(), rtol=1e-5)


def test_a_transposed_weight_gets_torchs_gradient_layout_with_and_without_vmap():
    """One weight expanded over a batch and transposed (vmap's leaves) gets its gradient C-contiguous;
    a batch of distinct transposed weights keeps bmm's transposed layout, as torch's autograd.grad."""
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((4, 6, 5)).astype(np.float32), rng.standard_normal((4, 3, 5)).astype(np.float32)
    out = {}
    for lib in (torch, tapelab):
        W = lib.tensor(w, requires_grad=True)
        g, = lib.autograd.grad((lib.tensor(x) @ W.transpose(1, 2)).pow(2).sum(), W)
        out[lib] = g
    assert out[tapelab].stride() == out[torch].stride() == (30, 1, 6)
    np.testing.assert_allclose(out[tapelab].numpy(), out[torch].numpy(), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 3, 4, 7, 8, 9, 13, 16, 31, 100, 1000, 50176])
def test_float32_two_norms_of_rows_equal_torch_bit_for_bit(n):
    """kernels/vecnorm.py: eight lane sums (kept in one vector register), then the tail as ATen's."""
    a = (np.random.default_rng(n).standard_normal((5, n)) * 3).astype(np.float32)
    got = tapelab.tensor(a).norm(dim=1).numpy()
    want = torch.tensor(a).norm(dim=1).numpy()
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    assert tapelab.tensor(a).norm().item() == torch.tensor(a).norm().item()


def test_products_over_one_inner_element_equal_torch_bit_for_bit():
    """k = 1 (outer products: a per-sample weight gradient of one row) runs as a broadcast multiply,
    each output one rounded product as a GEMM makes it, C-contiguous."""
    rng = np.random.default_rng(2)
    g, x = rng.standard_normal((6, 1, 9)).astype(np.float32), rng.standard_normal((6, 1, 13)).astype(np.float32)
    for a, b in ((g.transpose(0, 2, 1), x), (g[0].T, x[0]), (g.transpose(0, 2, 1), x[:1])):
        want = torch.tensor(a) @ torch.tensor(b)
        got = tapelab.tensor(a) @ tapelab.tensor(b)
        assert got.stride() == want.stride()
        np.testing.assert_array_equal(got.numpy().view(np.int32), want.numpy().view(np.int32))
