"""ONNX coverage (issue 20): nn modules with an ONNX counterpart and the registry's elementwise,
reduction, movement, indexing and matmul ops, each exported, checked with ``full_check`` and run in
onnxruntime against tapelab's eager result (rtol 1e-4, atol 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tapelab as torch  # noqa: E402
from tapelab import nn  # noqa: E402
import tapelab.nn.functional as F  # noqa: E402


def _leaves(out) -> list:
    return [x for o in out for x in _leaves(o)] if isinstance(out, (tuple, list)) else [out]


def _check(model, *args, dynamic=False, axis=0, opset=17):
    """Export, check, and compare onnxruntime with eager (also with the batch ``axis`` 2 longer
    when ``dynamic``)."""
    if isinstance(model, nn.Module):
        model.eval()
    names = [f"in{i}" for i in range(len(args))]
    axes = {n: {axis: "batch"} for n in names} if dynamic else None
    ex = torch.onnx.build(model, args, input_names=names, dynamic_axes=axes, opset_version=opset)
    onnx.checker.check_model(ex.model, full_check=True)
    session = torch.onnx.InferenceSession(ex.model, numpy=True)
    grown = tuple(torch.cat([a, a.narrow(axis, 0, 1), a.narrow(axis, 0, 1)], axis) for a in args)
    for feed in [args] + ([grown] if dynamic else []):
        got = session(*feed)
        with torch.no_grad():
            want = _leaves(model(*feed))
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def _x(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


MODULES = {
    "conv1d": (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=1), (2, 3, 9)),
    "conv2d_dilated_groups": (lambda: nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=2, bias=False), (2, 4, 7, 7)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 2), (1, 2, 4, 4, 4)),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1), (2, 3, 5, 5)),
    "maxpool1d": (lambda: nn.MaxPool1d(3, stride=2, padding=1), (2, 3, 9)),
    "maxpool2d_ceil": (lambda: nn.MaxPool2d(3, stride=2, ceil_mode=True), (2, 3, 8, 8)),
    "avgpool2d_pad": (lambda: nn.AvgPool2d(3, stride=2, padding=1), (2, 3, 8, 8)),
    "avgpool2d_nopadcount": (lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (2, 3, 8, 8)),
    "adaptive_avg_2x2": (lambda: nn.AdaptiveAvgPool2d(2), (2, 3, 8, 8)),
    "batchnorm1d": (lambda: nn.BatchNorm1d(5), (4, 5)),
    "instancenorm2d": (lambda: nn.InstanceNorm2d(3, affine=True), (2, 3, 5, 5)),
    "groupnorm": (lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    "layernorm_2d": (lambda: nn.LayerNorm((4, 5)), (2, 4, 5)),
    "layernorm_no_affine": (lambda: nn.LayerNorm(5, elementwise_affine=False), (3, 5)),
    "linear_no_bias": (lambda: nn.Linear(5, 3, bias=False), (4, 5)),
    "flatten_unflatten": (lambda: nn.Sequential(nn.Flatten(), nn.Unflatten(1, (6, 4))), (2, 3, 8)),
    "dropout_eval": (lambda: nn.Sequential(nn.Dropout(0.5), nn.Dropout2d(0.3), nn.AlphaDropout(0.2)), (2, 3, 4, 4)),
    "pixel_shuffle": (lambda: nn.PixelShuffle(2), (1, 8, 3, 3)),
    "zero_reflect_replicate_pad": (lambda: nn.Sequential(nn.ZeroPad2d((1, 2, 0, 1)), nn.ReflectionPad2d(1),
                                                          nn.ReplicationPad2d(1)), (1, 2, 4, 4)),
    "upsample_nearest": (lambda: nn.Upsample(scale_factor=2, mode="nearest"), (1, 2, 3, 3)),
    "embedding_max_norm_free": (lambda: nn.Embedding(10, 4), "ints"),
    "lstm_bidirectional": (lambda: nn.LSTM(3, 4, batch_first=True, bidirectional=True), (2, 5, 3)),
    "gru_2layer": (lambda: nn.GRU(3, 4, num_layers=2), (5, 2, 3)),
    "rnn_relu": (lambda: nn.RNN(3, 4, nonlinearity="relu"), (5, 2, 3)),
    "lstm_cell": (lambda: nn.LSTMCell(3, 4), (2, 3)),
    "adaptive_max_2x2": (lambda: nn.AdaptiveMaxPool2d(2), (2, 3, 8, 8)),
    "upsample_bilinear": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), (1, 2, 3, 3)),
    "conv_transpose1d": (lambda: nn.ConvTranspose1d(3, 2, 3, stride=2), (2, 3, 5)),
    "conv_same_circular": (lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding="same"),
                                                 nn.Conv2d(3, 3, 3, padding=1, padding_mode="circular")), (1, 2, 5, 5)),
    "maxpool_dilated_3d": (lambda: nn.Sequential(nn.MaxPool3d(2), nn.Flatten(2), nn.MaxPool1d(2, dilation=2)),
                           (1, 2, 4, 4, 4)),
    "norms_1d_3d_rms_lrn": (lambda: nn.Sequential(nn.BatchNorm3d(2), nn.Flatten(2), nn.InstanceNorm1d(2),
                                                  nn.RMSNorm(8), nn.LocalResponseNorm(2)), (1, 2, 2, 2, 2)),
    "lppool_shuffle_softmax2d": (lambda: nn.Sequential(nn.LPPool2d(2, 2), nn.ChannelShuffle(2), nn.Softmax2d()),
                                 (1, 4, 4, 4)),
    "transformer_encoder_norm_first": (
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True,
                                                                 activation="gelu"), 2, enable_nested_tensor=False),
        (2, 5, 8)),
}

ACTIVATIONS = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Softplus", "Hardswish",
               "Hardsigmoid", "Hardtanh", "Tanh", "Sigmoid", "Softsign", "Tanhshrink", "LogSigmoid", "PReLU",
               "Softmax", "LogSoftmax", "Softmin", "Threshold", "Hardshrink", "Softshrink", "GLU"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_nn_module(name):
    torch.manual_seed(0)
    make, shape = MODULES[name]
    m = make()
    if shape == "ints":
        return _check(m, torch.from_numpy(np.random.default_rng(0).integers(0, 10, (3, 4))), dynamic=True)
    if isinstance(m, nn.modules.batchnorm._BatchNorm) or name == "instancenorm2d":
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(_x(*p.shape, seed=3) * 0.5 + 1)
        if m.running_mean is not None:
            m.running_mean.copy_(_x(*m.running_mean.shape, seed=4) * 0.1)
            m.running_var.copy_(_x(*m.running_var.shape, seed=5).abs() + 0.5)
    _check(m, _x(*shape), dynamic=True, axis=1 if name in ("gru_2layer", "rnn_relu") else 0)


def test_a_sequence_axis_of_an_unrolled_rnn_is_refused():
    with pytest.raises(torch.onnx.ExportError, match="changes with a dynamic axis"):
        torch.onnx.build(nn.GRU(3, 4).eval(), (_x(5, 2, 3),), input_names=["x"], dynamic_axes={"x": {0: "seq"}})


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation(name):
    kwargs = {"Softmax": {"dim": 1}, "LogSoftmax": {"dim": 1}, "Softmin": {"dim": 1}, "Threshold": (0.1, 20.0)}
    arg = kwargs.get(name, {})
    m = getattr(nn, name)(*arg) if isinstance(arg, tuple) else getattr(nn, name)(**arg)
    _check(m, _x(4, 6) * 3, dynamic=True)


class _Residual(nn.Module):
    """torchvision's habits: in-place activations and ``out += identity`` on intermediates."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 3, 3, padding=1, bias=False), nn.BatchNorm2d(3)
        self.relu, self.relu6 = nn.ReLU(inplace=True), nn.ReLU6(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn(self.conv(x)))
        out += x
        return self.relu6(out * 4)


def test_in_place_ops_on_intermediates():
    torch.manual_seed(0)
    _check(_Residual(), _x(2, 3, 5, 5), dynamic=True)


def test_unfold_and_fold():
    _check(nn.Unfold(2, padding=1, stride=2), _x(1, 2, 4, 4), dynamic=True)
    _check(nn.Fold((3, 3), 2), _x(1, 8, 4), dynamic=True, opset=18)         # ONNX Col2Im is opset 18
    with pytest.raises(torch.onnx.ExportError, match="opset_version=18"):
        torch.onnx.build(nn.Fold((3, 3), 2), (_x(1, 8, 4),))


def test_batch_statistics_normalization():
    """``F.batch_norm(training=True)``: the fused normalization op with its batch statistics."""
    w, b = _x(3, seed=2), _x(3, seed=3)
    _check(lambda x: F.batch_norm(x, None, None, w, b, training=True), _x(4, 3, 5, 5), dynamic=True)


def test_distances():
    _check(nn.CosineSimilarity(1), _x(3, 4), _x(3, 4, seed=1), dynamic=True)
    _check(nn.PairwiseDistance(), _x(3, 4), _x(3, 4, seed=1), dynamic=True)


def test_multihead_attention_with_masks_and_weights():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    q, kv = _x(2, 4, 8), _x(2, 6, 8, seed=1)
    pad = torch.tensor([[False] * 5 + [True], [False] * 6])
    attn_mask = torch.from_numpy(np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32))

    def f(q, kv, pad):
        out, w = mha(q, kv, kv, key_padding_mask=pad, attn_mask=attn_mask)
        return out, w
    _check(f, q, kv, pad, dynamic=True)


def test_transformer_decoder_with_memory_masks():
    torch.manual_seed(0)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True), 2).eval()
    tgt, memory = _x(2, 4, 8), _x(2, 6, 8, seed=1)
    mem_pad = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])

    def f(tgt, memory, mem_pad):
        mask = nn.Transformer.generate_square_subsequent_mask(4)
        return dec(tgt, memory, tgt_mask=mask, tgt_is_causal=True, memory_key_padding_mask=mem_pad)
    _check(f, tgt, memory, mem_pad, dynamic=True)


OPS = {
    "arith": lambda x, y: (x + y * 2 - 1) / (y.abs() + 1) ** 2,
    "unary": lambda x, y: torch.exp(x).log1p() + x.sin() * x.cos() + torch.tanh(x) + x.sigmoid() + torch.erf(x)
    + x.abs().sqrt().rsqrt().reciprocal() + torch.atan(x) + x.expm1() + x.abs().log2() + torch.sign(x),
    "rounding": lambda x, y: x.floor() + x.ceil() + (x * 3).round() + x.trunc() + torch.round(x, decimals=1),
    "div_modes": lambda x, y: torch.div(x, y, rounding_mode="floor") + torch.div(x, y, rounding_mode="trunc")
    + torch.remainder(x, y) + torch.fmod(x, y),
    "compare_where": lambda x, y: torch.where((x > y) & (x <= 1) | (x == 0) ^ (y != 1), x, y.clamp(-0.5, 0.5)),
    "bool_mask_select": lambda x, y: (x[x > 0], x[(x > 0).all(1)]),
    "clamp_max_min": lambda x, y: torch.maximum(x, y) + torch.minimum(x, y) + x.clamp(min=0) + x.clamp(max=0.1),
    "reductions": lambda x, y: (x.sum(1) + x.mean(1) + x.amax(1) + x.amin(1) + x.prod(1) + x.var(1) + x.std(1)
                                + x.logsumexp(1) + x.norm(dim=1) + x.norm(p=1, dim=1)),
    "max_dim_argmax": lambda x, y: (x.max(1).values, x.min(1, keepdim=True).values, x.argmax(1), x.argmin(),
                                    x.max()),
    "cumsum_all_any": lambda x, y: (x.cumsum(1), (x > 0).all(1), (x > 0).any(), (x > 0).sum(1)),
    "movement": lambda x, y: (x.t().reshape(-1, 2).permute(1, 0), x[:, None, ::2], x[1:, -1], x[..., 1:3],
                              x.flip(1), x.repeat(2, 1), x.unsqueeze(0).expand(3, -1, -1), x.tril(), x.triu(1)),
    "cat_stack_split": lambda x, y: (torch.cat([x, y], 1), torch.stack([x, y], 0), *x.chunk(2, 1), x.narrow(1, 1, 2)),
    "indexing": lambda x, y: (torch.gather(x, 1, (y.abs() * 2).long().clamp(max=3)), x.masked_fill(y > 0, -1.0),
                              x[torch.tensor([0, 2])], x[:, torch.tensor([3, 1])],
                              x.index_select(1, torch.tensor([0, 3]))),
    "matmul_forms": lambda x, y: (x @ y.t(), torch.mm(x, y.t()), torch.bmm(x[None], y.t()[None]), x @ y[0]),
    "one_hot_cast": lambda x, y: (F.one_hot((x.abs() * 2).long().clamp(max=3), 4), x.to(torch.float64), x.int()),
    "pad_modes": lambda x, y: (F.pad(x[None], (1, 2), value=0.5), F.pad(x[None, None], (1, 1, 1, 1), mode="reflect")),
    "softmax_family": lambda x, y: (F.softmax(x, 1), F.log_softmax(x, 0), F.gelu(x, approximate="tanh"),
                                    F.layer_norm(x, (4,))),
    "binary_extras": lambda x, y: (torch.atan2(x, y), torch.atan2(x, -y), torch.hypot(x, y), torch.logaddexp(x, y),
                                   torch.xlogy(x.abs(), y.abs()), torch.lerp(x, y, 0.3), torch.lerp(x, y, 0.8),
                                   torch.lerp(x, y, y.sigmoid()), torch.addcmul(x, x, y, value=0.5),
                                   torch.addcdiv(x, x, y.abs() + 1, value=2), torch.fmax(x, y), torch.fmin(x, y)),
    "unary_extras": lambda x, y: (x.frac(), torch.nan_to_num(x.log()), torch.isposinf(1 / (x * 0)),
                                  torch.isneginf(-1 / (x * 0)), x.roll(1, 1), x.roll((1, -1), (0, 1)),
                                  torch.zeros_like(x).fill_(2.5), torch.count_nonzero(x > 0, 1)),
    "scatter_nonzero": lambda x, y: (torch.zeros(3, 4).scatter(1, (y.abs() * 2).long().clamp(max=3)[:, :2], x[:, :2]),
                                     torch.ones(3, 4).scatter_add(0, torch.tensor([[0, 1, 2, 0]]), x[:1]),
                                     torch.zeros(3, 4).scatter(1, torch.tensor([[1], [2], [3]]), 7.0),
                                     torch.nonzero(x > 0)),
    "arange_full": lambda x, y: x + torch.arange(4) * 0.5 + torch.ones(4) + torch.zeros_like(x),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops(name):
    _check(OPS[name], _x(3, 4), _x(3, 4, seed=1) + 0.1)


def test_integer_bitwise_needs_opset_18():
    f = lambda a, b: (a & b) | (a ^ b)  # noqa: E731
    a, b = torch.tensor([[5, 3], [1, 7]]), torch.tensor([[1, 2], [3, 4]])
    with pytest.raises(torch.onnx.ExportError, match="opset_version >= 18"):
        torch.onnx.build(f, (a, b))
    _check(f, a, b, opset=18)


@pytest.mark.parametrize("opset", [17, 21])
def test_gelu_and_reductions_at_both_opsets(opset):
    _check(lambda x: F.gelu(x).mean(1, keepdim=True) + x.amax(0), _x(3, 4), opset=opset)
