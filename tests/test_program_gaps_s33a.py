"""Gaps found in session 33 (helper h7) running tkipf/pygcn, rasbt/LLMs-from-scratch and karpathy/llm.c's
train_gpt2.py unchanged under ``install_aliases()`` against real torch; each pattern written here directly and
checked against PyTorch.

pygcn's layer is ``torch.spmm(adj, torch.mm(x, W))`` with a COO adjacency: PyTorch adds each entry's
``value * row`` with a fused multiply-add, scipy's product rounded the product first (an ulp off in a quarter
of the outputs)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tapelab as tl  # noqa: E402
from tapelab import kernels  # noqa: E402


def _adjacency(n: int, m: int, nnz: int, seed: int, duplicates: bool = False):
    """A random ``n x m`` COO matrix, its entries in no order (uncoalesced), in both libraries."""
    rng = np.random.default_rng(seed)
    flat = rng.choice(n * m, nnz, replace=duplicates)
    idx = np.stack(np.unravel_index(flat, (n, m))).astype(np.int64)
    val = rng.standard_normal(nnz).astype(np.float32)
    return (torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(val), (n, m)),
            tl.sparse_coo_tensor(tl.from_numpy(idx.copy()), tl.from_numpy(val.copy()), (n, m)))


def _same(t, x) -> None:
    np.testing.assert_array_equal(x.detach().numpy(), t.detach().numpy())


@pytest.fixture(autouse=True)
def _one_thread():
    if not kernels.enabled():
        pytest.skip("the fused loops are off")
    torch.set_num_threads(1)


@pytest.mark.parametrize("cols", [1, 3, 7, 16, 33, 64])
@pytest.mark.parametrize("way", ["spmm", "sparse.mm", "mm", "matmul"])
def test_coo_times_dense_is_pytorchs_bit_for_bit(cols, way):
    ta, la = _adjacency(300, 200, 3000, cols)
    d = np.random.default_rng(cols + 1).standard_normal((200, cols)).astype(np.float32)
    fn = {"spmm": lambda lib, a, b: lib.spmm(a, b), "sparse.mm": lambda lib, a, b: lib.sparse.mm(a, b),
          "mm": lambda lib, a, b: lib.mm(a, b), "matmul": lambda lib, a, b: a @ b}[way]
    _same(fn(torch, ta, torch.from_numpy(d)), fn(tl, la, tl.from_numpy(d.copy())))


def test_uncoalesced_duplicate_and_coalesced_entries_give_pytorchs_floats():
    """PyTorch sums an uncoalesced matrix's entries in their stored order (a duplicate index one entry at
    a time), a coalesced one's in index order: two different sets of floats, each matched."""
    ta, la = _adjacency(80, 90, 2000, 5, duplicates=True)
    d = np.random.default_rng(6).standard_normal((90, 16)).astype(np.float32)
    _same(torch.spmm(ta, torch.from_numpy(d)), tl.spmm(la, tl.from_numpy(d.copy())))
    ta, la = _adjacency(80, 90, 2000, 15)
    _same(torch.spmm(ta.coalesce(), torch.from_numpy(d)), tl.spmm(la.coalesce(), tl.from_numpy(d.copy())))


def test_gcn_propagation_values_and_gradients_equal_pytorchs():
    """Two propagations through a normalised adjacency (spmm, relu, spmm, log_softmax, nll_loss): the
    loss and the dense operand's gradient (the transposed product's) bit for bit."""
    ta, la = _adjacency(120, 120, 900, 7)
    rng = np.random.default_rng(8)
    support = rng.standard_normal((120, 16)).astype(np.float32)
    target = rng.integers(0, 16, 120)
    outs = []
    for lib, a in ((torch, ta), (tl, la)):
        s = lib.tensor(support, requires_grad=True)
        h = lib.relu(lib.spmm(a, s))
        loss = lib.nn.functional.nll_loss(lib.log_softmax(lib.spmm(a, h), 1), lib.tensor(target))
        loss.backward()
        outs.append((h, loss, s.grad))
    for t, x in zip(*outs):
        _same(t, x)


def test_sparse_product_gradients_against_pytorch_float64():
    ta, la = _adjacency(30, 20, 120, 9)
    ta, la = ta.double().coalesce(), la.double().coalesce()
    d = np.random.default_rng(10).standard_normal((20, 4))
    g = np.random.default_rng(11).standard_normal((30, 4))
    grads = []
    for lib, a in ((torch, ta), (tl, la)):
        a = a.clone().requires_grad_(True)
        b = lib.tensor(d, requires_grad=True)
        (lib.sparse.mm(a, b) * lib.tensor(g)).sum().backward()
        grads.append((a.grad.to_dense(), b.grad))
    for t, x in zip(*grads):
        np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
    b = tl.tensor(d, requires_grad=True)
    assert tl.autograd.gradcheck(lambda m: tl.spmm(la, m), (b,))


def test_transposed_sparse_view_times_dense_is_pytorchs():
    ta, la = _adjacency(50, 70, 600, 12)
    d = np.random.default_rng(13).standard_normal((50, 9)).astype(np.float32)
    _same(torch.mm(ta.t(), torch.from_numpy(d)), tl.mm(la.t(), tl.from_numpy(d.copy())))
    _same(torch.mm(ta.coalesce().t(), torch.from_numpy(d)), tl.mm(la.coalesce().t(), tl.from_numpy(d.copy())))
