"""Session 35 (h2): ``huber_loss`` and ``smooth_l1_loss`` as one op each with their backward ops (values and
gradients PyTorch's bit for bit at one and two threads, including a delta/beta that is no power of 2, where
ATen's vector and scalar backward lambdas round differently, and arrays above the threads' grain), and
``F.hardtanh(inplace=True)`` in place as one node."""
import numpy as np
import pytest
import torch

import tapelab
from _threads import thread_counts

threads = thread_counts([1, 2])

SHAPES = [(64, 10), (3, 5, 7), (300, 257)]   # the last above kernels.PARALLEL_MIN: split over the threads


def _run(lib, fn, arrays, kwargs, g):
    ts = [lib.tensor(a).requires_grad_(True) for a in arrays]
    out = fn(lib)(*ts, **kwargs)
    out.backward(None if g is None else lib.tensor(g))
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts]


def _assert_bits(ours, theirs):
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))


LOSSES = {"huber": (lambda lib: lib.nn.functional.huber_loss, "delta", (1.0, 0.3, 1 / 9, 2.5)),
          "smooth_l1": (lambda lib: lib.nn.functional.smooth_l1_loss, "beta", (1.0, 0.3, 1 / 9, 2.5))}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("loss", list(LOSSES))
def test_robust_losses_are_torchs_bit_for_bit(loss, shape, reduction, threads):
    fn, name, values = LOSSES[loss]
    rng = np.random.default_rng(1)
    x, t = (rng.standard_normal(shape) * 2).astype(np.float32), (rng.standard_normal(shape) * 2).astype(np.float32)
    t.flat[:3] = x.flat[:3] + np.float32(values[1])   # differences on the bound itself
    g = rng.standard_normal(shape).astype(np.float32) if reduction == "none" else None
    for p in values:
        kw = {name: p, "reduction": reduction}
        _assert_bits(_run(tapelab, fn, (x, t), kw, g), _run(torch, fn, (x, t), kw, g))


@pytest.mark.parametrize("loss", list(LOSSES))
def test_robust_losses_noncontiguous_and_summed_none(loss):
    fn, name, _ = LOSSES[loss]
    rng = np.random.default_rng(2)
    x, t = (rng.standard_normal((9, 40)) * 2).astype(np.float32), (rng.standard_normal((40, 9)) * 2).astype(np.float32)
    res = []
    for lib in (tapelab, torch):
        a, b = lib.tensor(x).requires_grad_(True), lib.tensor(t).requires_grad_(True)
        out = fn(lib)(a, b.t(), reduction="none", **{name: 0.3})
        (out.sum() * 3).backward()   # g is one value broadcast
        res.append([out.detach().numpy(), a.grad.numpy(), b.grad.numpy()])
    _assert_bits(*res)


@pytest.mark.parametrize("loss", list(LOSSES))
def test_robust_losses_one_node_and_float64_second_derivatives(loss):
    fn, name, _ = LOSSES[loss]
    x = tapelab.randn(3, 4, requires_grad=True)
    out = fn(tapelab)(x, tapelab.randn(3, 4), **{name: 0.7})
    assert out.grad_fn.name() == fn(torch)(torch.randn(3, 4, requires_grad=True), torch.randn(3, 4)).grad_fn.name()
    a = tapelab.tensor(np.array([[-1.7, -0.4, 0.1], [0.6, 1.9, -2.4]]), requires_grad=True)
    b = tapelab.tensor(np.array([[0.2, 0.35, -0.5], [1.1, -0.8, 0.05]]), requires_grad=True)
    for reduction in ("mean", "sum", "none"):
        f = (lambda u, v: fn(tapelab)(u, v, reduction=reduction, **{name: 0.7}) * u)   # noqa: E731
        assert tapelab.autograd.gradcheck(f, (a, b))
        assert tapelab.autograd.gradgradcheck(f, (a, b))


def test_robust_losses_refuse_bad_parameters_as_torch():
    x = tapelab.randn(3)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        tapelab.nn.functional.huber_loss(x, x, delta=0.0)
    with pytest.raises(RuntimeError, match="negative values for beta"):
        tapelab.nn.functional.smooth_l1_loss(x, x, beta=-0.5)


def test_huber_weight_and_smooth_l1_beta_zero_as_torch():
    rng = np.random.default_rng(3)
    x, t, w = (rng.standard_normal((5, 6)).astype(np.float32) for _ in range(3))
    for reduction in ("mean", "sum", "none"):
        g = rng.standard_normal((5, 6)).astype(np.float32) if reduction == "none" else None
        for fn, kw in ((lambda lib: lib.nn.functional.huber_loss, {"delta": 0.3, "weight": w}),
                       (lambda lib: lib.nn.functional.smooth_l1_loss, {"beta": 0.0})):
            res = []
            for lib in (tapelab, torch):
                k = {key: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for key, v in kw.items()}
                res.append(_run(lib, lambda lib_: (lambda a, b, **kk: fn(lib_)(a, b, **kk, **k)), (x, t),
                                {"reduction": reduction}, g))
            _assert_bits(*res)


# ---------------------------------------------------------------- hardtanh in place
def _inplace_case(lib):
    # (no nan: ATen's vector and scalar backward lambdas disagree there, 0 against g; these 9 floats are all tail)
    x = lib.tensor(np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 6.0, 7.0, 4.0], np.float32), requires_grad=True)
    y = x * 1.5
    before = y._version
    out = lib.nn.functional.relu6(y, inplace=True)
    assert out is y and y._version == before + 1
    name = type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()
    y.backward(lib.arange(9.0))
    return name, len(y.grad_fn.next_functions), y.detach().numpy(), x.grad.numpy()


def test_hardtanh_in_place_is_one_node_as_torchs():
    ours, theirs = _inplace_case(tapelab), _inplace_case(torch)
    assert ours[:2] == theirs[:2] == ("HardtanhBackward0", 1)
    _assert_bits(ours[2:], theirs[2:])


def test_hardtanh_in_place_refuses_a_leaf_that_requires_grad():
    for lib in (tapelab, torch):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            lib.nn.functional.hardtanh(lib.randn(3, requires_grad=True), inplace=True)


def test_hardtanh_in_place_writes_into_the_input_without_grad():
    x = tapelab.tensor(np.array([-3.0, 0.25, 9.0], np.float32))
    with tapelab.no_grad():
        tapelab.nn.functional.hardtanh_(x, -1.0, 2.0)
    np.testing.assert_array_equal(x.numpy(), [-1.0, 0.25, 2.0])
    m = tapelab.nn.ReLU6(inplace=True)
    y = tapelab.tensor(np.array([-3.0, 0.25, 9.0], np.float32))
    assert m(y) is y and y.tolist() == [0.0, 0.25, 6.0]


# ---------------------------------------------------------------- label-smoothed cross-entropy's gradient
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(64, 10), (37, 1000), (5, 3)], ids=str)
def test_label_smoothed_cross_entropy_gradient_is_torchs_bit_for_bit(shape, reduction, weighted):
    """(N, C) float32 logits: the loop's gradient is PyTorch's composite's (``(1 - ls) nll + ls/C smooth``)."""
    torch.set_num_threads(1)
    tapelab.set_num_threads(1)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    t = rng.integers(0, shape[1], shape[0])
    t[1] = -100                                               # an ignored row
    w = rng.random(shape[1]).astype(np.float32) if weighted else None
    g = rng.standard_normal(shape[0]).astype(np.float32) if reduction == "none" else None
    grads = []
    for lib in (tapelab, torch):
        a = lib.tensor(x).requires_grad_(True)
        loss = lib.nn.functional.cross_entropy(a, lib.tensor(t), weight=None if w is None else lib.tensor(w),
                                               reduction=reduction, label_smoothing=0.15)
        loss.backward(None if g is None else lib.tensor(g))
        grads.append(a.grad.numpy())
    _assert_bits([grads[0]], [grads[1]])


@pytest.mark.parametrize("loss", list(LOSSES))
def test_robust_losses_under_vmap_and_grad_as_torch(loss):
    """A family rule each (the loss reduced per sample, its backward elementwise): torch's values and no
    per-slice warning."""
    import warnings
    fn, name, _ = LOSSES[loss]
    rng = np.random.default_rng(5)
    x, t = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    res = []
    for lib in (tapelab, torch):
        f = (lambda a, b: fn(lib)(a, b, **{name: 0.3}))   # noqa: E731
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res.append([lib.func.vmap(f)(lib.tensor(x), lib.tensor(t)).numpy(),
                        lib.func.vmap(lib.func.grad(f))(lib.tensor(x), lib.tensor(t)).numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", list(LOSSES))
def test_robust_losses_export_to_onnx(loss, reduction):
    """The ops' ONNX lowering (the composite had exported through its primitives): onnxruntime's values."""
    import io
    ort = pytest.importorskip("onnxruntime")
    fn, name, _ = LOSSES[loss]
    x, t = np.random.default_rng(6).standard_normal((2, 3, 4)).astype(np.float32)

    class M(tapelab.nn.Module):
        def forward(self, a, b):
            return fn(tapelab)(a, b, reduction=reduction, **{name: 0.3})
    buf = io.BytesIO()
    tapelab.onnx.export(M(), (tapelab.tensor(x), tapelab.tensor(t)), buf)
    session = ort.InferenceSession(buf.getvalue())
    got = session.run(None, {i.name: v for i, v in zip(session.get_inputs(), (x, t))})[0]
    np.testing.assert_allclose(got, M()(tapelab.tensor(x), tapelab.tensor(t)).numpy(), rtol=1e-6, atol=1e-7)
