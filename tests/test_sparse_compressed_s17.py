"""Sparse compressed layouts (CSR, CSC, BSR, BSC) against PyTorch: construction, index dtypes, reprs,
conversions, products and their gradients (to the dense operand and to the CSR values), the errors,
and a small GCN trained with a CSR adjacency."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab

warnings.filterwarnings("ignore", message="Sparse (CSR tensor support|invariant checks)")

DENSE = [[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]]


def _np(t):
    if t.layout is not (torch.strided if isinstance(t, torch.Tensor) else tapelab.strided):
        t = t.to_dense()
    return t.detach().numpy()


def _same(a, b, tol=1e-6):
    assert str(a.layout).split(".")[-1] == str(b.layout).split(".")[-1]
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _both(fn):
    return fn(torch), fn(tapelab)


def _assert_same_repr(t, s) -> None:
    """The reprs agree (tapelab's says ``tapelab.`` where PyTorch's says ``torch.``, so both are printed
    unwrapped: the extra characters would move a suffix to the next line)."""
    torch.set_printoptions(linewidth=1000)
    tapelab.set_printoptions(linewidth=1000)
    try:
        assert repr(s).replace("tapelab.", "torch.") == repr(t)
    finally:
        torch.set_printoptions(profile="default")
        tapelab.set_printoptions(profile="default")


@pytest.mark.parametrize("build", [
    lambda m: m.tensor(DENSE).to_sparse_csr(),
    lambda m: m.tensor(DENSE).to_sparse_csc(),
    lambda m: m.tensor(DENSE).to_sparse_csr().t(),
    lambda m: m.tensor(DENSE).to_sparse_csr().to_sparse_csc(),
    lambda m: m.tensor(DENSE, dtype=m.float64).to_sparse(layout=m.sparse_csr),
    lambda m: m.sparse_csr_tensor([0, 1, 3], [1, 0, 2], [2, 3, 4], (2, 3)),
    lambda m: m.sparse_csr_tensor(m.tensor([0, 1, 3], dtype=m.int32), m.tensor([1, 0, 2], dtype=m.int32),
                                  [2.0, 3.0, 4.0], (2, 3)),
    lambda m: m.sparse_csr_tensor([0, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0], (2, 3), dtype=m.int32),
    lambda m: m.sparse_csr_tensor([0, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0]),
    lambda m: m.sparse_csc_tensor([0, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0]),
    lambda m: m.sparse_compressed_tensor([0, 0, 0], m.zeros(0, dtype=m.int64), [], (2, 3), layout=m.sparse_csr),
    lambda m: m.zeros(2, 3).to_sparse_csr(),
    lambda m: m.arange(1.0, 9.0).reshape(2, 2, 2).to_sparse_csr(),
    lambda m: m.arange(16.0).reshape(4, 4).to_sparse_bsr((2, 2)),
    lambda m: m.tensor(DENSE).to_sparse_bsc((2, 1)),
    lambda m: m.sparse_bsr_tensor([0, 1], [1], m.ones(1, 2, 2)),
    lambda m: m.arange(12.0).reshape(3, 4).to_sparse_csr().requires_grad_(),
    lambda m: m.arange(12.0, requires_grad=True).reshape(3, 4).to_sparse_csr(),
])
def test_construction_repr_and_accessors_match_torch(build):
    t, s = _both(build)
    _assert_same_repr(t, s)
    _same(t, s)
    assert s._nnz() == t._nnz() and s.is_sparse_csr == t.is_sparse_csr and s.is_sparse == t.is_sparse
    names = ("crow_indices", "col_indices") if t.layout in (torch.sparse_csr, torch.sparse_bsr) \
        else ("ccol_indices", "row_indices")
    for name in names:
        a, b = getattr(t, name)(), getattr(s, name)()
        assert str(b.dtype).split(".")[-1] == str(a.dtype).split(".")[-1]
        np.testing.assert_array_equal(b.numpy(), a.numpy())
    np.testing.assert_array_equal(s.values().detach().numpy(), t.values().detach().numpy())


@pytest.mark.parametrize("op", [
    lambda m, c: c.to_sparse_coo(),
    lambda m, c: c.to_sparse(),
    lambda m, c: c.to_sparse(layout=m.sparse_csc),
    lambda m, c: c.to_sparse_csc().to_sparse_csr(),
    lambda m, c: c.to_sparse_coo().to_sparse_csr(),
    lambda m, c: c * 2,
    lambda m, c: 2.5 * c,
    lambda m, c: c.mul(m.tensor(3.0)),
    lambda m, c: c * c,
    lambda m, c: c * m.tensor(DENSE).t().t(),
    lambda m, c: -c,
    lambda m, c: c.abs(),
    lambda m, c: c.sin(),
    lambda m, c: m.relu(c),
    lambda m, c: c + c,
    lambda m, c: c + m.ones(2, 3),
    lambda m, c: c.sum(),
    lambda m, c: c.t().sum(),
    lambda m, c: c.double(),
    lambda m, c: c.to(m.int32),
    lambda m, c: c.t(),
    lambda m, c: c.transpose(0, 1).transpose(0, 1),
    lambda m, c: c @ m.arange(6.0).reshape(3, 2),
    lambda m, c: c.mm(m.arange(6.0).reshape(3, 2)),
    lambda m, c: m.matmul(c, m.arange(3.0)),
    lambda m, c: m.mv(c, m.arange(3.0)),
    lambda m, c: c.t() @ m.ones(2, 4),
    lambda m, c: m.ones(4, 2) @ c,
    lambda m, c: m.addmm(m.ones(2, 2), c, m.ones(3, 2), beta=0.5, alpha=2),
    lambda m, c: m.sparse.addmm(m.ones(2, 2), c, m.ones(3, 2)),
    lambda m, c: m.sparse.mm(c, m.ones(3, 2)),
    lambda m, c: c @ c.t(),
    lambda m, c: c.to_sparse_bsr((1, 3)),
])
def test_ops_on_a_csr_match_torch(op):
    t, s = _both(lambda m: op(m, m.tensor(DENSE).to_sparse_csr()))
    _same(t, s)
    if t.layout is not torch.strided:
        _assert_same_repr(t, s)


def test_in_place_scalar_mul():
    t, s = _both(lambda m: m.tensor(DENSE).to_sparse_csr().mul_(2))
    _assert_same_repr(t, s)


@pytest.mark.parametrize("name", ["mm", "matmul", "addmm", "sparse_mm", "mv", "csc", "to_dense", "mul", "values"])
def test_gradients_to_the_values_and_the_dense_operand(name):
    def run(m):
        m.manual_seed(0)
        x = m.randn(3, 2, requires_grad=True)
        v = m.tensor([2.0, 3.0, 4.0], requires_grad=True)
        if name == "csc":
            a = m.sparse_csc_tensor([0, 1, 3], [1, 0, 2], v, (3, 2))
            out = a @ x[:2]
        else:
            a = m.sparse_csr_tensor([0, 1, 3], [1, 0, 2], v, (2, 3))
            out = {"mm": lambda: m.mm(a, x), "matmul": lambda: a @ x,
                   "addmm": lambda: m.addmm(m.ones(2, 2), a, x, alpha=0.5),
                   "sparse_mm": lambda: m.sparse.mm(a, x), "mv": lambda: m.mv(a, x[:, 0]),
                   "to_dense": lambda: a.to_dense(), "mul": lambda: (a * 3).to_dense(),
                   "values": lambda: a.values()}[name]()
        out.pow(2).sum().backward()
        return v.grad, x.grad
    (tv, tx), (sv, sx) = _both(run)
    np.testing.assert_allclose(sv.numpy(), tv.numpy(), rtol=1e-5)
    assert (sx is None) == (tx is None)
    if tx is not None:
        np.testing.assert_allclose(sx.numpy(), tx.numpy(), rtol=1e-5)


@pytest.mark.parametrize("how", ["matmul", "sparse_mm", "to_dense", "from_dense"])
def test_gradient_layouts_of_a_csr_leaf_and_of_its_dense_source(how):
    def run(m):
        m.manual_seed(0)
        x = m.randn(3, 2)
        if how == "from_dense":
            d = m.tensor(DENSE, requires_grad=True)
            (d.to_sparse_csr() @ x).sum().backward()
            return d.grad
        a = m.tensor(DENSE).to_sparse_csr().requires_grad_()
        out = {"matmul": lambda: a @ x, "sparse_mm": lambda: m.sparse.mm(a, x),
               "to_dense": lambda: a.to_dense().pow(2)}[how]()
        out.sum().backward()
        return a.grad
    t, s = _both(run)
    _same(t, s, 1e-5)
    if t.layout is not torch.strided:
        _assert_same_repr(t, s)


@pytest.mark.parametrize("bad", [
    lambda m: m.tensor(DENSE).crow_indices(),
    lambda m: m.tensor(DENSE).values(),
    lambda m: m.tensor(DENSE).to_sparse_csr().ccol_indices(),
    lambda m: m.tensor(DENSE).to_sparse_csc().col_indices(),
    lambda m: m.tensor(DENSE).to_sparse_csr().indices(),
    lambda m: m.tensor(DENSE).to_sparse_csr().coalesce(),
    lambda m: m.tensor(DENSE).to_sparse_csr().is_coalesced(),
    lambda m: m.tensor(DENSE).to_sparse_csr().numpy(),
    lambda m: m.tensor(DENSE).to_sparse_csr().stride(),
    lambda m: m.tensor(DENSE).to_sparse_csr().is_contiguous(),
    lambda m: m.tensor(DENSE).to_sparse_csr() / 2,
    lambda m: m.tensor(DENSE).to_sparse_csr() - m.tensor(DENSE).to_sparse_csr(),
    lambda m: m.tensor(DENSE).to_sparse_csr().exp(),
    lambda m: m.tensor(DENSE).to_sparse_csr().pow(2),
    lambda m: m.tensor(DENSE).to_sparse_csr() == m.tensor(DENSE).to_sparse_csr(),
    lambda m: m.tensor(DENSE).to_sparse_csr().sum(0),
    lambda m: m.tensor(DENSE).to_sparse_csr().max(),
    lambda m: m.tensor(DENSE).to_sparse_csr() @ m.ones(4, 2),
    lambda m: m.mv(m.tensor(DENSE).to_sparse_csr(), m.ones(4)),
    lambda m: m.tensor(DENSE).to_sparse_csr().matmul(m.ones(2, 3, 2)),
    lambda m: m.sparse.sum(m.tensor(DENSE).to_sparse_csr()),
    lambda m: m.sparse.sum(m.tensor(DENSE).to_sparse_csr(), 0),
    lambda m: m.tensor(DENSE).to_sparse_csr().to_sparse_csr(1),
    lambda m: m.tensor(DENSE).to_sparse_csr(dense_dim=1),
    lambda m: m.tensor(DENSE).to_sparse_bsr((2, 2)),
    lambda m: m.tensor(DENSE).to_sparse(layout=m.sparse_bsr),
    lambda m: m.tensor(DENSE).to_sparse(layout=m.sparse_csr, blocksize=(1, 1)),
    lambda m: m.tensor([[[1.0, 0], [0, 0]], [[1, 1], [0, 0]]]).to_sparse_csr(),
    lambda m: m.sparse_compressed_tensor([0, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0], (2, 3)),
    lambda m: m.sparse_compressed_tensor([0, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0], (2, 3), layout=m.strided),
    lambda m: m.sparse_csr_tensor([0.0, 1, 3], [1, 0, 2], [2, 3, 4], (2, 3)).to_dense(),
    lambda m: m.sparse_csr_tensor([0, 2, 3], [1, 0, 2], [2.0, 3.0, 4.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([0, 1, 3], [1, 0, 5], [2.0, 3.0, 4.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([1, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([0, 1, 4], [1, 0, 2], [2.0, 3.0, 4.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([0, 2, 3], [1, 1, 2], [2.0, 3.0, 4.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor(m.tensor([0, 1, 3], dtype=m.int32), m.tensor([1, 0, 2]), [2.0, 3.0, 4.0],
                                  (2, 3), check_invariants=True),
])
def test_errors_match_torch(bad):
    with pytest.raises(Exception) as te:
        bad(torch)
    with pytest.raises(Exception) as se:
        bad(tapelab)
    assert se.type is te.type, (se.value, te.value)
    first = str(te.value).split(". ")[0].split("\n")[0]
    if "Could not run" in first:    # PyTorch's lists its backends; tapelab's names what it supports
        first = first.split(" backend")[0]
    assert str(se.value).startswith(first), (str(se.value), first)


def test_beta_warning_once_and_the_layouts_print():
    from tapelab.ops import sparse_compressed
    sparse_compressed._BETA["warned"] = False
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        tapelab.tensor(DENSE).to_sparse_csr()
        tapelab.tensor(DENSE).to_sparse_csc()
    beta = [w for w in rec if "beta state" in str(w.message)]
    assert len(beta) == 1 and beta[0].filename == __file__
    assert repr(tapelab.sparse_bsc) == "tapelab.sparse_bsc"


def test_gcn_with_a_csr_adjacency_trains_as_torch():
    def run(m):
        m.manual_seed(0)
        n, d, h, c = 30, 6, 8, 3
        a = (m.rand(n, n) < 0.15).float()
        a = ((a + a.t()) > 0).float() + m.eye(n)
        dinv = a.sum(1).pow(-0.5)
        adj = (dinv[:, None] * a * dinv[None, :]).to_sparse_csr()
        x, y = m.randn(n, d), m.randint(0, c, (n,))
        l1, l2 = m.nn.Linear(d, h), m.nn.Linear(h, c)
        opt = m.optim.Adam(list(l1.parameters()) + list(l2.parameters()), lr=0.02)
        losses = []
        for _ in range(15):
            opt.zero_grad()
            out = m.sparse.mm(adj, l2(m.relu(adj @ l1(x))))
            loss = m.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        # learnable edge weights: the gradient reaches the CSR values through addmm
        w = m.ones(adj._nnz(), requires_grad=True)
        a2 = m.sparse_csr_tensor(adj.crow_indices(), adj.col_indices(), adj.values() * w, adj.shape)
        m.addmm(m.zeros(n, c), a2, l2(m.relu(l1(x)))).pow(2).sum().backward()
        return np.array(losses), w.grad.numpy()
    (tl, tw), (sl, sw) = _both(run)
    np.testing.assert_allclose(sl, tl, rtol=1e-5)
    np.testing.assert_allclose(sw, tw, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("fn,dim", [("softmax", 0), ("softmax", 1), ("log_softmax", 1), ("log_softmax", 0),
                                    ("softmax", 2), ("softmax_3d", 0)])
def test_sparse_softmax_values_and_gradients(fn, dim):
    def run(m):
        m.manual_seed(0)
        if fn == "softmax_3d":     # a dense dim after two sparse ones
            v = m.randn(3, 2, requires_grad=True)
            s = m.sparse_coo_tensor([[0, 1, 1], [1, 0, 1]], v, (2, 2, 2))
            out = m.sparse.softmax(s, dim)
            w = m.arange(8.0).reshape(2, 2, 2)
        else:
            v = m.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
            s = m.sparse_coo_tensor([[0, 0, 1, 2, 2], [0, 2, 1, 0, 2]], v, (3, 3))
            if dim == 2:
                s = m.sparse_coo_tensor([[0, 0, 1, 2, 2], [0, 2, 1, 0, 2]], v[:, None] * m.tensor([1.0, -1.0]),
                                        (3, 3, 2))
            out = getattr(m.sparse, fn)(s, dim)
            w = m.arange(float(out.numel())).reshape(out.shape)
        (out.to_dense() * w).sum().backward()
        return out, v.grad
    (to, tg), (so, sg) = _both(run)
    _same(to, so, 1e-5)
    np.testing.assert_allclose(sg.numpy(), tg.numpy(), rtol=1e-5, atol=1e-6)


def test_sampled_addmm_values_and_gradients():
    def run(m):
        m.manual_seed(0)
        m1, m2 = m.randn(3, 4, requires_grad=True), m.randn(4, 3, requires_grad=True)
        cv = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        c = m.sparse_csr_tensor([0, 1, 1, 3], [2, 0, 1], cv, (3, 3))
        out = m.sparse.sampled_addmm(c, m1, m2, beta=0.5, alpha=2.0)
        out.to_dense().pow(2).sum().backward()
        return out, m1.grad, m2.grad, cv.grad
    t, s = _both(run)
    _same(t[0], s[0], 1e-5)
    for a, b in zip(t[1:], s[1:]):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [
    lambda m: m.sparse.softmax(m.tensor(DENSE).to_sparse_csr(), 1),
    lambda m: m.sparse.log_softmax(m.tensor(DENSE), 1),
    lambda m: m.sparse.softmax(m.tensor(DENSE).to_sparse(), 2),
    lambda m: m.sparse.sampled_addmm(m.tensor(DENSE), m.ones(2, 4), m.ones(4, 3)),
    lambda m: m.sparse.sampled_addmm(m.tensor(DENSE).to_sparse(), m.ones(2, 4), m.ones(4, 3)),
    lambda m: m.sparse.sampled_addmm(m.tensor(DENSE).to_sparse_csr(), m.ones(2, 4), m.ones(3, 3)),
    lambda m: m.sparse.sampled_addmm(m.tensor(DENSE).to_sparse_csr(), m.ones(2, 4, dtype=m.float64), m.ones(4, 3)),
])
def test_softmax_and_sampled_addmm_errors_match_torch(bad):
    test_errors_match_torch(bad)


def test_torch_save_files_of_compressed_tensors_load_both_ways(tmp_path):
    def tensors(m):
        return {"csr": m.tensor(DENSE).to_sparse_csr(), "csc": m.tensor(DENSE).to_sparse_csr().t(),
                "i32": m.sparse_csr_tensor(m.tensor([0, 1, 3], dtype=m.int32), m.tensor([1, 0, 2], dtype=m.int32),
                                           m.tensor([2.0, 3.0, 4.0]), (2, 3)),
                "bsr": m.arange(16.0).reshape(4, 4).to_sparse_bsr((2, 2))}
    torch.save(tensors(torch), tmp_path / "t.pt")
    got = tapelab.load(tmp_path / "t.pt")
    tapelab.save(tensors(tapelab), tmp_path / "s.pt")
    back = torch.load(tmp_path / "s.pt")
    for k, t in tensors(torch).items():
        _assert_same_repr(t, got[k])
        _assert_same_repr(back[k], got[k])
    tapelab.save({"adj": got["csr"]}, tmp_path / "a.safetensors")     # no safetensors form: pickled
    _assert_same_repr(tensors(torch)["csr"], tapelab.load(tmp_path / "a.safetensors")["adj"])


@pytest.mark.parametrize("bad", [
    lambda m: m.arange(1.0, 25.0).reshape(2, 3, 4).to_sparse_csr() @ m.ones(2, 4, 5),
    lambda m: m.arange(1.0, 25.0).reshape(2, 3, 4).to_sparse_csr() @ m.ones(4, 5),
    lambda m: m.tensor(DENSE).to_sparse_csr().unsqueeze(0),
])
def test_batched_products_refuse_as_torch(bad):
    test_errors_match_torch(bad)


@pytest.mark.parametrize("call", [
    lambda m, s, x: m.sparse.mm(s.to_sparse(), x), lambda m, s, x: m.sparse.mm(s.to_sparse_csr(), x),
    lambda m, s, x: m.spmm(s.to_sparse(), x), lambda m, s, x: m.spmm(s.to_sparse_csr(), x),
    lambda m, s, x: s.to_sparse_csr() @ x, lambda m, s, x: s.to_sparse_csr().to_dense(),
])
def test_backward_node_names(call):
    def run(m):
        return call(m, m.tensor([[0.0, 2.0], [3.0, 0.0]], requires_grad=True), m.ones(2, 2)).grad_fn.name()
    t, s = _both(run)
    assert s == t


@pytest.mark.parametrize("fn", [
    lambda m, c: m.zeros_like(c), lambda m, c: m.ones_like(c), lambda m, c: m.full_like(c, 7),
    lambda m, c: m.zeros_like(c, dtype=m.float64), lambda m, c: m.ones_like(c.t()),
    lambda m, c: m.ones_like(c, requires_grad=True), lambda m, c: m.ones_like(m.arange(1.0, 9.0).reshape(2, 2, 2).to_sparse_csr()),
])
def test_like_factories_keep_the_compressed_layout(fn):
    t, s = _both(lambda m: fn(m, m.tensor(DENSE).to_sparse_csr()))
    _assert_same_repr(t, s)


def test_like_factories_refuse_another_layout():
    test_errors_match_torch(lambda m: m.zeros_like(m.tensor(DENSE).to_sparse_csr(), layout=m.strided))


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("product", [
    lambda m, a, w: a @ w, lambda m, a, w: w @ a, lambda m, a, w: a @ w[0], lambda m, a, w: m.sparse.mm(a, w),
    lambda m, a, w: m.spmm(a, w), lambda m, a, w: m.addmm(m.ones(2, 2), a, w),
])
def test_dtype_mismatch_errors_of_sparse_products(layout, product):
    def bad(m):
        d = m.tensor([[0.0, 2.0], [3.0, 0.0]])
        a = {"coo": d.to_sparse(), "csr": d.to_sparse_csr(), "csc": d.to_sparse_csr().t()}[layout]
        return product(m, a, m.ones(2, 2, dtype=m.float64))
    test_errors_match_torch(bad)


@pytest.mark.parametrize("bad", [
    lambda m: m.tensor(DENSE).to_sparse_csr().half() @ m.ones(3, 2).half(),
    lambda m: m.tensor(DENSE).to_sparse_csr().bfloat16() @ m.ones(3, 2).bfloat16(),
    lambda m: m.tensor(DENSE).to_sparse_csr().int() @ m.ones(3, 2, dtype=m.int32),
    lambda m: m.arange(16.0).reshape(4, 4).to_sparse_bsc((2, 2)) @ m.ones(4, 1),
    lambda m: m.arange(16.0).reshape(4, 4).to_sparse_bsr((2, 2)).to_sparse_csr(),
    lambda m: m.arange(1.0, 9.0).reshape(2, 2, 2).to_sparse_csr().transpose(0, 1),
])
def test_kernels_torch_lacks_refuse_as_torch(bad):
    test_errors_match_torch(bad)


@pytest.mark.parametrize("op", [lambda a: a @ a.t(), lambda a: a * a, lambda a: a + a, lambda a: a.t(),
                                lambda a: a.to_sparse_csc(), lambda a: a.to_sparse_coo()])
def test_index_dtypes_of_results_from_int32_indices(op):
    def run(m):
        a = m.sparse_csr_tensor(m.tensor([0, 1, 3], dtype=m.int32), m.tensor([1, 0, 2], dtype=m.int32),
                                m.tensor([2.0, 3.0, 4.0]), (2, 3))
        return op(a)
    t, s = _both(run)
    _same(t, s)
    if t.layout is torch.sparse_coo:
        assert str(s.indices().dtype) == str(t.indices().dtype).replace("torch", "tapelab")
    else:
        _assert_same_repr(t, s)
        comp = "crow_indices" if t.layout is torch.sparse_csr else "ccol_indices"
        assert str(getattr(s, comp)().dtype).split(".")[-1] == str(getattr(t, comp)().dtype).split(".")[-1]


@pytest.mark.parametrize("op", [lambda c: c.zero_(), lambda c: c.fill_(2), lambda c: c.add_(c), lambda c: c.neg_(),
                                lambda c: c.abs_(), lambda c: c.relu_(), lambda c: c.sqrt_(), lambda c: c.mul_(2),
                                lambda c: c.copy_(c * 3)])
def test_in_place_ops_keep_the_layout(op):
    def run(m):
        c = m.tensor([[0.0, -2.0, 0.0], [3.0, 0.0, 4.0]]).to_sparse_csr()
        out = op(c)
        assert out is c
        return c
    t, s = _both(run)
    _assert_same_repr(t, s)


@pytest.mark.parametrize("bad", [lambda m: m.rand_like(m.tensor(DENSE).to_sparse_csr()),
                                 lambda m: m.randint_like(m.tensor(DENSE).to_sparse_csr(), 5)])
def test_random_likes_torch_refuses(bad):
    test_errors_match_torch(bad)


def test_randn_like_of_a_compressed_tensor_refuses_clearly():
    with pytest.raises(NotImplementedError, match="randn_like: tapelab does not draw into a SparseCsr"):
        tapelab.randn_like(tapelab.tensor(DENSE).to_sparse_csr())


@pytest.mark.parametrize("build", [
    lambda m: m.tensor(DENSE).to_sparse_csr(), lambda m: m.tensor(DENSE).to_sparse_csr().t(),
    lambda m: m.sparse_csr_tensor(m.tensor([0, 1, 3], dtype=m.int32), m.tensor([1, 0, 2], dtype=m.int32),
                                  m.tensor([2.0, 3.0, 4.0]), (2, 3)),
    lambda m: m.tensor(DENSE).to_sparse(), lambda m: m.arange(16.0).reshape(4, 4).to_sparse_bsr((2, 2)),
    lambda m: m.tensor(DENSE).to_sparse().requires_grad_(),
])
def test_pickle_round_trip_of_sparse_tensors(build):
    import pickle
    t, s = _both(lambda m: pickle.loads(pickle.dumps(build(m))))
    _assert_same_repr(t, s)
    assert s.requires_grad == t.requires_grad


@pytest.mark.parametrize("key", [0, -1, (1, 2), (0, 0), (slice(None), 1), (slice(None), 2)])
@pytest.mark.parametrize("transposed", [False, True])
def test_integer_indexing_gives_torch_rows_columns_and_elements(key, transposed):
    def run(m):
        return (m.tensor(DENSE).to_sparse_csr().t() if transposed else m.tensor(DENSE).to_sparse_csr())[key]
    try:
        run(torch)
    except IndexError:                 # past the transposed matrix's columns: the same IndexError
        return test_errors_match_torch(run)
    t, s = _both(run)
    _assert_same_repr(t, s)


@pytest.mark.parametrize("bad", [lambda m: m.tensor(DENSE).to_sparse_csr()[5],
                                 lambda m: m.tensor(DENSE).to_sparse_csr()[0:1],
                                 lambda m: m.tensor(DENSE).to_sparse_csr().narrow(0, 0, 1)])
def test_indexing_refusals_match_torch(bad):
    test_errors_match_torch(bad)
