"""Names the suite never executed before issue 16, each run against PyTorch: ``Tensor.new_*``,
``empty_like``/``randn_like``/``randint_like``, ``linalg.matrix_norm``, ``norm(p='fro')``,
``linalg.vecdot``, ``checkpoint_sequential``, the norm layers' ``reset_*``, the 3-D conv and norm
modules; and unit tests of the ``TapeView`` and ``TensorView`` widgets."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab import nn

RNG = np.random.default_rng(16)


def _pair(*shape, grad: bool = False, dtype=np.float64):
    a = RNG.standard_normal(shape).astype(dtype)
    return (tapelab.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad))


def _close(ours, theirs, **kw):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12, **kw)


# ---------------------------------------------------------------- creation
@pytest.mark.parametrize("call", [
    lambda m, x: x.new_zeros(2, 3), lambda m, x: x.new_ones((4,)), lambda m, x: x.new_full((2, 2), 7.5),
    lambda m, x: x.new_tensor([[1, 2], [3, 4]]), lambda m, x: x.new_zeros(3, dtype=m.int64),
    lambda m, x: x.new_tensor([1.5, 2.5], requires_grad=True), lambda m, x: x.new_ones(2, dtype=m.bool),
], ids=["new_zeros", "new_ones", "new_full", "new_tensor", "new_zeros_int64", "new_tensor_grad", "new_ones_bool"])
def test_new_factories_match_torch(call):
    ours, theirs = (call(m, x) for m, x in ((tapelab, tapelab.ones(2, dtype=tapelab.float64)),
                                              (torch, torch.ones(2, dtype=torch.float64))))
    assert tuple(ours.shape) == tuple(theirs.shape) and str(ours.dtype) == str(theirs.dtype).replace("torch", "tapelab")
    assert ours.requires_grad == theirs.requires_grad
    assert ours.tolist() == theirs.tolist()


def test_new_empty_takes_shape_and_dtype_from_self():
    for m in (tapelab, torch):
        e = m.zeros(3, dtype=m.float64).new_empty(2, 5)
        assert tuple(e.shape) == (2, 5) and e.dtype == m.float64 and not e.requires_grad


@pytest.mark.parametrize("name", ["empty_like", "randn_like", "randint_like"])
def test_like_factories_shape_dtype_and_values(name):
    args = (0, 5) if name == "randint_like" else ()
    for m in (tapelab, torch):
        m.manual_seed(0)
        x = m.zeros(200, 30, dtype=m.float64)
        out = getattr(m, name)(x, *args)
        assert tuple(out.shape) == (200, 30) and out.dtype == m.float64 and not out.requires_grad
        v = out.numpy()
        if name == "randint_like":
            assert set(np.unique(v)) == {0.0, 1.0, 2.0, 3.0, 4.0}
        elif name == "randn_like":
            assert abs(v.mean()) < 0.1 and abs(v.std() - 1) < 0.1     # 6000 draws of N(0, 1)
    assert tapelab.randint_like(tapelab.zeros(3, dtype=tapelab.int32), 7).dtype == tapelab.int32
    assert tapelab.randn_like(tapelab.zeros(2), dtype=tapelab.float64).dtype == tapelab.float64


# ---------------------------------------------------------------- norms and vecdot
@pytest.mark.parametrize("shape, dim, keepdim", [((3, 4), (-2, -1), False), ((2, 3, 4), (-2, -1), True),
                                                 ((2, 3, 4), (0, 2), False)])
def test_matrix_norm_fro_and_its_gradient(shape, dim, keepdim):
    a, b = _pair(*shape, grad=True)
    ours, theirs = tapelab.linalg.matrix_norm(a, dim=dim, keepdim=keepdim), torch.linalg.matrix_norm(b, dim=dim,
                                                                                                    keepdim=keepdim)
    _close(ours, theirs)
    ours.sum().backward()
    theirs.sum().backward()
    _close(a.grad, b.grad)


def test_matrix_norm_errors_like_torch():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        tapelab.linalg.matrix_norm(tapelab.ones(3))
    with pytest.raises(RuntimeError):
        torch.linalg.matrix_norm(torch.ones(3))


@pytest.mark.parametrize("call", [lambda m, x: m.norm(x, p="fro"), lambda m, x: m.norm(x, p="fro", dim=1),
                                  lambda m, x: x.norm(p="fro", dim=(0, 1), keepdim=True),
                                  lambda m, x: m.linalg.norm(x, ord="fro"), lambda m, x: m.linalg.norm(x)],
                         ids=["norm_fro", "norm_fro_dim", "method_fro_keepdim", "linalg_norm_fro", "linalg_norm"])
def test_norm_fro_matches_torch(call):
    a, b = _pair(3, 5, grad=True)
    ours, theirs = call(tapelab, a), call(torch, b)
    assert tuple(ours.shape) == tuple(theirs.shape)
    _close(ours, theirs)
    ours.sum().backward()
    theirs.sum().backward()
    _close(a.grad, b.grad)


@pytest.mark.parametrize("sa, sb, dim", [((4, 3), (4, 3), -1), ((2, 4, 3), (4, 3), -1), ((4, 3), (4, 3), 0)])
def test_vecdot_matches_torch(sa, sb, dim):
    (a, ta), (b, tb) = _pair(*sa, grad=True), _pair(*sb, grad=True)
    ours, theirs = tapelab.linalg.vecdot(a, b, dim=dim), torch.linalg.vecdot(ta, tb, dim=dim)
    _close(ours, theirs)
    ours.sum().backward()
    theirs.sum().backward()
    _close(a.grad, ta.grad)
    _close(b.grad, tb.grad)


# ---------------------------------------------------------------- checkpoint_sequential
def _mlp(m, seed=3):
    m.manual_seed(seed)
    return m.nn.Sequential(m.nn.Linear(6, 8), m.nn.Tanh(), m.nn.Linear(8, 8), m.nn.ReLU(), m.nn.Linear(8, 2)).double()


@pytest.mark.parametrize("segments", [1, 2, 5])
def test_checkpoint_sequential_equals_the_plain_forward_and_backward(segments):
    from tapelab.utils.checkpoint import checkpoint_sequential

    ours, plain = _mlp(tapelab), _mlp(tapelab)
    plain.load_state_dict(ours.state_dict())
    x = tapelab.tensor(RNG.standard_normal((4, 6)), requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out = checkpoint_sequential(ours, segments, x, use_reentrant=False)
    want = plain(x2)
    _close(out, want)
    out.pow(2).sum().backward()
    want.pow(2).sum().backward()
    _close(x.grad, x2.grad)
    for p, q in zip(ours.parameters(), plain.parameters()):
        _close(p.grad, q.grad)


# ---------------------------------------------------------------- norm layers: reset_*
@pytest.mark.parametrize("name, args, shape", [("BatchNorm1d", (4,), (8, 4)), ("BatchNorm2d", (3,), (4, 3, 5, 5)),
                                               ("InstanceNorm1d", (4,), (2, 4, 9)),
                                               ("GroupNorm", (2, 4), (3, 4, 5)), ("LayerNorm", (5,), (3, 5))])
def test_norm_layers_reset_like_torch(name, args, shape):
    kw = {"track_running_stats": True, "affine": True} if name.startswith("InstanceNorm") else {}
    state = {}
    for m in (tapelab, torch):
        layer = getattr(m.nn, name)(*args, **kw).double()
        opt = m.optim.SGD(layer.parameters(), lr=0.5)
        layer(m.tensor(np.linspace(-2, 3, int(np.prod(shape))).reshape(shape))).pow(2).sum().backward()
        opt.step()
        if hasattr(layer, "reset_running_stats"):
            layer.reset_running_stats()
        changed = {k: v.detach().numpy().copy() for k, v in layer.state_dict().items()}
        layer.reset_parameters()
        state[m] = (changed, {k: v.detach().numpy().copy() for k, v in layer.state_dict().items()})
    for ours, theirs in zip(state[tapelab], state[torch]):
        assert ours.keys() == theirs.keys()
        for k in ours:
            np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-12, atol=1e-12, err_msg=k)


# ---------------------------------------------------------------- 3-D modules
@pytest.mark.parametrize("make, shape", [
    (lambda m: m.nn.Conv3d(2, 3, kernel_size=(2, 3, 3), stride=(1, 2, 1), padding=1, bias=True), (2, 2, 4, 6, 5)),
    (lambda m: m.nn.Conv3d(4, 4, 3, groups=2, dilation=(1, 1, 2), padding="same"), (1, 4, 5, 5, 7)),
    (lambda m: m.nn.ConvTranspose3d(2, 3, 2, stride=2), (1, 2, 3, 3, 2)),
    (lambda m: m.nn.BatchNorm3d(3), (2, 3, 2, 3, 4)),
    (lambda m: m.nn.InstanceNorm3d(3, affine=True), (2, 3, 2, 3, 4)),
    (lambda m: m.nn.MaxPool3d(2), (1, 2, 4, 4, 4)),
    (lambda m: m.nn.AvgPool3d((2, 1, 2)), (1, 2, 4, 3, 4)),
], ids=["Conv3d", "Conv3d_groups_same", "ConvTranspose3d", "BatchNorm3d", "InstanceNorm3d", "MaxPool3d",
        "AvgPool3d"])
def test_3d_modules_forward_and_backward_match_torch(make, shape):
    theirs = make(torch).double()
    ours = make(tapelab).double()
    ours.load_state_dict({k: tapelab.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    a, b = _pair(*shape, grad=True)
    out, want = ours(a), theirs(b)
    _close(out, want)
    g = RNG.standard_normal(tuple(want.shape))
    out.backward(tapelab.tensor(g))
    want.backward(torch.tensor(g))
    _close(a.grad, b.grad)
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        _close(p.grad, q.grad, err_msg=n)
    for k, v in theirs.state_dict().items():      # running statistics too
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-10, err_msg=k)


# ---------------------------------------------------------------- the TapeView and TensorView widgets
def test_tape_view_from_a_tape_and_live_deltas():
    pytest.importorskip("anywidget")
    from tapelab.widgets import MIME, TapeView
    from tapelab.widgets.live import LiveTape

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    x = tapelab.randn(2, 3)
    with tapelab.tape() as t:
        model(x).sum().backward()
    v = TapeView(t, title="mlp")
    g = v.graph
    assert g["meta"]["title"] == "mlp" and g["meta"]["forward"] == t.counts()["forward"]
    ops = [n["op"] for n in g["nodes"] if n["kind"] == "forward"]
    assert "relu" in ops and any(n["kind"] == "backward" for n in g["nodes"])
    assert {grp["path"] for grp in g["groups"]} >= {"0", "1"}
    assert "relu" in v.to_dot() and v.to_dot().startswith("digraph")
    data = v._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data[MIME]["nodes"] and "mlp" in data["text/html"]
    assert TapeView.from_tape(t, title="mlp").graph["nodes"] == g["nodes"]
    # a live view: the recorder's deltas go out as custom messages, running is synced
    live = TapeView(title="live")
    sent = []
    live.send = sent.append
    live.set_running(True)
    with LiveTape([live.send_delta]) as rec:
        model(x).sum().backward()
    live.set_running(False)
    deltas = [m for m in sent if m["type"] == "delta"]
    assert sent[0] == {"type": "running", "running": True} and sent[-1] == {"type": "running", "running": False}
    assert sum(len(d["nodes"]) for d in deltas) == len(rec.graph()["nodes"]) > 0
    assert not live.running
    with pytest.raises(TypeError, match="TapeView takes"):
        TapeView(42)


def test_tensor_view_summary_against_numpy():
    pytest.importorskip("anywidget")
    from tapelab.widgets import TensorView

    a = np.array([[1.0, -2.0, np.nan], [4.0, np.inf, 0.5]], dtype=np.float32)
    v = TensorView(tapelab.tensor(a), name="w")
    d = v.data
    finite = a[np.isfinite(a)].astype(np.float64)
    assert d["name"] == "w" and d["shape"] == [2, 3] and d["dtype"] == "float32"
    s = d["stats"]
    assert (s["min"], s["max"], s["nan"], s["inf"]) == (finite.min(), finite.max(), 1, 1)
    assert s["mean"] == pytest.approx(finite.mean()) and s["std"] == pytest.approx(finite.std(ddof=1))
    html = v._repr_mimebundle_()
    html = (html[0] if isinstance(html, tuple) else html)["text/html"]
    assert "w" in html and "float32" in html
    v.show(tapelab.arange(6.0).reshape(2, 3), name="r")
    assert v.data["name"] == "r" and v.data["stats"]["max"] == 5.0
    assert TensorView().data == {}
