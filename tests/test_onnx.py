"""tapelab.onnx (issue 20): export, check, run in onnxruntime, bisect a planted mismatch.

Every model of a small zoo exports with a dynamic batch axis, passes ``onnx.checker`` with
``full_check``, and onnxruntime matches tapelab to rtol 1e-4 / atol 1e-5 at the traced batch size
and at another one. tapelab's layers are checked against PyTorch elsewhere; here the oracle is
tapelab's own eager run, and the PyTorch program of tests/programs/onnx_export.py closes the loop:
torch's export and tapelab's, each served by onnxruntime, give the same logits.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")          # the optional extra tapelab[onnx]
ort = pytest.importorskip("onnxruntime")

import tapelab  # noqa: E402
from tapelab import nn  # noqa: E402
from tapelab.core.dispatch import apply  # noqa: E402
from tapelab.core.registry import Op  # noqa: E402
import tapelab.nn.functional as F  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


# ---------------------------------------------------------------- the zoo
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 16), nn.GELU(),
                                 nn.Linear(16, 3))

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=-1)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.pool, self.pool3 = nn.MaxPool2d(2), nn.MaxPool2d(3, stride=1, padding=1)
        self.avg, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 4)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv1(x))))
        x = F.avg_pool2d(self.pool3(torch_sigmoid(self.conv2(x))), 1)
        return self.fc(tapelab.flatten(self.avg(x), 1)).softmax(-1)


def torch_sigmoid(x):
    return tapelab.sigmoid(x)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.gru, self.rnn = nn.GRU(8, 5), nn.RNN(5, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y.transpose(0, 1))
        y, _ = self.rnn(y)
        return y, h


class Seq2Seq(nn.Module):
    """A Transformer encoder-decoder with a causal target mask and a source padding mask."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.t = nn.Transformer(16, 4, 1, 1, 32, dropout=0.1, batch_first=True)
        self.out = nn.Linear(16, 20)

    def forward(self, src, tgt):
        mask = self.t.generate_square_subsequent_mask(tgt.shape[1])
        y = self.t(self.emb(src), self.emb(tgt), tgt_mask=mask, src_key_padding_mask=src == 0)
        return self.out(y)


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.e, self.ln, self.fc = nn.Embedding(30, 6, padding_idx=0), nn.LayerNorm(6), nn.Linear(6, 2)

    def forward(self, idx):
        return self.fc(self.ln(self.e(idx)).mean(1))


def _ints(high, *shape):
    return tapelab.from_numpy(np.random.default_rng(sum(shape)).integers(1, high, shape))


ZOO = {
    "mlp": (MLP, lambda: (tapelab.randn(4, 8),), {"x": {0: "batch"}}),
    "cnn": (CNN, lambda: (tapelab.randn(2, 3, 12, 12),), {"x": {0: "batch"}}),
    "lstm_gru_rnn": (Recurrent, lambda: (tapelab.randn(3, 5, 6),), {"x": {0: "batch"}}),
    "transformer": (Seq2Seq, lambda: (_ints(20, 2, 7), _ints(20, 2, 5)), {"src": {0: "batch"}, "tgt": {0: "batch"}}),
    "embedding": (Bag, lambda: (_ints(30, 3, 4),), {"idx": {0: "batch"}}),
}


def _model(name):
    tapelab.manual_seed(0)
    cls, make_args, axes = ZOO[name]
    model = cls()
    if name == "cnn":        # running statistics that are not the defaults
        model.bn.running_mean.copy_(tapelab.randn(8) * 0.1)
        model.bn.running_var.copy_(tapelab.rand(8) + 0.5)
    return model.eval(), make_args(), axes


def _grow(args, k=3):
    """The inputs with ``k`` more rows along the batch axis."""
    return tuple(tapelab.cat([a] + [a[:1]] * k, 0) for a in args)


def _eager(model, args):
    with tapelab.no_grad():
        out = model(*args)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_exports_checks_and_matches_onnxruntime(name, tmp_path):
    model, args, axes = _model(name)
    path = tmp_path / f"{name}.onnx"
    tapelab.onnx.export(model, args, str(path), input_names=list(axes), dynamic_axes=axes)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    assert proto.opset_import[0].version == 17 and proto.ir_version == 8
    params = {n for n, _ in model.named_parameters()}
    assert [i.name for i in proto.graph.input] == list(axes)                 # parameters are initializers
    assert params & {i.name for i in proto.graph.initializer}
    first = proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert first.dim_param == "batch"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for feed_args in (args, _grow(args)):
        got = session.run(None, {n: a.numpy() for n, a in zip(axes, feed_args)})
        want = _eager(model, feed_args)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def test_transformer_sequence_axes_are_dynamic_too(tmp_path):
    model, (src, tgt), _ = _model("transformer")
    axes = {"src": {0: "batch", 1: "src_len"}, "tgt": {0: "batch", 1: "tgt_len"}}
    path = str(tmp_path / "t.onnx")
    tapelab.onnx.export(model, (src, tgt), path, input_names=["src", "tgt"], dynamic_axes=axes)
    session = tapelab.onnx.InferenceSession(path, numpy=True)
    src2, tgt2 = _ints(20, 3, 9), _ints(20, 3, 4)
    np.testing.assert_allclose(session(src2, tgt2), _eager(model, (src2, tgt2))[0], rtol=RTOL, atol=ATOL)


def test_image_height_and_width_are_dynamic_too():
    tapelab.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(3, stride=2, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)).eval()
    ex = tapelab.onnx.build(m, (tapelab.randn(2, 3, 9, 9),), input_names=["x"],
                            dynamic_axes={"x": {0: "batch", 2: "height", 3: "width"}})
    session = tapelab.onnx.InferenceSession(ex.model, numpy=True)
    for shape in [(3, 3, 12, 7), (1, 3, 16, 16)]:
        x = tapelab.randn(*shape)
        np.testing.assert_allclose(session(x), _eager(m, (x,))[0], rtol=RTOL, atol=ATOL)


class _GPTBlock(nn.Module):
    """nanoGPT's attention: a causal-mask buffer sliced to the sequence, beside SDPA's is_causal."""

    def __init__(self, d=16, heads=2, block=32):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj, self.ln = nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d)
        self.register_buffer("bias", tapelab.tril(tapelab.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v + F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class _GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(50, 16), nn.Embedding(32, 16)
        self.blocks, self.head = nn.ModuleList([_GPTBlock(), _GPTBlock()]), nn.Linear(16, 50, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(tapelab.arange(0, idx.shape[1], dtype=tapelab.long))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_gpt_with_dynamic_batch_and_sequence():
    tapelab.manual_seed(0)
    model = _GPT().eval()
    ex = tapelab.onnx.build(model, (_ints(50, 2, 7),), input_names=["idx"],
                            dynamic_axes={"idx": {0: "batch", 1: "seq"}})
    session = tapelab.onnx.InferenceSession(ex.model, numpy=True)
    for shape in [(2, 7), (3, 12), (1, 32), (4, 1)]:
        idx = _ints(50, *shape)
        np.testing.assert_allclose(session(idx), _eager(model, (idx,))[0], rtol=RTOL, atol=ATOL)


def test_scalars_stay_zero_dimensional():
    ex = tapelab.onnx.build(lambda x: (x * 2 + 1).sum() * 3, (tapelab.randn(3),))
    got = tapelab.onnx.InferenceSession(ex.model, numpy=True)(tapelab.ones(3))
    assert got.shape == () and float(got) == 27.0


def test_opset_21_uses_its_ops_and_ir_10(tmp_path):
    model, args, axes = _model("mlp")
    ex = tapelab.onnx.build(model, args, dynamic_axes=axes, opset_version=21)
    assert ex.model.ir_version == 10 and ex.model.opset_import[0].version == 21
    assert "Gelu" in {n.op_type for n in ex.model.graph.node}
    got = tapelab.onnx.InferenceSession(ex.model, numpy=True)(args[0])
    np.testing.assert_allclose(got, _eager(model, args)[0], rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match="opset_version 12"):
        tapelab.onnx.build(model, args, opset_version=12)


def test_parameters_become_named_initializers_and_weights_fold():
    model, args, _ = _model("mlp")
    ex = tapelab.onnx.build(model, args)
    inits = {i.name for i in ex.model.graph.initializer}
    assert {"net.0.bias", "net.3.bias", "net.5.bias"} <= inits
    assert "Transpose" not in {n.op_type for n in ex.model.graph.node}     # linear is one Gemm (transB)
    unfolded = tapelab.onnx.build(model, args, do_constant_folding=False)
    assert {"net.0.weight", "net.0.bias"} <= {i.name for i in unfolded.model.graph.initializer}

    class Transposed(tapelab.nn.Module):      # a parameter-only subgraph: w.t() folds to an initializer
        def __init__(self):
            super().__init__()
            self.w = tapelab.nn.Parameter(tapelab.randn(3, 4))

        def forward(self, x):
            return x @ self.w.t()

    x = (tapelab.randn(2, 4),)
    assert "Transpose" not in {n.op_type for n in tapelab.onnx.build(Transposed(), x).model.graph.node}
    unfolded = tapelab.onnx.build(Transposed(), x, do_constant_folding=False)
    assert "Transpose" in {n.op_type for n in unfolded.model.graph.node}


def test_export_params_false_takes_the_weights_as_inputs():
    model, args, _ = _model("mlp")
    ex = tapelab.onnx.build(model, args, input_names=["x"], export_params=False)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    inputs = [i.name for i in ex.model.graph.input]
    assert inputs[0] == "x" and set(inputs[1:]) == set(state)
    assert not set(state) & {i.name for i in ex.model.graph.initializer}
    got = tapelab.onnx.InferenceSession(ex.model, numpy=True)(args[0], **{k: state[k] for k in inputs[1:]})
    np.testing.assert_allclose(got, _eager(model, args)[0], rtol=RTOL, atol=ATOL)


def test_eval_batch_norm_folds_into_the_convolution_in_onnxruntime(tmp_path):
    """BatchNorm's ``x - running_mean`` is exported as an Add of the negated constant, so onnxruntime's
    Conv fusions take the whole affine chain (and the ReLU) into the convolution."""
    model, args, axes = _model("cnn")
    path, optimized = str(tmp_path / "cnn.onnx"), str(tmp_path / "cnn.opt.onnx")
    tapelab.onnx.export(model, args, path, input_names=["x"], dynamic_axes=axes)
    assert "Sub" not in {n.op_type for n in onnx.load(path).graph.node}
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = optimized
    ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(optimized).graph.node]
    assert not {"Sub", "Mul"} & set(ops[:ops.index("MaxPool")]), ops      # conv1 -> bn -> relu is one node


def test_session_serves_tensors_and_export_writes_file_objects():
    import io
    model, args, _ = _model("embedding")
    buf = io.BytesIO()
    tapelab.onnx.export(model, args, buf, input_names=["idx"], dynamic_axes={"idx": [0]})
    session = tapelab.onnx.InferenceSession(buf.getvalue())
    out = session(args[0])
    assert isinstance(out, tapelab.Tensor)
    np.testing.assert_allclose(out.numpy(), _eager(model, args)[0], rtol=RTOL, atol=ATOL)
    assert session.input_names == ["idx"]
    assert onnx.load_from_string(buf.getvalue()).graph.input[0].type.tensor_type.shape.dim[0].dim_param \
        == "idx_dynamic_axes_1"


class _Unlowered(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x):
        return tapelab.lgamma(self.inner(x))


class _Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _Unlowered()

    def forward(self, x):
        return self.block(x)


def test_an_op_without_lowering_names_op_module_and_line():
    with pytest.raises(tapelab.onnx.UnsupportedOperatorError) as info:
        tapelab.onnx.build(_Holder(), (tapelab.randn(2, 3),))
    msg = str(info.value)
    assert "op 'lgamma'" in msg and "module block" in msg
    assert "test_onnx.py:" in msg and "tapelab.lgamma(self.inner(x))" in msg


def test_control_flow_on_a_dynamic_size_is_refused():
    def f(x):
        return x.relu() if x.shape[0] > 4 else x.sigmoid()
    with pytest.raises(tapelab.onnx.ExportError, match="changes with a dynamic axis"):
        tapelab.onnx.build(f, (tapelab.randn(4, 3),), input_names=["x"], dynamic_axes={"x": {0: "b"}})


def test_is_in_onnx_export_is_true_while_tracing():
    seen = []

    def f(x):
        seen.append(tapelab.onnx.is_in_onnx_export())
        return x * 2
    tapelab.onnx.build(f, (tapelab.randn(2),))
    assert seen and all(seen) and not tapelab.onnx.is_in_onnx_export()


# ---------------------------------------------------------------- verify and the bisection
def test_verify_passes_on_the_zoo(tmp_path):
    for name in ("mlp", "transformer"):
        model, args, axes = _model(name)
        result = tapelab.onnx.verify(model, args, str(tmp_path / f"{name}.onnx"), input_names=list(axes),
                                     dynamic_axes=axes)
        assert result.ok and result.mismatch is None, str(result)
        assert (tmp_path / f"{name}.onnx").exists()


# A deliberately wrong mapping: squares, lowered as x + x (right only at 0 and 2).
_planted = Op("onnx_test_planted_square", lambda xp, x: x * x, onnx=lambda g, x: g.op("Add", x, x))


class _Planted(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre, self.post = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        h = tapelab.tanh(self.pre(x))
        return self.post(apply(_planted, h))


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = _Planted()

    def forward(self, x):
        return self.body(x).relu()


def test_bisection_names_the_planted_wrong_mapping(tmp_path):
    tapelab.manual_seed(0)
    model, x = _Outer(), tapelab.randn(5, 4)
    result = tapelab.onnx.verify(model, (x,), str(tmp_path / "planted.onnx"))
    assert not result.ok
    mm = result.mismatch
    assert mm.op == "onnx_test_planted_square" and mm.module == "body"
    assert "test_onnx.py:" in mm.source and "apply(_planted, h)" in mm.source
    assert mm.max_abs_diff > 1e-3
    assert mm.reference == "onnxruntime"         # both runtimes agree: the lowering is what is wrong
    assert "onnx_test_planted_square" in str(result)


def test_bisection_finds_a_tampered_node_in_a_file(tmp_path):
    """A file whose GELU lowering was edited by hand: verify reads the file and names that node."""
    model, args, axes = _model("mlp")
    path = tmp_path / "mlp.onnx"
    tapelab.onnx.export(model, args, str(path), input_names=["x"], dynamic_axes=axes)
    proto = onnx.load(str(path))
    erf = next(n for n in proto.graph.node if n.op_type == "Erf")
    erf.op_type = "Tanh"
    onnx.save(proto, str(path))
    result = tapelab.onnx.verify(model, args, str(path), input_names=["x"], dynamic_axes=axes)
    assert not result.ok and result.mismatch.op == "gelu" and result.mismatch.module == "net.4"


# ---------------------------------------------------------------- a PyTorch program, unchanged
def test_pytorch_program_exports_with_tapelab_as_torch(tmp_path):
    """tests/programs/onnx_export.py trains, calls torch.onnx.export and serves with onnxruntime."""
    from programs import onnx_export
    got = onnx_export.main(tapelab, 3, str(tmp_path / "tapelab.onnx"))
    assert got[3] == 1.0                               # onnxruntime matched the eager model
    onnx.checker.check_model(onnx.load(str(tmp_path / "tapelab.onnx")), full_check=True)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # torch's legacy (TorchScript) exporter
def test_pytorch_program_serves_the_same_logits_as_torch(tmp_path, request):
    """The same program under the real torch: both exports, each in onnxruntime, give the same numbers
    (``--long``: torch's exporter takes ~25 s to load here)."""
    if not request.config.getoption("--long"):
        pytest.skip("torch's own export runs with --long (about 25 s)")
    import torch
    from programs import onnx_export
    want = onnx_export.main(torch, 3, str(tmp_path / "torch.onnx"))
    got = onnx_export.main(tapelab, 3, str(tmp_path / "tapelab.onnx"))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_mse_loss_exports_each_reduction():
    """mse_loss is one op since it carries PyTorch's node name; its lowering is Sub, Mul and the reduction."""
    class Losses(nn.Module):
        def forward(self, x, t):
            return F.mse_loss(x, t), F.mse_loss(x, t, reduction="sum"), F.mse_loss(x, t, reduction="none")
    import io
    x, t = tapelab.randn(3, 4), tapelab.randn(3, 4)
    f = io.BytesIO()
    tapelab.onnx.export(Losses(), (x, t), f)
    session = ort.InferenceSession(f.getvalue())
    names = [i.name for i in session.get_inputs()]
    for got, want in zip(session.run(None, dict(zip(names, (x.numpy(), t.numpy())))), Losses()(x, t)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)
