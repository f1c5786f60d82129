"""The torch.nn layers of the coverage push (defined in engine/nn/modules/ at PyTorch's paths, the Lazy*
layers, nn.attention, nn.common_types, nn.factory_kwargs): each built in both libraries with torch's weights copied in,
then outputs and the gradients of inputs and parameters compared."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab
from _against_torch import compare

R = np.random.default_rng(0)


def a(*shape):
    return R.standard_normal(shape)


def same(make, *inputs, train=True, grad=True, call=lambda mod, *x: mod(*x)):
    """``make(m)`` builds the layer in library ``m``; torch's state is copied into tapelab's."""
    t_mod, l_mod = make(torch).double(), make(tapelab).double()
    state = {k: tapelab.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()}
    l_mod.load_state_dict(state)
    t_mod.train(train), l_mod.train(train)
    mods = {torch: t_mod, tapelab: l_mod}

    def fn(m, *xs):
        return call(mods[m], *xs)
    compare(fn, *inputs, grad=grad)
    if grad:
        for (name, tp), (_, lp) in zip(t_mod.named_parameters(), l_mod.named_parameters()):
            if tp.grad is not None:
                np.testing.assert_allclose(lp.grad.numpy(), tp.grad.numpy(), atol=1e-6, err_msg=name)


POOL, IMG, SEQ = a(2, 3, 5, 6, 7), a(2, 3, 7, 8), a(2, 3, 9)
U2 = R.uniform(size=(2, 3, 2))

LAYERS = {
    "MaxPool3d": (lambda m: m.nn.MaxPool3d(2, 1, 1, return_indices=True), POOL),
    "AvgPool3d": (lambda m: m.nn.AvgPool3d(3, 2, 1, ceil_mode=True), POOL),
    "AdaptiveAvgPool3d": (lambda m: m.nn.AdaptiveAvgPool3d((2, None, 3)), POOL),
    "AdaptiveMaxPool3d": (lambda m: m.nn.AdaptiveMaxPool3d(3), POOL),
    "LPPool1d": (lambda m: m.nn.LPPool1d(2, 3, 2), SEQ),
    "LPPool2d": (lambda m: m.nn.LPPool2d(1.5, (2, 3)), IMG),
    "LPPool3d": (lambda m: m.nn.LPPool3d(3, 2), POOL),
    "FractionalMaxPool2d": (lambda m: m.nn.FractionalMaxPool2d(2, output_size=(4, 5),
                                                               _random_samples=m.tensor(U2)), IMG),
    "ReflectionPad3d": (lambda m: m.nn.ReflectionPad3d((1, 2, 0, 1, 2, 1)), POOL),
    "ReplicationPad3d": (lambda m: m.nn.ReplicationPad3d(2), POOL),
    "ZeroPad3d": (lambda m: m.nn.ZeroPad3d((1, 0, 2, 1, 0, 1)), POOL),
    "CircularPad1d": (lambda m: m.nn.CircularPad1d((2, 1)), SEQ),
    "CircularPad2d": (lambda m: m.nn.CircularPad2d(1), IMG),
    "CircularPad3d": (lambda m: m.nn.CircularPad3d((1, 1, 2, 0, 1, 2)), POOL),
    "ChannelShuffle": (lambda m: m.nn.ChannelShuffle(3), IMG),
    "LocalResponseNorm": (lambda m: m.nn.LocalResponseNorm(2, 0.1), IMG),
    "CrossMapLRN2d": (lambda m: m.nn.CrossMapLRN2d(3, 0.5, 0.75, 2.0), a(2, 6, 3, 3)),
    "RReLU_eval": (lambda m: m.nn.RReLU(0.1, 0.2), IMG, False),
    "Softmax2d": (lambda m: m.nn.Softmax2d(), IMG),
    "Unfold": (lambda m: m.nn.Unfold(2, padding=1, stride=2), IMG),
    "Fold": (lambda m: m.nn.Fold((4, 5), 2), a(2, 12, 12)),
    "ConvTranspose3d": (lambda m: m.nn.ConvTranspose3d(3, 4, 2, stride=2, padding=1, groups=1), POOL),
    "SyncBatchNorm": (lambda m: m.nn.SyncBatchNorm(3), IMG),
    "SyncBatchNorm_5d": (lambda m: m.nn.SyncBatchNorm(3, affine=False), POOL),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_torch(name):
    make, x, *train = LAYERS[name]
    same(make, x, train=train[0] if train else True)


def test_layers_with_more_inputs():
    ids = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    same(lambda m: m.nn.EmbeddingBag(10, 3, mode="sum"), ids, np.array([0, 3]), grad=True,
         call=lambda mod, i, o: mod(type(mod.weight)(i) if False else i, o))
    same(lambda m: m.nn.EmbeddingBag(10, 3, mode="max", padding_idx=2), ids.reshape(2, 4))
    x = a(4, 5)
    same(lambda m: m.nn.MultiMarginLoss(p=2, margin=0.7), x, np.array([1, 0, 4, 2]))
    same(lambda m: m.nn.MultiLabelMarginLoss(reduction="sum"), x, np.array([[1, 2, -1, 0, 0]] * 4))
    same(lambda m: m.nn.TripletMarginWithDistanceLoss(margin=0.5, swap=True), a(3, 4), a(3, 4), a(3, 4))
    same(lambda m: m.nn.CTCLoss(blank=4, zero_infinity=True), a(6, 2, 5),
         np.array([[1, 2, 2], [3, 1, 0]]), np.array([6, 5]), np.array([3, 2]),
         call=lambda mod, lp, *rest: mod(lp.log_softmax(2), *rest))
    same(lambda m: m.nn.NLLLoss2d(), a(2, 3, 4, 4), R.integers(0, 3, size=(2, 4, 4)))
    same(lambda m: m.nn.LinearCrossEntropyLoss(4, 6, bias=True, label_smoothing=0.05), a(3, 4), np.array([5, 0, 2]))
    unpool_in = a(2, 3, 4, 6)

    def unpool(mod, x):
        pooled, idx = (torch if isinstance(x, torch.Tensor) else tapelab).nn.functional.max_pool2d(x, 2, return_indices=True)
        return mod(pooled, idx)
    same(lambda m: m.nn.MaxUnpool2d(2), unpool_in, call=unpool)


def test_adaptive_log_softmax_with_loss():
    x, target = a(6, 8), np.array([0, 3, 5, 9, 11, 2])
    make = lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(8, 12, [4, 8], div_value=2.0, head_bias=True)  # noqa: E731
    same(make, x, target, call=lambda mod, x, t: tuple(mod(x, t)))
    same(make, x, grad=False, call=lambda mod, x: (mod.log_prob(x), mod.predict(x)))


def test_container_warns_and_registers():
    for m in (torch, tapelab):
        with pytest.warns(FutureWarning, match="nn.Container` is deprecated"):
            c = m.nn.Container(a=m.nn.Linear(2, 3), b=m.nn.ReLU())
        assert [n for n, _ in c.named_children()] == ["a", "b"]


def test_convert_sync_batchnorm_keeps_tensors():
    for m in (torch, tapelab):
        net = m.nn.Sequential(m.nn.Conv2d(3, 4, 3), m.nn.BatchNorm2d(4), m.nn.Sequential(m.nn.BatchNorm1d(5)))
        w = net[1].weight
        out = m.nn.SyncBatchNorm.convert_sync_batchnorm(net)
        assert type(out[1]).__name__ == "SyncBatchNorm" and type(out[2][0]).__name__ == "SyncBatchNorm"
        assert out[1].weight is w and type(out[0]).__name__ == "Conv2d"


@pytest.mark.parametrize("name,args,shape", [
    ("LazyLinear", (5,), (3, 4)),
    ("LazyConv1d", (4, 3), (2, 3, 8)),
    ("LazyConv2d", (6, 3, 1, 1, 1, 2), (2, 4, 6, 6)),
    ("LazyConv3d", (2, 2), (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", (4, 3, 2), (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), (3, 5, 5)),
    ("LazyConvTranspose3d", (2, 2, 2), (1, 3, 3, 3, 3)),
    ("LazyBatchNorm1d", (), (4, 3)),
    ("LazyBatchNorm2d", (), (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), (2, 3, 5)),
    ("LazyInstanceNorm2d", (1e-5, 0.1, True, True), (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), (2, 3, 2, 2, 2)),
])
def test_lazy_layers_infer_shapes_and_become_eager(name, args, shape):
    mods = {m: getattr(m.nn, name)(*args).double() for m in (torch, tapelab)}
    for m, mod in mods.items():
        assert type(mod.weight if hasattr(mod, "weight") and mod.weight is not None else
                    m.nn.UninitializedParameter(requires_grad=False)).__name__ in (
                        "UninitializedParameter", "Parameter")
    x = a(*shape)
    outs = {}
    for m, mod in mods.items():
        y = mod(m.tensor(x))
        outs[m] = y
        assert type(mod).__name__ == name[4:], type(mod).__name__
        assert not hasattr(mod, "_lazy_hook")
    t_mod, l_mod = mods[torch], mods[tapelab]
    assert sorted((k, tuple(v.shape)) for k, v in t_mod.state_dict().items()) == \
        sorted((k, tuple(v.shape)) for k, v in l_mod.state_dict().items())
    l_mod.load_state_dict({k: tapelab.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
    l_mod.train(), t_mod.train()
    np.testing.assert_allclose(l_mod(tapelab.tensor(x)).detach().numpy(), t_mod(torch.tensor(x)).detach().numpy(),
                               atol=1e-10)


def test_uninitialized_tensors_materialize_in_place():
    for m in (torch, tapelab):
        p = m.nn.UninitializedParameter()
        p.materialize((2, 3))
        assert type(p) is m.nn.Parameter and tuple(p.shape) == (2, 3) and p.requires_grad
        b = m.nn.UninitializedBuffer()
        b.materialize(4, dtype=m.float64)
        assert type(b) is m.Tensor and tuple(b.shape) == (4,) and b.dtype == m.float64


def test_attention_common_types_and_factory_kwargs():
    from tapelab.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention import SDPBackend as TB
    assert {k: v.value for k, v in SDPBackend.__members__.items()} == {k: int(v) for k, v in TB.__members__.items()}
    q = tapelab.randn(1, 2, 4, 8)
    with sdpa_kernel([SDPBackend.MATH]):
        out = tapelab.nn.functional.scaled_dot_product_attention(q, q, q)
    assert tuple(out.shape) == (1, 2, 4, 8)
    assert tapelab.nn.common_types._size_2_t is not None
    kw = {"device": None, "dtype": tapelab.float32, "factory_kwargs": {"memory_format": None}}
    tkw = {"device": None, "dtype": torch.float32, "factory_kwargs": {"memory_format": None}}
    assert set(tapelab.nn.factory_kwargs(kw)) == set(torch.nn.factory_kwargs(tkw))
    for m in (torch, tapelab):
        with pytest.raises(TypeError, match="unexpected kwargs"):
            m.nn.factory_kwargs({"foo": 1})
        with pytest.raises(TypeError, match="specified twice"):
            m.nn.factory_kwargs({"device": "cpu", "factory_kwargs": {"device": "cpu"}})


def test_rrelu_training_is_random_within_bounds():
    layer = tapelab.nn.RReLU(0.1, 0.3)
    x = -tapelab.rand(1000) - 0.1
    slope = layer(x) / x
    assert 0.1 <= slope.min().item() and slope.max().item() <= 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert repr(layer) == repr(torch.nn.RReLU(0.1, 0.3))
