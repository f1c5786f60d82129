"""Every nn layer against PyTorch with identical weights: outputs, gradients w.r.t. inputs and
every parameter, buffers, in train and eval mode; default initialisation statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab._backend import simulated_cuda

RNG = np.random.default_rng(0)


def arr(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


def to_tl(x, grad=False):
    if isinstance(x, np.ndarray):
        return tl.tensor(x, requires_grad=grad and x.dtype.kind == "f")
    return x


def to_torch(x, grad=False):
    if isinstance(x, np.ndarray):
        return torch.tensor(x, requires_grad=grad and x.dtype.kind == "f")
    return x


def pair(build, dtype="float64"):
    """The same layer in both libraries, tapelab's loaded with torch's state dict."""
    tm = build(torch.nn)
    lm = build(tl.nn)
    if dtype == "float64":
        tm, lm = tm.double(), lm.double()
    lm.load_state_dict({k: tl.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    return tm, lm


def close(a, b, tol=1e-9, what=""):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def parity(tm, lm, *inputs, tol=1e-9):
    """Forward, backward of a random cotangent, and every gradient and buffer compared."""
    tin = [to_torch(x, True) for x in inputs]
    lin = [to_tl(x, True) for x in inputs]
    tout, lout = tm(*tin), lm(*lin)
    if isinstance(tout, tuple):
        tout, lout = tout[0], lout[0]
    close(lout, tout, tol, "output")
    if tout.requires_grad:
        g = RNG.standard_normal(tuple(tout.shape))
        tout.backward(torch.tensor(g, dtype=tout.dtype))
        lout.backward(tl.tensor(g).to(lout.dtype))
        for i, (a, b) in enumerate(zip(lin, tin)):
            if isinstance(b, torch.Tensor) and b.requires_grad:
                close(a.grad, b.grad, tol, f"grad of input {i}")
        tparams = dict(tm.named_parameters())
        for name, p in lm.named_parameters():
            if tparams[name].grad is None:
                assert p.grad is None, name
            else:
                close(p.grad, tparams[name].grad, tol, f"grad of {name}")
    tbufs = dict(tm.named_buffers())
    for name, b in lm.named_buffers():
        close(b, tbufs[name], tol, f"buffer {name}")
    return lout, tout


LAYERS = {
    "linear": (lambda nn: nn.Linear(5, 3), [(4, 5)]),
    "linear_3d_nobias": (lambda nn: nn.Linear(5, 3, bias=False), [(2, 4, 5)]),
    "bilinear": (lambda nn: nn.Bilinear(3, 4, 5), [(6, 3), (6, 4)]),
    "identity": (lambda nn: nn.Identity(7), [(2, 3)]),
    "flatten": (lambda nn: nn.Flatten(), [(2, 3, 4, 5)]),
    "flatten_mid": (lambda nn: nn.Flatten(1, 2), [(2, 3, 4, 5)]),
    "unflatten": (lambda nn: nn.Unflatten(1, (2, 3)), [(4, 6)]),
    "conv1d": (lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding=1), [(2, 3, 10)]),
    "conv1d_dilated_groups": (lambda nn: nn.Conv1d(4, 6, 2, dilation=3, groups=2), [(2, 4, 11)]),
    "conv2d": (lambda nn: nn.Conv2d(3, 6, 3, padding=1), [(2, 3, 8, 8)]),
    "conv2d_unbatched": (lambda nn: nn.Conv2d(3, 6, 3), [(3, 7, 6)]),
    "conv2d_rect": (lambda nn: nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2),
                                         groups=2), [(2, 4, 9, 8)]),
    "conv2d_same_even": (lambda nn: nn.Conv2d(2, 3, 4, padding="same", bias=False), [(2, 2, 7, 6)]),
    "conv2d_same_dilated": (lambda nn: nn.Conv2d(2, 3, 3, padding="same", dilation=2), [(1, 2, 7, 6)]),
    "conv2d_valid_depthwise": (lambda nn: nn.Conv2d(4, 8, 3, padding="valid", groups=4), [(2, 4, 6, 6)]),
    "conv2d_stride3": (lambda nn: nn.Conv2d(3, 2, 2, stride=3, padding=2), [(2, 3, 8, 7)]),
    "conv_transpose2d": (lambda nn: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
                         [(2, 4, 5, 4)]),
    "conv_transpose2d_groups": (lambda nn: nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2), groups=2,
                                                              dilation=2, bias=False), [(2, 4, 5, 4)]),
    "conv_transpose1d": (lambda nn: nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1), [(2, 3, 6)]),
    "maxpool1d": (lambda nn: nn.MaxPool1d(3, 2, 1), [(2, 3, 11)]),
    "maxpool2d": (lambda nn: nn.MaxPool2d(2), [(2, 3, 8, 8)]),
    "maxpool2d_overlap_ceil": (lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True), [(2, 3, 8, 9)]),
    "maxpool2d_dilated": (lambda nn: nn.MaxPool2d((2, 3), (1, 2), dilation=2), [(2, 2, 8, 9)]),
    "avgpool1d": (lambda nn: nn.AvgPool1d(3, 2, 1), [(2, 3, 10)]),
    "avgpool2d": (lambda nn: nn.AvgPool2d(2), [(2, 3, 8, 8)]),
    "avgpool2d_excl_pad": (lambda nn: nn.AvgPool2d(3, 2, 1, count_include_pad=False), [(2, 3, 7, 8)]),
    "avgpool2d_ceil": (lambda nn: nn.AvgPool2d(3, 2, 1, ceil_mode=True), [(2, 3, 8, 9)]),
    "avgpool2d_ceil_excl": (lambda nn: nn.AvgPool2d(2, 3, 1, ceil_mode=True, count_include_pad=False),
                            [(1, 2, 8, 6)]),
    "avgpool2d_divisor": (lambda nn: nn.AvgPool2d(2, divisor_override=3), [(1, 2, 6, 6)]),
    "adaptive_avg1d": (lambda nn: nn.AdaptiveAvgPool1d(4), [(2, 3, 10)]),
    "adaptive_avg2d": (lambda nn: nn.AdaptiveAvgPool2d((3, 5)), [(2, 3, 7, 10)]),
    "adaptive_avg2d_global": (lambda nn: nn.AdaptiveAvgPool2d(1), [(2, 3, 5, 4)]),
    "adaptive_avg2d_divisible": (lambda nn: nn.AdaptiveAvgPool2d((2, None)), [(2, 3, 6, 4)]),
    "layernorm": (lambda nn: nn.LayerNorm(5), [(3, 4, 5)]),
    "layernorm_2d_nobias": (lambda nn: nn.LayerNorm((4, 5), bias=False), [(3, 4, 5)]),
    "layernorm_noaffine": (lambda nn: nn.LayerNorm(5, elementwise_affine=False), [(3, 5)]),
    "groupnorm": (lambda nn: nn.GroupNorm(2, 6), [(3, 6, 4, 2)]),
    "groupnorm_noaffine": (lambda nn: nn.GroupNorm(3, 3, affine=False), [(2, 3, 5)]),
    "dropout_p0": (lambda nn: nn.Dropout(0.0), [(4, 5)]),
    "relu": (lambda nn: nn.ReLU(), [(4, 5)]),
    "relu6": (lambda nn: nn.ReLU6(), [(4, 5)]),
    "leaky_relu": (lambda nn: nn.LeakyReLU(0.2), [(4, 5)]),
    "elu": (lambda nn: nn.ELU(0.7), [(4, 5)]),
    "gelu": (lambda nn: nn.GELU(), [(4, 5)]),
    "gelu_tanh": (lambda nn: nn.GELU("tanh"), [(4, 5)]),
    "silu": (lambda nn: nn.SiLU(), [(4, 5)]),
    "mish": (lambda nn: nn.Mish(), [(4, 5)]),
    "softplus": (lambda nn: nn.Softplus(), [(4, 5)]),
    "softplus_beta": (lambda nn: nn.Softplus(beta=2.0, threshold=1.0), [(4, 5)]),
    "hardswish": (lambda nn: nn.Hardswish(), [(4, 5)]),
    "hardsigmoid": (lambda nn: nn.Hardsigmoid(), [(4, 5)]),
    "hardtanh": (lambda nn: nn.Hardtanh(-0.5, 0.7), [(4, 5)]),
    "tanh": (lambda nn: nn.Tanh(), [(4, 5)]),
    "sigmoid": (lambda nn: nn.Sigmoid(), [(4, 5)]),
    "logsigmoid": (lambda nn: nn.LogSigmoid(), [(4, 5)]),
    "softsign": (lambda nn: nn.Softsign(), [(4, 5)]),
    "softmax": (lambda nn: nn.Softmax(dim=1), [(4, 5)]),
    "softmax_neg": (lambda nn: nn.Softmax(dim=-1), [(2, 4, 5)]),
    "softmin": (lambda nn: nn.Softmin(dim=0), [(4, 5)]),
    "log_softmax": (lambda nn: nn.LogSoftmax(dim=1), [(4, 5)]),
}


# torch's float64 hardsigmoid backward multiplies by a float32 1/6
LOOSE = {"hardsigmoid": 1e-7}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_torch(name):
    build, shapes = LAYERS[name]
    tm, lm = pair(build)
    parity(tm, lm, *[arr(*s) for s in shapes], tol=LOOSE.get(name, 1e-9))


@pytest.mark.parametrize("name", ["linear", "conv2d", "conv_transpose2d", "layernorm", "gelu"])
def test_layer_float32(name):
    build, shapes = LAYERS[name]
    tm, lm = pair(build, dtype="float32")
    parity(tm, lm, *[arr(*s, dtype="float32") for s in shapes], tol=1e-5)


@pytest.mark.parametrize("kind,shape", [("BatchNorm1d", (8, 4)), ("BatchNorm1d", (8, 4, 5)),
                                        ("BatchNorm2d", (6, 4, 3, 5))])
@pytest.mark.parametrize("opts", [{}, {"momentum": None}, {"affine": False}, {"track_running_stats": False},
                                  {"momentum": 0.3, "eps": 1e-3}])
def test_batchnorm_train_then_eval(kind, shape, opts):
    tm, lm = pair(lambda nn: getattr(nn, kind)(4, **opts))
    for _ in range(2):
        parity(tm.train(), lm.train(), arr(*shape))
    parity(tm.eval(), lm.eval(), arr(*shape))
    assert list(lm.state_dict()) == list(tm.state_dict())


def test_batchnorm_errors():
    bn = tl.nn.BatchNorm2d(3)
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        bn(tl.randn(2, 3, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        tl.nn.BatchNorm1d(3)(tl.randn(1, 3))


@pytest.mark.parametrize("padding_idx", [None, 1, -2])
def test_embedding(padding_idx):
    tm, lm = pair(lambda nn: nn.Embedding(10, 4, padding_idx=padding_idx))
    idx = np.array([[1, 2, 8], [1, 1, 0]])
    parity(tm, lm, idx)
    if padding_idx is not None:
        assert not lm.weight.grad.numpy()[padding_idx % 10].any()
        fresh = tl.nn.Embedding(10, 4, padding_idx=padding_idx)
        assert not fresh.weight.detach().numpy()[padding_idx % 10].any()


def test_embedding_max_norm():
    tm, lm = pair(lambda nn: nn.Embedding(10, 4, max_norm=1.0))
    idx = np.array([3, 3, 5])
    parity(tm, lm, idx)
    close(lm.weight, tm.weight, 1e-6, "renormalised weight")


def test_embedding_from_pretrained():
    w = tl.randn(5, 3)
    e = tl.nn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad
    close(e(tl.tensor([4, 0])), w.numpy()[[4, 0]])


def test_dropout_statistics_and_eval():
    tl.manual_seed(0)
    d = tl.nn.Dropout(0.3)
    x = tl.ones(200, 500)
    y = d(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    assert d.eval()(x) is x
    assert not tl.nn.Dropout(1.0)(x).numpy().any()
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        tl.nn.Dropout(1.5)


def test_dropout_gradient_uses_the_same_mask():
    x = tl.randn(50, 40, requires_grad=True)
    y = tl.nn.functional.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.detach().numpy() != 0) * 2.0)


def test_dropout_uses_default_generator():
    tl.manual_seed(3)
    a = tl.nn.functional.dropout(tl.ones(100), 0.5).numpy()
    tl.manual_seed(3)
    b = tl.nn.functional.dropout(tl.ones(100), 0.5).numpy()
    np.testing.assert_array_equal(a, b)


def test_conv_transpose_output_size():
    tm, lm = pair(lambda nn: nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1))
    x = arr(1, 2, 4, 4)
    out = lm(tl.tensor(x), output_size=[8, 8])
    close(out, tm(torch.tensor(x), output_size=[8, 8]))


def test_maxpool_return_indices_match_torch():
    x = arr(2, 3, 9, 8)
    lo, li = tl.nn.MaxPool2d(3, 2, 1, return_indices=True)(tl.tensor(x))
    to, ti = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)(torch.tensor(x))
    close(lo, to)
    np.testing.assert_array_equal(li.numpy(), ti.numpy())
    assert li.dtype == tl.int64


def test_layer_errors_match_torch():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        tl.nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        tl.nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(RuntimeError, match=r"Given groups=1, weight of size \[4, 3, 3, 3\], expected "
                                           r"input\[1, 2, 5, 5\] to have 3 channels, but got 2 channels instead"):
        tl.nn.Conv2d(3, 4, 3)(tl.randn(1, 2, 5, 5))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        tl.nn.Conv2d(3, 4, 5)(tl.randn(1, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"):
        tl.nn.Conv2d(3, 4, 3)(tl.randn(3, 5))
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        tl.nn.Linear(3, 4)(tl.randn(2, 5))
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        tl.nn.MaxPool2d(2, padding=2)(tl.randn(1, 1, 5, 5))


# ---------------------------------------------------------------- default initialisation
def _stats(t):
    a = t.detach().numpy().astype(np.float64)
    return a.mean(), a.std(), a.min(), a.max()


@pytest.mark.parametrize("build", [lambda nn: nn.Linear(512, 512), lambda nn: nn.Conv2d(64, 128, 3),
                                   lambda nn: nn.ConvTranspose2d(64, 32, 4), lambda nn: nn.Embedding(1000, 64),
                                   lambda nn: nn.Bilinear(40, 50, 60)])
def test_default_init_statistics_match_torch(build):
    torch.manual_seed(0)
    tm, lm = build(torch.nn), build(tl.nn)
    tps = dict(tm.named_parameters())
    for name, p in lm.named_parameters():
        assert p.shape == tps[name].shape and p.dtype == tl.float32 and p.requires_grad
        lm_, ls, lmin, lmax = _stats(p)
        tm_, ts, tmin, tmax = _stats(tps[name])
        n = p.numel()
        assert abs(ls - ts) < 5 * ts / math.sqrt(2 * n) + 1e-4, name
        assert abs(lm_ - tm_) < 6 * ts / math.sqrt(n) + 1e-4, name
        if "Embedding" not in type(lm).__name__:
            assert lmax <= abs(tmax) * 1.02 + 1e-3 and lmin >= -abs(tmin) * 1.02 - 1e-3, name


def test_linear_init_bounds():
    lin = tl.nn.Linear(512, 256)
    bound = 1 / math.sqrt(512)
    w = lin.weight.detach().numpy()
    assert abs(w).max() <= bound and abs(w).max() > 0.98 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert abs(lin.bias.detach().numpy()).max() <= bound


def test_norm_layer_init():
    for m in (tl.nn.BatchNorm2d(3), tl.nn.LayerNorm(3), tl.nn.GroupNorm(1, 3)):
        np.testing.assert_array_equal(m.weight.detach().numpy(), 1)
        np.testing.assert_array_equal(m.bias.detach().numpy(), 0)


def test_device_and_dtype_kwargs():
    lin = tl.nn.Linear(3, 2, dtype=tl.float64, device="cpu")
    assert lin.weight.dtype == tl.float64 and lin.bias.dtype == tl.float64
    conv = tl.nn.Conv2d(1, 1, 2, dtype=tl.float64)
    assert conv(tl.randn(1, 1, 3, 3, dtype=tl.float64)).dtype == tl.float64


# ---------------------------------------------------------------- devices (issue 9)
# Every layer above, and the larger modules below, run on another device against the same module
# on cpu (not against torch): on meta (everywhere) the output, every gradient and buffer have
# cpu's shapes and dtypes and the device's placement; on the simulated cuda device (everywhere)
# and a real GPU (where present) their values match too.
DEVICE_LAYERS = {name: (build, [arr(*s) for s in shapes]) for name, (build, shapes) in LAYERS.items()}
DEVICE_LAYERS.update({
    "batchnorm2d": (lambda nn: nn.BatchNorm2d(3), [arr(4, 3, 5, 5)]),
    "embedding": (lambda nn: nn.Embedding(10, 4, padding_idx=0), [RNG.integers(0, 10, (3, 5))]),
    "lstm": (lambda nn: nn.LSTM(4, 6, num_layers=2, batch_first=True), [arr(2, 5, 4)]),
    "gru_bidirectional": (lambda nn: nn.GRU(4, 3, bidirectional=True), [arr(5, 2, 4)]),
    "multihead_attention": (lambda nn: nn.MultiheadAttention(8, 2, batch_first=True),
                            [arr(2, 5, 8), arr(2, 6, 8), arr(2, 6, 8)]),
    "transformer_encoder_layer": (lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
                                  [arr(2, 5, 8)]),
    "cross_entropy": (lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1), [arr(6, 4), RNG.integers(0, 4, 6)]),
    "mse": (lambda nn: nn.MSELoss(), [arr(3, 4), arr(3, 4)]),
})

ON_DEVICES = [
    pytest.param("meta", id="meta"),
    pytest.param("sim", id="cuda_simulated"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
        not tl.cuda.is_available(), reason=f"needs a CUDA GPU: {tl.cuda.unavailable_reason()}")),
]


def _run_layer(module, inputs, dev):
    """Output, input gradients, parameter gradients and buffers of one forward/backward on ``dev``."""
    module = module.to(dev)
    xs = [tl.tensor(x, device=dev, requires_grad=x.dtype.kind == "f") for x in inputs]
    out = module(*xs)
    out = out[0] if isinstance(out, tuple) else out
    if out.requires_grad:
        out.backward(tl.ones(out.shape, dtype=out.dtype, device=dev))
    return ({"output": out} | {f"grad of input {i}": x.grad for i, x in enumerate(xs)}
            | {f"grad of {n}": p.grad for n, p in module.named_parameters()}
            | {f"buffer {n}": b for n, b in module.named_buffers()})


@pytest.mark.parametrize("device", ON_DEVICES)
@pytest.mark.parametrize("name", sorted(DEVICE_LAYERS))
def test_layer_on_device_matches_cpu(name, device):
    build, inputs = DEVICE_LAYERS[name]
    cpu_module = build(tl.nn).double()
    dev_module = build(tl.nn).double()
    dev_module.load_state_dict(cpu_module.state_dict())
    want = _run_layer(cpu_module, inputs, "cpu")
    if device == "sim":
        with simulated_cuda(0) as dev:
            got = _run_layer(dev_module, inputs, dev)
            got = {k: None if v is None else (v.device, v.cpu()) for k, v in got.items()}
    else:
        dev = tl.device(device)
        got = {k: None if v is None else (v.device, v if device == "meta" else v.cpu())
               for k, v in _run_layer(dev_module, inputs, dev).items()}
    assert got.keys() == want.keys()
    for what, w in want.items():
        if w is None:
            assert got[what] is None, what
            continue
        where, g = got[what]
        assert where == dev, f"{what} on {where}"
        assert (tuple(g.shape), g.dtype) == (tuple(w.shape), w.dtype), f"{what}: shape/dtype"
        if device != "meta":
            close(g, w, 1e-9, what)
