"""PyTorch surface from issue 14, each against real torch: ``with device(...)`` as a context
manager for the default device, ``linalg.cholesky`` (the op itself is in tests/opdb/linalg.py),
and the ``nn.modules.*`` import paths."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
import torch

import tapelab
from tapelab._backend import simulated_cuda


# ---------------------------------------------------------------- with device(...)
@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_device_context_sets_default_for_factories_and_modules(m):
    with m.device("meta"):
        assert str(m.get_default_device()) == "meta"
        made = [m.zeros(2), m.randn(3), m.arange(3), m.tensor([1.0]), m.nn.Linear(2, 3).weight]
        assert [str(t.device) for t in made] == ["meta"] * 5
        assert m.ones(1, device="cpu").device.type == "cpu"   # an explicit device= wins
        with m.device("cpu"):
            assert str(m.get_default_device()) == "cpu" and m.ones(1).device.type == "cpu"
        assert str(m.get_default_device()) == "meta"
    assert str(m.get_default_device()) == "cpu" and m.zeros(1).device.type == "cpu"


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_device_context_restores_on_error_and_reentry(m):
    d = m.device("meta")
    with pytest.raises(ValueError):
        with d:
            raise ValueError("boom")
    assert str(m.get_default_device()) == "cpu"
    with d:
        with d:
            assert str(m.get_default_device()) == "meta"
        assert str(m.get_default_device()) == "meta"
    assert str(m.get_default_device()) == "cpu"


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_device_context_returns_the_device(m):
    with m.device("meta") as d:
        assert d == m.device("meta")


def test_device_context_inside_set_default_device():
    tapelab.set_default_device("meta")
    try:
        with tapelab.device("cpu"):
            assert tapelab.zeros(1).device.type == "cpu"
        assert tapelab.get_default_device() == tapelab.device("meta")
    finally:
        tapelab.set_default_device(None)
    assert tapelab.get_default_device() == tapelab.device("cpu")


def test_device_context_cuda_on_simulated_device():
    with simulated_cuda(0):
        with tapelab.device("cuda"):
            assert tapelab.get_default_device() == tapelab.device("cuda:0")
            assert tapelab.zeros(2).device == tapelab.device("cuda:0")
            assert tapelab.nn.Linear(2, 2).weight.device.type == "cuda"
    assert tapelab.get_default_device() == tapelab.device("cpu")


# ---------------------------------------------------------------- cholesky
def _spd(*batch, n=4, seed=0):
    b = np.random.default_rng(seed).normal(size=(*batch, n, n))
    return b @ np.swapaxes(b, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_values_and_grads_match_torch(upper):
    a = _spd(2, 3)
    g = np.random.default_rng(1).normal(size=a.shape)
    x, y = tapelab.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    lx, ly = tapelab.linalg.cholesky(x, upper=upper), torch.linalg.cholesky(y, upper=upper)
    np.testing.assert_allclose(lx.detach().numpy(), ly.detach().numpy(), atol=1e-12)
    (lx * tapelab.tensor(g)).sum().backward()
    (ly * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), atol=1e-10)


def test_cholesky_gradcheck_and_gradgradcheck_float64():
    x = tapelab.tensor(_spd(2, n=3) / 2, requires_grad=True)
    f = lambda a: tapelab.linalg.cholesky(a + a.mT)   # noqa: E731  (symmetric input, as PyTorch's wrapper)
    assert tapelab.autograd.gradcheck(f, (x,))
    assert tapelab.autograd.gradgradcheck(f, (x,))


def test_linalg_error_is_a_runtime_error_like_torch():
    assert issubclass(torch.linalg.LinAlgError, RuntimeError)
    assert issubclass(tapelab.linalg.LinAlgError, RuntimeError)
    bad = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 1.0]]])
    msgs = []
    for m in (torch, tapelab):
        with pytest.raises(m.linalg.LinAlgError) as info:
            m.linalg.cholesky(m.tensor(bad))
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_cholesky_deprecated_name_warns_and_matches(monkeypatch):
    from tapelab.ops import _util
    monkeypatch.setattr(_util, "_warned", set())   # once per process, as PyTorch's TORCH_WARN_ONCE
    a = _spd(n=3)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        u = tapelab.cholesky(tapelab.tensor(a), upper=True)
    with warnings.catch_warnings():   # torch warns once per process (TORCH_WARN_ONCE): not asserted
        warnings.simplefilter("ignore")
        ut = torch.cholesky(torch.tensor(a), upper=True)
    np.testing.assert_allclose(u.numpy(), ut.numpy(), atol=1e-12)


# ---------------------------------------------------------------- nn.modules.* import paths
PATHS = {
    "activation": ["MultiheadAttention", "ReLU", "GELU", "Softmax", "Tanh"],
    "linear": ["Linear", "Identity", "Bilinear", "NonDynamicallyQuantizableLinear"],
    "conv": ["Conv1d", "Conv2d", "ConvTranspose2d"],
    "batchnorm": ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"],
    "instancenorm": ["InstanceNorm1d", "InstanceNorm2d"],
    "loss": ["MSELoss", "CrossEntropyLoss", "NLLLoss", "BCEWithLogitsLoss"],
    "dropout": ["Dropout"],
    "pooling": ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"],
    "normalization": ["LayerNorm", "GroupNorm"],
    "rnn": ["RNN", "LSTM", "GRU", "LSTMCell"],
    "transformer": ["Transformer", "TransformerEncoder", "TransformerEncoderLayer", "TransformerDecoderLayer"],
    "sparse": ["Embedding"],
    "container": ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"],
    "flatten": ["Flatten", "Unflatten"],
    "padding": ["ZeroPad2d", "ConstantPad1d", "ReflectionPad2d", "ReplicationPad1d"],
    "upsampling": ["Upsample", "UpsamplingNearest2d"],
    "pixelshuffle": ["PixelShuffle", "PixelUnshuffle"],
    "distance": ["PairwiseDistance", "CosineSimilarity"],
    "module": ["Module"],
}


@pytest.mark.parametrize("sub", sorted(PATHS))
def test_nn_modules_paths_like_torch(sub):
    tm = importlib.import_module(f"torch.nn.modules.{sub}")
    lm = importlib.import_module(f"tapelab.nn.modules.{sub}")
    for name in PATHS[sub]:
        assert hasattr(tm, name), (sub, name)   # the path is PyTorch's
        cls = getattr(lm, name)
        assert cls is getattr(tapelab.nn.modules, name, None) or cls is getattr(tapelab.nn, name, None) \
            or name == "NonDynamicallyQuantizableLinear", (sub, name)


def test_multihead_attention_and_its_out_proj_from_torch_paths():
    from tapelab.nn.modules.activation import MultiheadAttention
    from tapelab.nn.modules.linear import Linear, NonDynamicallyQuantizableLinear
    assert MultiheadAttention is tapelab.nn.MultiheadAttention
    assert issubclass(NonDynamicallyQuantizableLinear, Linear)
    mha = MultiheadAttention(8, 2)
    assert type(mha.out_proj) is NonDynamicallyQuantizableLinear
    assert type(mha.out_proj).__module__ == torch.nn.MultiheadAttention(8, 2).out_proj.__module__.replace(
        "torch", "tapelab")
