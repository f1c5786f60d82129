"""Gaps found by running public PyTorch programs (pytorch/examples, karpathy's repositories) with
``import tapelab as torch``; each test states the PyTorch behaviour the program relied on, against
real torch."""
from __future__ import annotations

import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- size= by keyword (pytorch/examples gat)
@BOTH
@pytest.mark.parametrize("name", ["empty", "zeros", "ones", "rand", "randn"])
def test_factories_take_size_by_keyword(m, name):
    fn = getattr(m, name)
    assert tuple(fn(size=(2, 3)).shape) == (2, 3)
    assert tuple(fn(size=[4]).shape) == (4,)
    assert tuple(fn(size=()).shape) == ()
    assert fn(size=(2, 3), dtype=m.float64).dtype == m.float64
    with pytest.raises(TypeError):   # sizes given twice (torch's wording differs per factory)
        fn(2, size=(3,))
    with pytest.raises(TypeError, match="argument 'size' must be tuple of ints, not int"):
        fn(size=3)


def test_size_keyword_feeds_xavier_init():
    """gat's ``nn.init.xavier_normal_(Parameter(torch.empty(size=(in, out))))``: a 2-d weight."""
    w = tapelab.nn.Parameter(tapelab.empty(size=(6, 4)))
    tapelab.nn.init.xavier_normal_(w)
    assert tuple(w.shape) == (6, 4) and w.abs().sum().item() > 0


# ---------------------------------------------------------------- share_memory (pytorch/examples mnist_hogwild)
def _train(module: str, model, optim_name: str) -> None:
    m = {"torch": torch, "tapelab": tapelab}[module]
    opt = (m.optim.SGD(model.parameters(), lr=0.1, momentum=0.5) if optim_name == "sgd"
           else m.optim.Adam(model.parameters(), lr=0.01))
    x = m.arange(12, dtype=m.float32).reshape(4, 3) / 10
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()


def _reference_and_shared_model():
    ref = torch.nn.Linear(3, 2)
    model = tapelab.nn.Linear(3, 2)
    model.load_state_dict({k: tapelab.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters()) and not ref.weight.is_shared()
    return ref, model


def _assert_same_parameters(model, ref) -> None:
    for name, p in model.named_parameters():
        assert p.detach().numpy() == pytest.approx(ref.get_parameter(name).detach().numpy(), abs=1e-6), name


@pytest.mark.parametrize("optim_name", ["sgd", "adam"])
def test_share_memory_forked_worker_trains_the_parents_model(optim_name):
    """hogwild: ``model.share_memory()``, a forked worker steps the parameters in place, and the
    parent's model holds the result: torch's values when trained in one process."""
    import tapelab.multiprocessing as multiprocessing

    ref, model = _reference_and_shared_model()
    worker = multiprocessing.get_context("fork").Process(target=_train, args=("tapelab", model, optim_name))
    worker.start()
    worker.join()
    assert worker.exitcode == 0
    _train("torch", ref, optim_name)
    _assert_same_parameters(model, ref)


def _spawned_worker(model, q) -> None:
    _train("tapelab", model, "sgd")
    q.get().add_(5)


def test_share_memory_spawned_worker_writes_the_parents_tensors():
    """mnist_hogwild's way: a spawned worker gets the shared model as a Process argument and trains
    it (torch's one-process values here); a shared tensor sent through a Queue afterwards (a
    transposed view, so strides travel too) is written in place. Unshared tensors arrive as copies."""
    import tapelab.multiprocessing as multiprocessing

    ref, model = _reference_and_shared_model()
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    worker = ctx.Process(target=_spawned_worker, args=(model, q))
    worker.start()
    x = tapelab.zeros(2, 3).t().share_memory_()
    q.put(x)
    worker.join()
    assert worker.exitcode == 0
    _train("torch", ref, "sgd")
    _assert_same_parameters(model, ref)
    assert x.tolist() == (torch.zeros(2, 3).t() + 5).tolist()


def test_share_memory_keeps_values_and_is_idempotent():
    t = tapelab.arange(6.0).reshape(2, 3).t()       # a non-contiguous view
    assert not t.is_shared()
    assert t.share_memory_() is t and t.is_shared()
    ptr = t.data_ptr()
    assert t.share_memory_().data_ptr() == ptr      # already shared: left in place
    assert t.tolist() == torch.arange(6.0).reshape(2, 3).t().tolist()
    t.add_(1)
    assert t.tolist() == (torch.arange(6.0).reshape(2, 3).t() + 1).tolist()
    assert tapelab.ones(0).share_memory_().shape == (0,)


# ------------------------------------------------------- sparse @ dense at GEMM sizes (pytorch/examples gcn, gat)
def test_sparse_times_dense_above_the_threaded_gemm_size():
    """gcn/gat's ``diag(...).to_sparse() @ features`` at 2 intra-op threads: kernels.gemm leaves a
    sparse COO operand to its own product (it sliced it into blocks once)."""
    torch.manual_seed(0)
    scale, feats = torch.rand(300), torch.rand(300, 200)
    want = torch.diag(scale).to_sparse() @ feats
    tapelab.set_num_threads(2)
    got = tapelab.diag(tapelab.tensor(scale.numpy())).to_sparse() @ tapelab.tensor(feats.numpy())
    assert got.numpy() == pytest.approx(want.numpy(), rel=1e-6)


# ---------------------------------------------------------------- BCELoss at saturated probabilities (siamese_network)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bce_gradient_at_saturated_probabilities_is_pytorchs(dtype):
    """siamese_network: sigmoid outputs of exactly 0 and 1 under BCELoss. PyTorch's gradient holds
    (1 - x) x at 1e-12 (finite), where the clamped logs' derivative gave 0 * inf = nan and the
    next optimizer step made every weight nan."""
    x = [0.0, 1.0, 1.0, 0.0, 0.5, 1e-30, 0.2]
    y = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.3]
    res = []
    for m in (torch, tapelab):
        xi = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
        yi = m.tensor(y, dtype=getattr(m, dtype), requires_grad=True)
        loss = m.nn.BCELoss()(xi, yi)
        loss.backward()
        res.append((loss.item(), xi.grad.tolist(), yi.grad.tolist()))
    (tl, tgx, tgy), (ll, lgx, lgy) = res
    assert ll == pytest.approx(tl, rel=1e-6)
    assert lgx == pytest.approx(tgx, rel=1e-6)
    assert lgy == pytest.approx(tgy, rel=1e-6, abs=1e-7)   # +-inf where x is 0 or 1, as torch


def test_bce_through_sigmoid_saturation_keeps_gradients_finite():
    z = tapelab.tensor([-200.0, 200.0, 50.0], requires_grad=True)
    tapelab.nn.functional.binary_cross_entropy(tapelab.sigmoid(z), tapelab.tensor([1.0, 0.0, 1.0])).backward()
    zt = torch.tensor([-200.0, 200.0, 50.0], requires_grad=True)
    torch.nn.functional.binary_cross_entropy(torch.sigmoid(zt), torch.tensor([1.0, 0.0, 1.0])).backward()
    assert z.grad.tolist() == zt.grad.tolist()


def test_bce_refuses_inputs_outside_the_unit_interval_as_pytorch():
    for value in (1.5, -0.1, float("nan")):
        for lib in (tapelab, torch):
            with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
                lib.nn.functional.binary_cross_entropy(lib.tensor([0.5, value]), lib.tensor([1.0, 0.0]))
