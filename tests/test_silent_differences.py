"""Silent differences from PyTorch found by running researchers' programs (issue 14): each case runs
the same code under torch and tapelab and compares what a program would observe."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl

MODS = [torch, tl]


def _names(pairs):
    return [n for n, _ in pairs]


# ---------------------------------------------------------------- reassigning a child keeps its place
def _net(m):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3)
            self.bn1 = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4, 2)
            self.scale = nn.Parameter(m.ones(1))
            self.shift = nn.Parameter(m.zeros(1))
            self.register_buffer("count", m.zeros(1))
            self.register_buffer("total", m.zeros(1))

    return Net()


def _reassign_view(m):
    nn = m.nn
    net = _net(m)
    net.conv1 = nn.Conv2d(1, 4, 3)          # the ResNet-on-grayscale edit
    net.scale = nn.Parameter(m.full((1,), 2.0))
    net.count = m.ones(1)
    seq = nn.Sequential(*list(net.children())[:-1])
    return dict(children=_names(net.named_children()),
                modules=_names(net.named_modules()),
                params=_names(net.named_parameters()),
                buffers=_names(net.named_buffers()),
                state=list(net.state_dict()),
                surgery=[type(c).__name__ for c in seq],
                first_in=seq[0].in_channels)


def test_reassigned_child_parameter_buffer_keep_their_place():
    assert _reassign_view(tl) == _reassign_view(torch)
    assert _reassign_view(tl)["children"] == ["conv1", "bn1", "fc"]


def test_reassigning_a_different_kind_follows_pytorchs_stores():
    """A module name rebound to a parameter leaves _modules; a parameter name refuses a module."""
    def view(m):
        net = _net(m)
        with pytest.raises(TypeError, match="as parameter 'shift'"):
            net.shift = m.nn.Linear(1, 1)
        net.fc = m.nn.Parameter(m.ones(2))   # module -> parameter: leaves _modules, joins the end
        net.bn1 = None                       # a child set to None keeps its slot
        net.bn1 = m.nn.BatchNorm2d(4)
        return (_names(net.named_children()), _names(net.named_parameters()), list(net.state_dict()))
    assert view(tl) == view(torch)


# ---------------------------------------------------------------- in-place activations differentiate
INPLACE = {
    "F.leaky_relu": lambda m, h: m.nn.functional.leaky_relu(h, 0.2, inplace=True),
    "F.elu": lambda m, h: m.nn.functional.elu(h, 1.3, inplace=True),
    "F.leaky_relu_": lambda m, h: m.nn.functional.leaky_relu_(h, 0.1),
    "F.elu_": lambda m, h: m.nn.functional.elu_(h),
    "nn.LeakyReLU": lambda m, h: m.nn.LeakyReLU(0.2, inplace=True)(h),
    "nn.ELU": lambda m, h: m.nn.ELU(inplace=True)(h),
    "nn.ReLU": lambda m, h: m.nn.ReLU(inplace=True)(h),
    "nn.ReLU6": lambda m, h: m.nn.ReLU6(inplace=True)(h * 4),
    "F.hardtanh_": lambda m, h: m.nn.functional.hardtanh_(h, -0.5, 0.5),
    "nn.SiLU": lambda m, h: m.nn.SiLU(inplace=True)(h),
    "nn.Mish": lambda m, h: m.nn.Mish(inplace=True)(h),
    "nn.Hardswish": lambda m, h: m.nn.Hardswish(inplace=True)(h * 3),
    "nn.Hardsigmoid": lambda m, h: m.nn.Hardsigmoid(inplace=True)(h * 3),
    "nn.SELU": lambda m, h: m.nn.SELU(inplace=True)(h),
    "nn.CELU": lambda m, h: m.nn.CELU(0.7, inplace=True)(h),
    "F.threshold_": lambda m, h: m.nn.functional.threshold_(h, 0.1, -2.0),
    "F.selu_": lambda m, h: m.nn.functional.selu_(h),
    "F.celu_": lambda m, h: m.nn.functional.celu_(h, 0.5),
}


def _inplace_case(m, kind, x0, w0, chain):
    x = m.tensor(x0, requires_grad=True)
    w = m.tensor(w0, requires_grad=True)
    h = x * w                                # a non-leaf, so the in-place op is allowed
    y = INPLACE[kind](m, h)
    if chain:                                # the written tensor used twice downstream
        y = y * y + y
    loss = (y * m.tensor(np.linspace(-1, 2, x0.size).reshape(x0.shape).astype(np.float32))).sum()
    loss.backward()
    return y.detach().numpy(), h.detach().numpy(), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("chain", [False, True])
@pytest.mark.parametrize("kind", list(INPLACE))
def test_inplace_activation_values_and_grads(kind, chain):
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((4, 5)).astype(np.float32)
    w0 = rng.standard_normal((4, 5)).astype(np.float32)
    want = _inplace_case(torch, kind, x0, w0, chain)
    got = _inplace_case(tl, kind, x0, w0, chain)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-6)


def test_inplace_activation_writes_into_its_input():
    for m in MODS:
        h = m.tensor([-1.0, 2.0], requires_grad=True) * 1.0
        for f in (lambda t: m.nn.functional.leaky_relu(t, 0.2, inplace=True),
                  lambda t: m.nn.functional.elu(t, inplace=True), m.nn.LeakyReLU(inplace=True)):
            v = h._version
            assert f(h) is h and h._version > v


def test_inplace_activation_in_a_gan_discriminator():
    """The DCGAN pattern: Conv -> LeakyReLU(0.2, inplace=True) twice, then backward to the weights."""
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)

    def run(m):
        nn = m.nn
        m.manual_seed(0)
        d = nn.Sequential(nn.Conv2d(3, 4, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True),
                          nn.Conv2d(4, 1, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True))
        return d

    dt, dl = run(torch), run(tl)
    dl.load_state_dict({k: tl.tensor(v.detach().numpy()) for k, v in dt.state_dict().items()})
    for d, m in ((dt, torch), (dl, tl)):
        d(m.tensor(x0)).sum().backward()
    for (n, pt), (_, pl) in zip(dt.named_parameters(), dl.named_parameters()):
        np.testing.assert_allclose(pl.grad.numpy(), pt.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)


def test_inplace_activation_on_a_leaf_refuses_like_pytorch():
    for m in MODS:
        x = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            m.nn.functional.leaky_relu(x, inplace=True)


# ---------------------------------------------------------------- batch norm checks its channels
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("layer,shape", [("BatchNorm2d", (2, 1, 4, 4)), ("BatchNorm1d", (3, 2)),
                                         ("BatchNorm1d", (3, 2, 5)), ("BatchNorm3d", (2, 1, 2, 2, 2))])
def test_batchnorm_channel_mismatch_raises(layer, shape, train):
    msgs = []
    for m in MODS:
        bn = getattr(m.nn, layer)(64).train(train)
        with pytest.raises(RuntimeError) as e:
            bn(m.zeros(*shape))
        msgs.append(str(e.value))
    assert "running_mean should contain" in msgs[1]
    assert msgs[1] == msgs[0]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("sizes", [(5, 5, None, None), (3, 5, None, None), (3, 3, 5, None), (3, 3, 3, 4),
                                   (None, None, 3, 5), (None, None, None, None)])
def test_batch_norm_functional_argument_checks(sizes, training):
    """running_mean/var, weight and bias each need one element per channel (dim 1 of the input);
    eval mode needs running statistics. Same exception type and text as PyTorch."""
    outcome = []
    for m in MODS:
        rm, rv, w, b = (None if n is None else m.ones(n) for n in sizes)
        try:
            m.nn.functional.batch_norm(m.ones(2, 3, 4), rm, rv, weight=w, bias=b, training=training)
            outcome.append(None)
        except RuntimeError as e:
            outcome.append(str(e))
    assert outcome[1] == outcome[0]


def test_batchnorm_without_running_stats_checks_weight():
    msgs = []
    for m in MODS:
        bn = m.nn.BatchNorm2d(8, track_running_stats=False)
        with pytest.raises(RuntimeError) as e:
            bn(m.zeros(2, 3, 4, 4))
        msgs.append(type(e.value))
    assert msgs[0] is msgs[1]


# ---------------------------------------------------------------- cross entropy with infinite logits
@pytest.mark.parametrize("logits", [[[float("inf"), 0.0, 1.0]], [[float("-inf"), 0.0, 1.0]],
                                    [[float("inf"), float("inf"), 0.0]], [[0.0, float("-inf"), 2.0]],
                                    [[float("nan"), 0.0, 1.0]]])
@pytest.mark.parametrize("target", [0, 1])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_non_finite_logits(logits, target, reduction):
    out = []
    for m in MODS:
        x = m.tensor(logits)
        out.append(m.nn.functional.cross_entropy(x, m.tensor([target]), reduction=reduction).numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("fn", ["log_softmax", "softmax"])
def test_softmax_family_non_finite(fn):
    x0 = [[float("inf"), 0.0, 1.0], [float("-inf"), 0.0, 1.0], [float("-inf")] * 3]
    out = [getattr(m.nn.functional, fn)(m.tensor(x0), dim=1).numpy() for m in MODS]
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6, equal_nan=True)   # nan exactly where torch's
