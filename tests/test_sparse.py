"""Sparse COO tensors against PyTorch: construction, structure, conversion, printing, the sparse
products with their gradients (dense for mm/spmm/@, sparse for torch.sparse.mm), sums, sparse
arithmetic, device moves, pickling and PyTorch's errors for ops with no sparse kernel."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import tapelab
from tapelab import dispatch

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")

IDX = np.array([[0, 1, 1, 2, 0], [2, 0, 2, 1, 2]], np.int64)      # (0, 2) appears twice: uncoalesced
VAL = np.array([3.0, 4.0, 5.0, 6.0, 1.0])


def _np(t):
    if t.layout != t.to_dense().layout:        # torch and tapelab sparse tensors: compare dense forms
        t = t.to_dense()
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def _sparse(m, dtype=None, requires_grad=False, values=VAL):
    dtype = dtype or m.float32
    return m.sparse_coo_tensor(m.tensor(IDX), m.tensor(values, dtype=dtype), (3, 3), requires_grad=requires_grad)


def both(fn):
    return fn(torch), fn(tapelab)


def test_structure_matches_torch():
    def facts(m):
        s = _sparse(m)
        c = s.coalesce()
        return (s.is_sparse, str(s.layout).split(".")[1], s._nnz(), s.is_coalesced(), tuple(s.shape), s.dim(),
                s.numel(), s.sparse_dim(), s.dense_dim(), c._nnz(), c.is_coalesced(), c.coalesce() is c,
                c.indices().tolist(), c.values().tolist(), s._indices().tolist(), s._values().tolist(),
                str(m.ones(2).layout).split(".")[1], m.ones(2).is_sparse, m.ones(2).to_dense().is_sparse)
    assert facts(tapelab) == facts(torch)


def test_layouts_are_module_objects():
    assert tapelab.ones(1).layout is tapelab.strided
    assert _sparse(tapelab).layout is tapelab.sparse_coo
    assert pickle.loads(pickle.dumps(tapelab.sparse_coo)) is tapelab.sparse_coo


@pytest.mark.parametrize("make", [
    lambda m: _sparse(m),
    lambda m: _sparse(m, m.float64),
    lambda m: _sparse(m).coalesce(),
    lambda m: m.sparse_coo_tensor(m.zeros(2, 0, dtype=m.int64), m.zeros(0), (2, 2)),
    lambda m: m.sparse_coo_tensor(m.tensor(IDX), m.ones(5, 2), (3, 3, 2)),
    lambda m: m.tensor([[0.0, 2.5], [3.0, 0.0]]).to_sparse(),
    lambda m: _sparse(m, requires_grad=True),
    lambda m: m.sparse_coo_tensor([[0, 1], [1, 0]], [2, 3]),
], ids=["float32", "float64", "coalesced", "empty", "dense-dims", "to_sparse", "requires-grad", "int-lists"])
def test_repr_matches_torch(make):
    t, s = both(make)
    assert repr(s).replace("tapelab.", "torch.") == repr(t)


@pytest.mark.parametrize("make", [
    lambda m: _sparse(m).to_dense(),
    lambda m: _sparse(m).coalesce().to_dense(),
    lambda m: m.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, -1.0]]).to_sparse().to_dense(),
    lambda m: (_sparse(m) + _sparse(m)).to_dense(),
    lambda m: (2 * _sparse(m)).to_dense(),
    lambda m: (_sparse(m) * 2.5).to_dense(),
    lambda m: (_sparse(m) / 4).to_dense(),
    lambda m: (-_sparse(m)).to_dense(),
    lambda m: (_sparse(m) - _sparse(m).coalesce()).to_dense(),
    lambda m: m.ones(3, 3) + _sparse(m),
    lambda m: _sparse(m).t().to_dense(),
    lambda m: m.abs(_sparse(m, values=-VAL)).to_dense(),
    lambda m: m.sparse.sum(_sparse(m)),
    lambda m: m.sparse.sum(_sparse(m), dim=0).to_dense(),
    lambda m: m.sparse.sum(_sparse(m), dim=1).to_dense(),
    lambda m: m.sparse.sum(_sparse(m), dim=(0, 1)),
    lambda m: m.sparse.sum(m.sparse_coo_tensor(m.tensor(IDX), m.ones(5, 2), (3, 3, 2)), dim=1).to_dense(),
    lambda m: _sparse(m).sum(),
    lambda m: _sparse(m).to(m.float64).to_dense(),
    lambda m: _sparse(m).double().to_dense(),
    lambda m: m.tensor([[1.0, 5.0], [7.0, 2.0]]).sparse_mask(m.tensor([[0.0, 1.0], [1.0, 1.0]]).to_sparse()).to_dense(),
], ids=["to_dense", "coalesced", "to_sparse", "add", "rmul", "mul", "div", "neg", "sub", "dense+sparse", "t", "abs",
        "sum", "sum0", "sum1", "sum01", "sum-dense-dims", "Tensor.sum", "to-dtype", "double", "sparse_mask"])
def test_values_match_torch(make):
    t, s = both(make)
    assert s.dtype.name == str(t.dtype).split(".")[1]
    np.testing.assert_allclose(_np(s), _np(t), rtol=1e-6)


def test_coalesce_flags_follow_torch():
    def flags(m):
        s, c = _sparse(m), _sparse(m).coalesce()
        return ((s + s).is_coalesced(), (c + c).is_coalesced(), (2 * c).is_coalesced(), c.t().is_coalesced(),
                m.tensor([[1.0, 0.0]]).to_sparse().is_coalesced())
    assert flags(tapelab) == flags(torch)


def _product_grads(m, product, sparse_requires_grad):
    rng = np.random.default_rng(0)
    dense = m.tensor(rng.standard_normal((3, 2)), dtype=m.float64, requires_grad=True)
    s = _sparse(m, m.float64, requires_grad=sparse_requires_grad)
    out = product(m, s, dense)
    (out * m.tensor(rng.standard_normal((3, 2)))).sum().backward()
    return out, dense.grad, s.grad


PRODUCTS = {
    "mm": lambda m, s, d: m.mm(s, d),
    "matmul": lambda m, s, d: m.matmul(s, d),
    "@": lambda m, s, d: s @ d,
    "spmm": lambda m, s, d: m.spmm(s, d),
    "sparse.mm": lambda m, s, d: m.sparse.mm(s, d),
    "sparse.addmm": lambda m, s, d: m.sparse.addmm(m.ones(3, 2, dtype=m.float64), s, d, beta=0.5, alpha=2.0),
}


@pytest.mark.parametrize("name", PRODUCTS)
@pytest.mark.parametrize("sparse_requires_grad", [False, True])
def test_products_and_gradients_match_torch(name, sparse_requires_grad):
    (t_out, t_dg, t_sg), (s_out, s_dg, s_sg) = both(lambda m: _product_grads(m, PRODUCTS[name], sparse_requires_grad))
    np.testing.assert_allclose(_np(s_out), _np(t_out), rtol=1e-12)
    np.testing.assert_allclose(_np(s_dg), _np(t_dg), rtol=1e-12)
    if not sparse_requires_grad:
        assert s_sg is None and t_sg is None
        return
    assert s_sg.is_sparse == t_sg.is_sparse      # sparse for torch.sparse.mm, dense for the others
    np.testing.assert_allclose(_np(s_sg), _np(t_sg), rtol=1e-12)
    if t_sg.is_sparse:      # the coalesced pattern of the operand (torch flags it uncoalesced, tapelab coalesced)
        assert s_sg._indices().tolist() == t_sg._indices().tolist()


def test_matrix_vector_product():
    t, s = both(lambda m: m.mv(_sparse(m), m.tensor([1.0, -2.0, 0.5])))
    np.testing.assert_allclose(_np(s), _np(t))


def test_gradient_to_values_through_construction():
    def grads(m):
        v = m.tensor(VAL, requires_grad=True)
        w = m.tensor(np.arange(6.0).reshape(3, 2))
        s = m.sparse_coo_tensor(m.tensor(IDX), v, (3, 3))
        (m.sparse.mm(s, w) ** 2).sum().backward()
        return v.grad, s.requires_grad, s.is_leaf
    (tg, treq, tleaf), (sg, sreq, sleaf) = both(grads)
    assert (sreq, sleaf) == (treq, tleaf)
    np.testing.assert_allclose(_np(sg), _np(tg), rtol=1e-6)


@pytest.mark.parametrize("path", [
    lambda m, s: s.to_dense().sum(),
    lambda m, s: (s.to_dense() ** 2).sum(),
    lambda m, s: m.sparse.sum(s) * 3,
    lambda m, s: (m.sparse.sum(s, dim=1).to_dense() ** 2).sum(),
    lambda m, s: (s.coalesce().values() ** 2).sum(),
    lambda m, s: (s + s).to_dense()[0, 2],
    lambda m, s: (s * 3).to_dense().sum(),
    lambda m, s: (s.t().to_dense() * m.arange(9.0).reshape(3, 3)).sum(),
], ids=["to_dense", "to_dense-sq", "sparse.sum", "sparse.sum-dim", "values", "add", "mul", "t"])
def test_sparse_leaf_gradients_match_torch(path):
    def grad(m):
        s = _sparse(m, requires_grad=True)
        path(m, s).backward()
        return s.grad
    t, s = both(grad)
    assert s.is_sparse == t.is_sparse
    np.testing.assert_allclose(_np(s), _np(t), rtol=1e-6)


def test_to_sparse_gradient_is_dense_like_torch():
    def grad(m):
        x = m.tensor([[0.0, 2.0], [3.0, 0.0]], requires_grad=True)
        m.sparse.sum(x.to_sparse() * 2).backward()
        return x.grad
    t, s = both(grad)
    np.testing.assert_allclose(_np(s), _np(t))


def test_construction_inference_and_options():
    def made(m):
        s = m.sparse_coo_tensor(m.tensor(IDX), m.tensor(VAL))          # size inferred
        d = m.sparse_coo_tensor(m.tensor(IDX), m.tensor(VAL), (4, 5), dtype=m.float64, device="cpu")
        return tuple(s.shape), str(s.dtype), tuple(d.shape), str(d.dtype), d.to("cpu").is_sparse
    t, s = both(made)
    assert tuple(x.replace("tapelab.", "torch.") if isinstance(x, str) else x for x in s) == t


@pytest.mark.parametrize("bad", [
    lambda m: m.sparse_coo_tensor(m.tensor(IDX), m.tensor([1.0, 2.0]), (3, 3)),
    lambda m: m.ones(2).is_coalesced(),
    lambda m: _sparse(m).indices(),
    lambda m: _sparse(m).values(),
    lambda m: m.ones(3).sparse_mask(m.ones(3)),
], ids=["nnz-mismatch", "is_coalesced-dense", "indices-uncoalesced", "values-uncoalesced", "mask-dense"])
def test_errors_match_torch_type(bad):
    with pytest.raises(Exception) as te:
        bad(torch)
    with pytest.raises(type(te.value)):
        bad(tapelab)


def test_index_out_of_size_is_refused():
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 2 but found index 2"):
        tapelab.sparse_coo_tensor([[0, 2], [1, 0]], [1.0, 2.0], (2, 2))


@pytest.mark.parametrize("op, aten", [
    (lambda m, s: m.exp(s), "exp"),
    (lambda m, s: s.view(9), "view"),
    (lambda m, s: m.sigmoid(s), "sigmoid"),
], ids=["exp", "view", "sigmoid"])
def test_ops_without_sparse_kernel_raise_torchs_error(op, aten):
    with pytest.raises(NotImplementedError, match=f"Could not run 'aten::{aten}' with arguments from the 'SparseCPU'"):
        op(torch, _sparse(torch))
    with pytest.raises(NotImplementedError, match="'aten::\\w+' with arguments from the 'SparseCPU' backend"):
        op(tapelab, _sparse(tapelab))


def test_numpy_refused_like_torch():
    with pytest.raises(TypeError, match="can't convert Sparse layout tensor to numpy"):
        _sparse(torch).numpy()
    with pytest.raises(TypeError, match="can't convert Sparse layout tensor to numpy"):
        _sparse(tapelab).numpy()


def test_sparse_ops_are_dispatched_ops():
    """Every sparse step passes the dispatcher, so modes (and the tape) see it."""
    class Names(dispatch.Mode):
        def __init__(self):
            self.names = []

        def dispatch(self, op, args, params):
            self.names.append(op.name)
            return super().dispatch(op, args, params)

    s = _sparse(tapelab)
    with Names() as m:
        tapelab.sparse.mm(s.coalesce(), tapelab.ones(3, 1)).sum()
        s.to_dense()
        tapelab.sparse.sum(s)
    assert {"coalesce", "sparse_mm", "to_dense", "sparse_sum"} <= set(m.names)


def test_values_are_detached_like_torch():
    def req(m):
        s = _sparse(m, requires_grad=True)
        return s._values().requires_grad, s._indices().requires_grad, s.coalesce().values().requires_grad
    assert req(tapelab) == req(torch)


def test_sparse_mask_keeps_the_masks_pattern():
    def masked(m):
        r = m.ones(3, 3).sparse_mask(_sparse(m))
        return r._indices().tolist(), r._values().tolist(), r.is_coalesced()
    assert masked(tapelab) == masked(torch)


def test_gcn_layer_on_simulated_cuda():
    """The device move keeps a sparse tensor sparse, and its product runs on the target device."""
    from tapelab.base.backend import simulated_cuda
    with simulated_cuda():
        s = _sparse(tapelab).to("cuda")
        assert s.is_sparse and s.device.type == "cuda" and s._values().device.type == "cuda"
        back = s.to("cpu")
    np.testing.assert_array_equal(back.to_dense().numpy(), _sparse(tapelab).to_dense().numpy())


def test_sparse_gradients_accumulate_like_torch():
    def grad(m):
        s = _sparse(m, m.float64, requires_grad=True)
        d = m.tensor(np.arange(6.0).reshape(3, 2))
        (m.sparse.mm(s, d).sum() + (m.sparse.mm(s, d) ** 2).sum()).backward()
        m.sparse.mm(s, d).sum().backward()            # a second backward accumulates into .grad
        return s.grad
    t, s = both(grad)
    assert s.is_sparse and t.is_sparse
    np.testing.assert_allclose(_np(s), _np(t), rtol=1e-12)


def test_host_conversions_name_to_dense():
    s = _sparse(tapelab)
    for convert in (lambda: np.asarray(s), s.tolist):
        with pytest.raises(TypeError, match=r"Use Tensor.to_dense\(\) first"):
            convert()


@pytest.mark.parametrize("coalesce", [False, True])
def test_save_load_round_trips_with_torch(tmp_path, coalesce):
    """tapelab.save writes PyTorch's pickle of a sparse tensor (torch.load reads it) and tapelab.load
    reads torch.save's, alone and inside a state dict, under weights_only=True."""
    ours = _sparse(tapelab).coalesce() if coalesce else _sparse(tapelab)
    theirs = _sparse(torch).coalesce() if coalesce else _sparse(torch)
    tapelab.save({"adj": ours, "x": tapelab.ones(2)}, tmp_path / "ours.pt")
    torch.save({"adj": theirs, "x": torch.ones(2)}, tmp_path / "theirs.pt")
    for loaded in (torch.load(tmp_path / "ours.pt"), tapelab.load(tmp_path / "theirs.pt"),
                   tapelab.load(tmp_path / "ours.pt")):
        adj = loaded["adj"]
        assert adj.is_sparse and adj.is_coalesced() == coalesce
        assert adj._indices().tolist() == theirs._indices().tolist()
        np.testing.assert_array_equal(_np(adj), _np(theirs))
    tapelab.save(ours, tmp_path / "one.pt")
    np.testing.assert_array_equal(_np(tapelab.load(tmp_path / "one.pt")), _np(theirs))


@pytest.mark.parametrize("product", ["sparse.mm", "spmm", "mm"])
def test_second_derivative_through_the_product_matches_torch(product):
    def second(m):
        d = m.tensor(np.arange(6.0).reshape(3, 2) / 7, requires_grad=True)
        out = PRODUCTS[product](m, _sparse(m, m.float64), d)
        (g,) = m.autograd.grad((out ** 3).sum(), d, create_graph=True)
        (g ** 2).sum().backward()
        return d.grad
    t, s = both(second)
    np.testing.assert_allclose(_np(s), _np(t), rtol=1e-12)


@pytest.mark.skipif(not tapelab.cuda.is_available(), reason=f"needs a CUDA GPU: {tapelab.cuda.unavailable_reason()}")
@pytest.mark.parametrize("name", ["spmm", "sparse.mm", "@", "mm"])
def test_products_on_cuda_match_cpu(name):
    """cupyx.scipy.sparse behind the same COOArray: forward and both gradients on cuda against cpu."""
    def run(device):
        d = tapelab.tensor(np.arange(6.0).reshape(3, 2), device=device, requires_grad=True)
        s = _sparse(tapelab, tapelab.float64).to(device).requires_grad_()
        out = PRODUCTS[name](tapelab, s, d)
        (out ** 2).sum().backward()
        return [t.to("cpu") for t in (out, d.grad, s.grad, tapelab.sparse.sum(s).detach(), s.coalesce().to_dense())]
    for a, b in zip(run("cuda"), run("cpu")):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


def test_products_of_one_adjacency_reuse_its_matrix_and_see_in_place_writes():
    """A coalesced matrix converts to the backend's CSR once (a GCN step multiplies the same
    adjacency, and its transpose, several times); an in-place write into its values is seen by
    the next product, of the matrix and of its transpose, as in PyTorch."""
    outs = []
    for lib in (torch, tapelab):
        s = lib.sparse_coo_tensor(lib.tensor([[0, 1, 1], [1, 0, 2]]), lib.tensor([1.0, 2.0, 3.0]), (3, 3)).coalesce()
        d = lib.arange(6.0).reshape(3, 2)
        first = [lib.sparse.mm(s, d), lib.sparse.mm(s.t(), d), s.t() @ d]
        s.values().mul_(2)
        outs.append([*first, lib.sparse.mm(s, d), lib.sparse.mm(s.t(), d), s @ d])
    for ours, theirs in zip(outs[1], outs[0]):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
