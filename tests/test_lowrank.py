"""svd_lowrank, pca_lowrank and lobpcg against PyTorch and numpy: the randomized results are compared by
what does not depend on the random test matrix (singular values, subspaces, exact low-rank
reconstructions, eigenvalues), gradients by gradcheck under a fixed seed and against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

import tapelab
from tapelab.autograd import gradcheck

RNG = np.random.default_rng(3)


def _low_rank(m, n, r, dtype=np.float64):
    left, right = RNG.standard_normal((m, r)), RNG.standard_normal((r, n))
    if np.dtype(dtype).kind == "c":
        left, right = left + 1j * RNG.standard_normal((m, r)), right + 1j * RNG.standard_normal((r, n))
    return (left @ right).astype(dtype)


def _projector(u, r):
    u = u[..., :r]
    return u @ np.swapaxes(u.conj(), -1, -2)


@pytest.mark.parametrize("shape", [(40, 25), (25, 40), (3, 20, 18)], ids=["tall", "wide", "batched"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_svd_lowrank_recovers_a_low_rank_matrix_as_torch_does(shape, dtype):
    a = np.stack([_low_rank(*shape[-2:], 4, dtype) for _ in range(shape[0])]) if len(shape) == 3 \
        else _low_rank(*shape, 4, dtype)
    U, S, V = tapelab.svd_lowrank(tapelab.tensor(a), q=6)
    Ut, St, Vt = torch.svd_lowrank(torch.tensor(a), q=6)
    assert tuple(U.shape) == tuple(Ut.shape) and tuple(S.shape) == tuple(St.shape) and tuple(V.shape) == tuple(Vt.shape)
    np.testing.assert_allclose(S.numpy()[..., :4], St.numpy()[..., :4], rtol=1e-10)
    np.testing.assert_allclose(S.numpy()[..., 4:], 0.0, atol=1e-10 * S.numpy().max())
    np.testing.assert_allclose(_projector(U.numpy(), 4), _projector(Ut.resolve_conj().numpy(), 4), atol=1e-10)
    np.testing.assert_allclose(_projector(V.numpy(), 4), _projector(Vt.resolve_conj().numpy(), 4), atol=1e-10)
    rebuilt = (U * S[..., None, :].to(U.dtype)) @ V.mH
    np.testing.assert_allclose(rebuilt.numpy(), a, atol=1e-10 * np.abs(a).max())


def test_svd_lowrank_on_a_decaying_spectrum_matches_torch_within_the_randomized_tolerance():
    u, _ = np.linalg.qr(RNG.standard_normal((60, 30)))
    v, _ = np.linalg.qr(RNG.standard_normal((40, 30)))
    s = 0.5 ** np.arange(30)
    a = (u * s) @ v.T
    U, S, V = tapelab.svd_lowrank(tapelab.tensor(a), q=8, niter=2)
    _, St, _ = torch.svd_lowrank(torch.tensor(a), q=8, niter=2)
    np.testing.assert_allclose(S.numpy()[:4], s[:4], rtol=1e-6)
    np.testing.assert_allclose(S.numpy()[:4], St.numpy()[:4], rtol=1e-6)
    np.testing.assert_allclose(_projector(U.numpy(), 3), _projector(u, 3), atol=1e-5)


def test_svd_lowrank_subtracts_M_and_keeps_q_within_the_shape():
    a, mean = _low_rank(30, 20, 3), RNG.standard_normal((1, 20))
    U, S, V = tapelab.svd_lowrank(tapelab.tensor(a + mean), q=3, M=tapelab.tensor(mean))
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a, compute_uv=False)[:3], rtol=1e-10)
    U, S, V = tapelab.svd_lowrank(tapelab.tensor(a[:8, :6]), q=20)
    Ut, St, Vt = torch.svd_lowrank(torch.tensor(a[:8, :6]), q=20)
    assert [tuple(t.shape) for t in (U, S, V)] == [tuple(t.shape) for t in (Ut, St, Vt)]


def test_svd_lowrank_gradients():
    a = tapelab.tensor(_low_rank(12, 9, 3), requires_grad=True)

    def top(x):
        tapelab.manual_seed(0)       # one test matrix for every evaluation
        U, S, V = tapelab.svd_lowrank(x, q=3, niter=1)
        return S, (U * S) @ V.mT
    assert gradcheck(top, (a,))
    # the singular values' gradient is U V^T, whatever the random draw: as PyTorch's
    at = torch.tensor(a.detach().numpy(), requires_grad=True)
    torch.svd_lowrank(at, q=3)[1].sum().backward()
    tapelab.svd_lowrank(a, q=3)[1].sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), atol=1e-10)


def test_pca_lowrank_matches_torch():
    a = _low_rank(50, 8, 3) + RNG.standard_normal((1, 8)) * 5
    U, S, V = tapelab.pca_lowrank(tapelab.tensor(a))
    Ut, St, Vt = torch.pca_lowrank(torch.tensor(a))
    assert tuple(S.shape) == tuple(St.shape) == (6,)
    np.testing.assert_allclose(S.numpy()[:3], St.numpy()[:3], rtol=1e-10)
    np.testing.assert_allclose(_projector(V.numpy(), 3), _projector(Vt.numpy(), 3), atol=1e-10)
    centred = a - a.mean(0)
    np.testing.assert_allclose(S.numpy()[:3] ** 2 / 49, np.linalg.eigvalsh(np.cov(centred.T))[::-1][:3], rtol=1e-10)
    S_raw = tapelab.pca_lowrank(tapelab.tensor(a), q=4, center=False)[1]
    np.testing.assert_allclose(S_raw.numpy(), np.linalg.svd(a, compute_uv=False)[:4], rtol=1e-10)
    for kwargs in ({"q": 9}, {"niter": -1}):
        with pytest.raises(ValueError) as ours:
            tapelab.pca_lowrank(tapelab.tensor(a), **kwargs)
        with pytest.raises(ValueError) as theirs:
            torch.pca_lowrank(torch.tensor(a), **kwargs)
        assert str(ours.value) == str(theirs.value)


def _spd(m, shift):
    x = RNG.standard_normal((m, m))
    return x @ x.T + shift * np.eye(m)


@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_eigenvalues_against_numpy(largest):
    a = _spd(30, 30.0)
    E, X = tapelab.lobpcg(tapelab.tensor(a), k=3, largest=largest)
    w = np.linalg.eigh(a)[0]
    np.testing.assert_allclose(E.numpy(), w[::-1][:3] if largest else w[:3], rtol=1e-10)
    x = X.numpy()
    np.testing.assert_allclose(x.T @ x, np.eye(3), atol=1e-10)
    assert np.abs(a @ x - x * E.numpy()).max() < 1e-5 * np.abs(a).max()


def test_lobpcg_generalized_with_a_start_block_and_a_preconditioner():
    a, b = _spd(36, 36.0), _spd(36, 36.0) / 36
    x0 = tapelab.tensor(RNG.standard_normal((36, 4)))
    E, X = tapelab.lobpcg(tapelab.tensor(a), k=2, B=tapelab.tensor(b), X=x0, largest=False,
                          iK=tapelab.tensor(np.diag(1 / np.diag(a))))
    want = scipy.linalg.eigh(a, b, eigvals_only=True)[:2]
    np.testing.assert_allclose(E.numpy(), want, rtol=1e-10)
    x = X.numpy()
    np.testing.assert_allclose(x.T @ b @ x, np.eye(2), atol=1e-10)
    # float32 at its default tolerance
    E32 = tapelab.lobpcg(tapelab.tensor(a.astype(np.float32)), k=2)[0]
    np.testing.assert_allclose(E32.numpy(), np.linalg.eigvalsh(a)[::-1][:2], rtol=1e-4)


def _separated(m):
    """A symmetric positive-definite matrix with eigenvalues 2, 4, ..., 2m: gaps that keep gradients tame."""
    q, _ = np.linalg.qr(RNG.standard_normal((m, m)))
    return (q * np.arange(2.0, 2.0 * m + 1, 2.0)) @ q.T


def _pair_loss(E, X, W):
    return E.sum() + (X * (W @ X)).sum()     # invariant under the eigenvectors' signs


@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_gradients_are_the_exact_eigenpairs_as_torch(largest):
    a, w = _separated(24), RNG.standard_normal((24, 24))
    at, ae, tt = tapelab.tensor(a, requires_grad=True), tapelab.tensor(a, requires_grad=True), \
        torch.tensor(a, requires_grad=True)
    _pair_loss(*tapelab.lobpcg(at, k=2, largest=largest), tapelab.tensor(w)).backward()
    _pair_loss(*torch.lobpcg(tt, k=2, largest=largest), torch.tensor(w)).backward()
    vals, vecs = tapelab.linalg.eigh(ae)
    top = (vals[-2:].flip(0), vecs[:, -2:].flip(1)) if largest else (vals[:2], vecs[:, :2])
    _pair_loss(*top, tapelab.tensor(w)).backward()
    np.testing.assert_allclose(at.grad.numpy(), ae.grad.numpy(), atol=1e-6)
    np.testing.assert_allclose(at.grad.numpy(), tt.grad.numpy(), atol=1e-6)


def test_lobpcg_gradients_in_B():
    a, b, w = _separated(24), _spd(24, 24.0) / 24, RNG.standard_normal((24, 24))
    at, bt = tapelab.tensor(a, requires_grad=True), tapelab.tensor(b, requires_grad=True)
    _pair_loss(*tapelab.lobpcg(at, k=2, B=bt), tapelab.tensor(w)).backward()
    # the reference: eigh of L^-1 A L^-T (B = L L^T), differentiable in both through eigh and cholesky
    ae, be = tapelab.tensor(a, requires_grad=True), tapelab.tensor(b, requires_grad=True)
    inv = tapelab.linalg.inv(tapelab.linalg.cholesky(be))
    vals, vecs = tapelab.linalg.eigh(inv @ ae @ inv.mT)
    _pair_loss(vals[-2:].flip(0), (inv.mT @ vecs)[:, -2:].flip(1), tapelab.tensor(w)).backward()
    np.testing.assert_allclose(at.grad.numpy(), ae.grad.numpy(), atol=1e-6)
    np.testing.assert_allclose(bt.grad.numpy(), be.grad.numpy(), atol=1e-5)


def test_lobpcg_errors_as_torch():
    a = tapelab.tensor(_spd(10, 10.0))
    with pytest.raises(ValueError, match=r"number of A rows \(=10\) is smaller than 3 x the number of requested "
                                         r"eigenpairs \(=4\)"):
        tapelab.lobpcg(a, k=4)
    with pytest.raises(AssertionError, match="A must be square"):
        tapelab.lobpcg(tapelab.randn(6, 5), k=1)


def test_lowrank_results_are_on_the_tape():
    a = tapelab.tensor(_low_rank(20, 10, 2), requires_grad=True)
    with tapelab.tape() as t:
        tapelab.svd_lowrank(a, q=2)[1].sum()
    ops = {n.op for n in t.nodes}
    assert {"qr", "linalg_svd", "matmul"} <= ops
